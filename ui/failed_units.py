"""Failed units (core/pipeline/failures.py) as the Build page and the Quality page's job panel list them: one row per
unit whose model call still failed after its retries, with its stage, what it is, why, and the build or job it failed in."""

from __future__ import annotations

import streamlit as st

from core.models import FailedUnit
from core.pipeline.runs import run_names
from ui import resources as R


def table(units: list[FailedUnit], key: str, ws_id: int) -> None:
    """Workspace `ws_id`'s units, each with the build or job it last failed in, by name ("build 3", "Promote
    variant 'x' of 28 Nov 11:24 UTC": core/pipeline/runs.py), never by row id."""
    names = run_names(R.store(), ws_id, {u.run_id for u in units if u.run_id is not None})
    st.dataframe([{"stage": u.stage, "unit": u.unit, "what": u.label, "reason": u.reason, "attempts": u.attempts,
                   "failed in": names.get(u.run_id, "") if u.run_id is not None else "", "failed at": u.failed_at}
                  for u in units],
                 hide_index=True, width="stretch", key=key)
