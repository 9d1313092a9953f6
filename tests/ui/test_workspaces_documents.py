"""Issue 39 §3 on the Workspaces page (AppTest, a private copy of the built sample): a document opened shows its text
(escaped), its entities, communities and what it contributed; an upload with a duplicate and a refused file lists
both, and a later visit (a fresh session: a page reload) still lists them."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.explore.document_detail import document_detail
from core.workspace import SAMPLE_DIR
from tests.ui.conftest import APP, app_home, run, sample_copy
from tests.ui.test_pages import _walk
from ui.text import md_escape


@pytest.fixture(scope="module")
def ws_home(tmp_path_factory, sample_built):
    home, store = sample_copy(tmp_path_factory, sample_built, "strata_ws_docs")
    with app_home(home):
        yield store


def _keyed(at: AppTest, key: str):
    found = [n for n in _walk(at.main) if getattr(n, "key", None) == key]
    assert found, f"no element keyed {key!r}"
    return found[0]


def _texts(node) -> list[str]:
    return [str(n.value) for n in _walk(node) if getattr(n, "type", None) in ("markdown", "caption")]


def _fresh() -> AppTest:
    return run(AppTest.from_file(str(APP), default_timeout=180))  # opens on Workspaces & upload


def test_a_document_opens_with_its_text_entities_communities_and_contribution(ws_home):
    store = ws_home
    ws = store.require_workspace("sample")
    doc = next(d for d in store.documents(ws.id) if d.filename == "candlemas_flood_2004.md")
    want = document_detail(store, ws.id, doc.id)
    assert want.entities and want.communities and want.chunks

    at = _fresh()
    box = at.selectbox(key="open_doc_sample")
    assert doc.id in box.options or any(doc.title in o for o in box.options)
    box.set_value(doc.id)
    run(at)
    view = _keyed(at, "doc_view")
    texts = _texts(view)
    assert f"#### {md_escape(doc.title)}" in texts
    assert md_escape(doc.text[:40_000]) in texts, "the text, escaped"
    metrics = {m.label: m.value for m in _walk(view) if getattr(m, "type", None) == "metric"}
    assert metrics["Chunks"] == f"{want.chunks:,}" and metrics["Entities"] == f"{len(want.entities):,}"
    assert metrics["Introduced"] == f"{len(want.introduced):,}" and metrics["Only here"] == f"{len(want.only_here):,}"
    frames = [n.value for n in _walk(view) if getattr(n, "type", None) == "dataframe"]
    assert list(frames[0]["entity"]) == [e.title for e in want.entities]
    assert list(frames[1]["community"]) == [c.title or c.id for c in want.communities]


def test_an_uploads_duplicate_and_refusal_are_listed_and_kept(ws_home):
    store = ws_home
    ws = store.require_workspace("sample")
    n_docs = store.counts(ws.id)["document"]
    same = (SAMPLE_DIR / "candlemas_flood_2004.md").read_bytes()
    at = _fresh()
    at.file_uploader[0].set_value([("candlemas again.md", same, "text/markdown"),
                                   ("scan_[1].txt", bytes(range(256)) * 8, "text/plain")])
    run(at)
    next(b for b in at.button if b.label == "Add and build").click()
    run(at)
    assert "0 document(s) added, 1 already present, 1 refused" in [i.value for i in at.info]
    dup = [i.value for i in at.info if "already stored" in i.value]
    assert dup and "**candlemas again\\.md**" in dup[0], dup
    assert any("scan\\_\\[1\\]\\.txt" in w.value and "refused" in w.value for w in at.warning)
    assert store.counts(ws.id)["document"] == n_docs

    later = _fresh()  # a reload: a new session, nothing of the last one's state
    assert not [i.value for i in later.info if "already present" in i.value]
    [exp] = [e for e in later.expander if e.label.startswith("Last uploads (")]
    texts = " ".join(_texts(exp))
    assert md_escape("0 document(s) added, 1 already present, 1 refused") in texts
    assert "**candlemas again\\.md**" in texts and "already stored" in texts
    assert "scan\\_\\[1\\]\\.txt" in texts and "refused" in texts
