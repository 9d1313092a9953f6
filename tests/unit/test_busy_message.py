"""A refused start names the running job as the pages do ("build N", the build it makes), never by its row id (issue 39 §3: one
numbering, "build N" everywhere)."""

from __future__ import annotations

from datetime import datetime

from core.models import BuildRun
from core.pipeline.runs import busy_message


def test_a_running_build_is_named_by_the_build_it_runs_on():
    run = BuildRun(id=57, workspace_id=1, status="running", created_at=datetime(2026, 11, 28, 11, 24))
    said = busy_message(run, on=2)  # the workspace's graph is build 2: the running build makes build 3
    assert said.startswith("a build of this workspace is running (build 3);") and "57" not in said
    promote = BuildRun(id=59, workspace_id=1, status="running", kind="promote", params={"label": "Promote"},
                       created_at=datetime(2026, 11, 28, 11, 24))
    assert busy_message(promote, on=2).startswith("a job (Promote) of this workspace is running (on build 2);")
    job = BuildRun(id=58, workspace_id=1, status="running", kind="promote", params={"label": "Promote variant 'x'"},
                   created_at=datetime(2026, 11, 28, 11, 24))
    assert busy_message(job).startswith("a job (Promote variant 'x') of this workspace is running (started 28 Nov "
                                        "11:24 UTC);")
