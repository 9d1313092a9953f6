"""Deleting documents on the Workspaces page (AppTest): pick documents, read what only they support, confirm; the
delete job runs in a real background worker and the documents and what only they supported are gone."""

from __future__ import annotations

import time
from pathlib import Path

from sqlmodel import select
from streamlit.testing.v1 import AppTest

from core.models import Node
from core.pipeline.runs import FINISHED
from core.store import Store
from tests.conftest import build_workspace
from tests.ui.conftest import app_home, run

APP = Path(__file__).resolve().parents[2] / "app.py"


def _wait(store, ws_name: str, timeout: float = 400):
    ws = store.require_workspace(ws_name)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = store.latest_run(ws.id, ("delete",))
        if r is not None and r.status in FINISHED:
            return r
        time.sleep(0.5)
    raise AssertionError("the delete job did not finish")


def test_delete_documents_from_the_workspaces_page(tmp_path, embedder, tiny_corpus, monkeypatch):
    home = tmp_path / "home"
    built = build_workspace(home, [tiny_corpus], embedder, name="tiny")
    monkeypatch.setenv("STRATA_SAMPLE", "0")
    doc = next(d for d in built.store.documents(built.ws.id) if d.filename == "railway.txt")
    with app_home(home):
        at = run(AppTest.from_file(str(APP), default_timeout=180))
        picker = at.multiselect(key="delete_docs_tiny")
        assert doc.id in picker.options or any(doc.title in o for o in picker.options)
        picker.set_value([doc.id])
        run(at)
        warning = " ".join(w.value for w in at.warning)
        assert "removes 1 chunk," in warning and "entit" in warning
        assert "railway\\.txt" in warning, "the document's name is escaped in the Markdown"
        go = at.button(key="delete_docs_go_tiny")
        assert go.disabled, "nothing is deleted before the confirmation"
        at.checkbox(key="delete_docs_sure_tiny").check()
        run(at)
        at.button(key="delete_docs_go_tiny").click()
        run(at)
        assert any("Deleting 1 document" in s.value for s in at.success)
        store = Store(built.settings.storage.db_url)
        finished = _wait(store, "tiny")
        assert finished.status == "done", finished.message
        assert doc.id not in {d.id for d in store.documents(built.ws.id)}
        with store.session() as s:
            assert not s.exec(select(Node).where(Node.document_id == doc.id)).all()
            names = set(s.exec(select(Node.title).where(Node.kind == "entity", Node.layer == 0)).all())
        assert "Arden Trust" not in names, "an entity only the deleted document named is gone"
        assert "Tidewater Bridge" in names, "an entity other documents name stays"
        run(at)  # the page draws again without the deleted document
        assert doc.id not in at.multiselect(key="delete_docs_tiny").options
