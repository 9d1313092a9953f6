"""The Build page of a finished build opens on its verdict (issue 39 §3): "build N" (the sidebar's number, never a
run's row id), what the graph holds, what is unusual, then the stage figures in expanders; every entity count on
the page is the same number, or says what else it counts (AppTest, on a copy of the built sample)."""

from __future__ import annotations

import re

import pytest
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from core.explore.build_counts import graph_counts
from core.models import FailedUnit
from tests.ui.conftest import app_home, open_page, sample_copy


@pytest.fixture(scope="module")
def home(tmp_path_factory, sample_built):
    home, store = sample_copy(tmp_path_factory, sample_built, "strata_build_verdict")
    with app_home(home):
        yield store, store.require_workspace("sample")


def _walk(node):
    """The page's elements in drawing order."""
    yield node
    for _, child in sorted(getattr(node, "children", {}).items()):
        yield from _walk(child)


def _texts(at: AppTest) -> list[str]:
    """Every text the page shows, in order: alerts, markdown, captions, metrics, expander labels."""
    out = []
    for n in _walk(at.main):
        kind = getattr(n, "type", None)
        if kind == "expander":
            out.append(n.label)
        elif kind == "metric":
            out.append(f"{n.label}: {n.value}")
        elif kind in ("markdown", "caption", "success", "warning", "error", "info"):
            out.append(str(n.value))
    return out


def test_the_verdict_comes_first_with_the_build_number_and_counts_that_agree(home):
    store, ws = home
    at = open_page("views/build.py", "Build")
    texts = _texts(at)
    head = next(i for i, t in enumerate(texts) if t.startswith(f"**Build {ws.build_version} finished** in "))
    labels = [n.label for n in _walk(at.main) if getattr(n, "type", None) == "expander"]
    assert labels[0].startswith("Stages: ") and "HiRAG layers" in labels, "the stage figures sit in expanders"
    assert head < texts.index(labels[0]), "the verdict is drawn before the first expander"
    assert any(t.startswith("**Worth a look**") or t.startswith("**Nothing unusual**") for t in texts[:head + 4])
    # one numbering: the sidebar's build N, no run's row id anywhere on the page
    assert any(f"build {ws.build_version}" in c.value for c in at.sidebar.caption)
    assert not any(re.search(r"\brun \d+", t) for t in texts), [t for t in texts if "run" in t]
    # counts that agree: the verdict, the stage metrics and the communities caption say the same entity count
    gc = graph_counts(store, ws.id)
    facts = next(t for t in texts if "entities after resolution" in t and t.startswith("- "))
    assert f"{gc.entities:,} entities after resolution" in facts
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Entities after resolution"] == f"{gc.entities:,}"
    assert metrics["Summary entities"] == f"{gc.summary_entities:,}"
    assert metrics["Documents"] == f"{gc.documents:,}" and f"{gc.documents:,} documents in" in facts
    said = {int(n.replace(",", "")) for t in texts for n in re.findall(r"([\d,]+) entities after resolution", t)}
    assert said == {gc.entities}, said
    for m in ("HiRAG", "Hierarchical Leiden \\(GraphRAG\\)"):
        line = re.search(rf"{m}: ([\d,]+) communities", facts.replace("\\", ""))
        key = "hirag" if m == "HiRAG" else "leiden"
        if key in gc.methods:
            assert line and int(line.group(1).replace(",", "")) == gc.methods[key].total, (m, facts)


def test_failed_units_are_in_the_verdict_and_named_by_their_build(home):
    store, ws = home
    run = store.latest_run(ws.id, ("build",))
    with store.session() as s:
        s.add(FailedUnit(workspace_id=ws.id, run_id=run.id, stage="reports", unit="x", label="a report",
                         reason="HTTP 500", attempts=2))
        s.commit()
    try:
        at = open_page("views/build.py", "Build")
        assert any(w.value.startswith(f"**Build {ws.build_version} finished** in ") and
                   w.value.endswith(" · 1 failed unit") for w in at.warning), [w.value for w in at.warning]
        notes = "\n".join(_texts(at))
        assert "Worth a look" in notes and "1 failed unit: their model calls still failed" in notes
        table = next(d.value for d in at.dataframe if "reason" in d.value.columns)
        assert list(table["failed in"]) == [f"build {ws.build_version}"]
    finally:
        with store.session() as s:
            for row in s.exec(select(FailedUnit).where(FailedUnit.workspace_id == ws.id)):
                s.delete(row)
            s.commit()
