"""A workspace deleted and created again under the same name (SQLite even gives it the freed id, and its first build
the same build version) never shows the old one's texts, reports or answers: every page cache is keyed by the
workspace's id and creation time (ui/resources.py `ws_key`), not by its name. Deleting a workspace while one of its
runs is active is refused with one line."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.pipeline.runner import create_run
from core.pipeline.runs import JobBusy
from core.store import Store
from core.workspace import delete_workspace
from tests.conftest import TINY_ROWS, build_workspace
from tests.ui.conftest import app_home, open_page, run

QUESTION = "Who designed the Tidewater Bridge?"
OLD_ONLY = ("Lena Marsh", "Okoro", "Harwick", "Salt River")  # only in the old documents (not in the question)


def _page_text(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [e.label for e in at.expander]
    return " ".join(str(p) for p in parts)


def _ask(at: AppTest) -> str:
    at.text_area(key="question").input(QUESTION)
    at.multiselect(key="strategies").set_value(["naive", "hirag"])
    next(b for b in at.button if b.label == "Ask").click()
    run(at)
    return _page_text(at)


def test_a_workspace_made_again_under_its_name_shows_nothing_of_the_old_one(tmp_path, embedder, tiny_corpus,
                                                                            monkeypatch):
    monkeypatch.setenv("STRATA_SAMPLE", "0")
    home = tmp_path / "home"
    old = build_workspace(home, [tiny_corpus], embedder, name="w")
    other = tmp_path / "other"
    other.mkdir()
    for row in TINY_ROWS[2:]:  # Arden Orchards, Kelmouth Choir: no bridge, no Lena Marsh
        (other / f"{row['id']}.md").write_text(f"# {row['title']}\n\n{row['text']}\n", encoding="utf-8")
    with app_home(home):
        before = _ask(open_page("views/ask.py", "Ask"))
        assert "Lena Marsh" in before, "the old workspace answers from its own documents"
        hier = open_page("views/hierarchy.py", "Hierarchy")
        assert hier.title

        store = Store(old.settings.storage.db_url)
        ws = store.require_workspace("w")
        delete_workspace(store, ws, old.settings)
        new = build_workspace(home, [other], embedder, name="w")
        assert (new.ws.id, new.ws.build_version) == (old.ws.id, old.ws.build_version), \
            "the hard case: same name, same id, same build version"
        assert new.ws.created_at != old.ws.created_at

        after = _ask(open_page("views/ask.py", "Ask"))
        assert "Arden" in after or "Kelmouth" in after or "Choir" in after, after[:2000]
        assert not any(t in after for t in OLD_ONLY), "the Ask page answered from the deleted workspace"
        hier = open_page("views/hierarchy.py", "Hierarchy")
        assert not any(t in _page_text(hier) for t in OLD_ONLY), "the Hierarchy page drew the deleted workspace"
        graph = open_page("views/graph.py", "Graph")
        assert not any(t in _page_text(graph) for t in OLD_ONLY), "the Graph page drew the deleted workspace"


def test_deleting_a_workspace_while_its_run_is_active_is_refused(tmp_path, embedder, tiny_corpus):
    b = build_workspace(tmp_path / "home", [tiny_corpus], embedder, name="busy")
    create_run(b.store, b.ws, b.settings)  # queued: active until a worker takes it or it goes stale
    with pytest.raises(JobBusy) as exc:
        delete_workspace(b.store, b.ws, b.settings)
    assert "(build 2)" in str(exc.value) and "\n" not in str(exc.value)  # built once: the queued run makes build 2
    assert b.store.get_workspace("busy") is not None and b.store.documents(b.ws.id), "nothing was deleted"
