"""The Build page's failed units (AppTest): a chunk whose extraction kept failing on the model server (a local server
speaking the Ollama API, tests/fake_ollama.py) is listed with its reason, and "Retry failed units" starts a build
in a real background worker that extracts it: the list is then empty and the page says the build finished."""

from __future__ import annotations

import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.pipeline.failures import failed_units
from core.pipeline.runs import FINISHED
from core.store import Store
from tests.conftest import build_workspace
from tests.fake_ollama import FakeOllama, delimited
from tests.ui.conftest import app_home, run

APP = Path(__file__).resolve().parents[2] / "app.py"
SENTENCE = "The Kelmouth Railway was financed by the Arden Trust"  # in one chunk of tiny_corpus's railway.txt


def _wait(store, ws_id: int, after: int, timeout: float = 400):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = store.latest_run(ws_id)
        if r is not None and r.id > after and r.status in FINISHED:
            return r
        time.sleep(0.5)
    raise AssertionError("the retry build did not finish")


def test_build_page_lists_failed_units_and_retries_them(tmp_path, embedder, tiny_corpus, make_settings,
                                                        monkeypatch):
    home = tmp_path / "home"
    with FakeOllama() as fake:
        settings = make_settings(home)
        settings.backend.kind, settings.backend.ollama_host, settings.backend.retries = "ollama", fake.url, 1
        settings.backend.backoff_s = 0.05
        fake.fail_when = lambda prompt: any(SENTENCE in b for b in delimited(prompt, "TEXT"))
        built = build_workspace(home, [tiny_corpus], embedder, name="tiny", settings=settings)
        store = built.store
        [unit] = failed_units(store, built.ws.id)
        first = store.latest_run(built.ws.id)
        assert first.message == "Build finished with 1 failed unit"
        monkeypatch.setenv("STRATA_SAMPLE", "0")
        monkeypatch.setenv("OLLAMA_HOST", fake.url)
        with app_home(home):
            at = run(AppTest.from_file(str(APP), default_timeout=180))
            at.switch_page("views/build.py")
            run(at)
            assert any(w.value.startswith("**Build 1 finished** in ") and w.value.endswith(" · 1 failed unit")
                       for w in at.warning), \
                [w.value for w in at.warning]
            assert any("**1 failed unit**" in w.value for w in at.warning)
            table = next(d.value for d in at.dataframe if "reason" in d.value.columns)
            row = table.iloc[0].to_dict()
            assert (row["stage"], row["unit"], len(table)) == ("extract", unit.unit, 1)
            assert "500" in row["reason"] and "railway" in row["what"].lower() and row["attempts"] == 2
            assert row["failed in"] == "build 1", row  # the build's number, never the run's row id
            assert any("failed unit" in c.value for c in at.sidebar.caption), "the sidebar says so too"

            fake.fail_when = None  # the server recovers
            retry = next(b for b in at.button if b.label == "Retry failed units")
            assert not retry.disabled
            retry.click()
            run(at)
            again = Store(built.settings.storage.db_url)
            finished = _wait(again, built.ws.id, first.id)
            assert (finished.kind, finished.backend, finished.status) == ("build", "ollama", "done"), finished.message
            assert finished.message == "Build finished"
            assert failed_units(again, built.ws.id) == []
            run(at)
            assert not any(b.label == "Retry failed units" for b in at.button)
            assert any(s.value.startswith("**Build 2 finished** in ") and s.value.endswith(" · no failed units")
                       for s in at.success), [s.value for s in at.success]
