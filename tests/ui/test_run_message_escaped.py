"""A failed build's message can hold a model server's error body: the Build page shows it as literal text, like every
other text that did not come from the app (AppTest)."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.models import BuildRun
from core.store import Store
from tests.ui.conftest import app_home, run

APP = Path(__file__).resolve().parents[2] / "app.py"
HOSTILE = "**bold** <img src=x onerror=alert(1)> [link](javascript:alert(1))"


def test_a_failed_runs_message_is_shown_as_literal_text(tmp_path, make_settings, monkeypatch):
    home = tmp_path / "home"
    settings = make_settings(home)
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("hostile")
    with store.session() as s:
        s.add(BuildRun(workspace_id=ws.id, status="failed", stage="extract_*x*", message=f"HTTP 500: {HOSTILE}"))
        s.commit()
    monkeypatch.setenv("STRATA_SAMPLE", "0")
    with app_home(home):
        at = run(AppTest.from_file(str(APP), default_timeout=120))
        at.switch_page("views/build.py")
        run(at)
        [error] = [e.value for e in at.error if "Build failed" in e.value]
    assert error == (r"Build failed in stage **extract\_\*x\***: HTTP 500: \*\*bold\*\* \<img src=x onerror=alert\(1\)\> "
                     r"\[link\]\(javascript:alert\(1\)\)"), error
