"""The Build page's model hosts (AppTest, issue 38): a build through an OpenAI-compatible server (tests/fake_openai.py)
shows each host with the calls it answered, the tokens it read and wrote and its tokens per second
(core/backends/host_speed.py), from the call cache's rows of that build."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import select
from streamlit.testing.v1 import AppTest

from core.models import LLMCall
from tests.conftest import build_workspace
from tests.fake_openai import FakeOpenAI
from tests.ui.conftest import app_home, run

APP = Path(__file__).resolve().parents[2] / "app.py"


def test_build_page_shows_each_hosts_tokens_per_second(tmp_path, embedder, tiny_corpus, make_settings, monkeypatch):
    home = tmp_path / "home"
    with FakeOpenAI() as fake:
        settings = make_settings(home)
        settings.backend.kind, settings.backend.openai_base_url = "openai", fake.base_url
        settings.backend.retries, settings.backend.backoff_s = 1, 0.01
        settings.archrag.min_clusters = 2
        built = build_workspace(home, [tiny_corpus], embedder, name="tiny", settings=settings)
        with built.store.session() as s:
            calls = list(s.exec(select(LLMCall)))
        monkeypatch.setenv("STRATA_SAMPLE", "0")
        with app_home(home):
            at = run(AppTest.from_file(str(APP), default_timeout=180))
            at.switch_page("views/build.py")
            run(at)
            assert any(e.label == "Model hosts" for e in at.expander)
            table = next(d.value for d in at.dataframe if "written tokens/s" in d.value.columns)
            (row,) = table.to_dict("records")
            assert row["host"] == fake.base_url and row["calls"] == len(calls) > 0
            assert row["tokens written"] == sum(c.request["usage"]["out"] for c in calls)
            assert row["written tokens/s"] > 0 and row["measured by"] in ("fit", "reply tokens / request seconds")
