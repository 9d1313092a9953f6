"""The graph canvas component's files are served from STRATA_HOME (or the package), never from a predictable folder
of the shared temp dir where another local user could plant a page (AppTest: the path the component is registered
with when a page draws it)."""

from __future__ import annotations

import re
import stat
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.ui.conftest import app_home

ROOT = Path(__file__).resolve().parents[2]


def _draw_and_report_path() -> None:
    import streamlit as st
    from streamlit.runtime import get_instance

    from ui.graph_canvas import graph_canvas

    graph_canvas({"nodes": [], "edges": []}, key="probe")
    # (AppTest's runtime is a mock: the component it was given to register says where its files are)
    [component] = [c.args[0] for c in get_instance().component_registry.register_component.call_args_list
                   if c.args[0].name == "ui.graph_canvas.strata_graph"]
    st.text(component.abspath)


def test_the_canvas_is_served_from_strata_home(tmp_path):
    home = tmp_path / "home"
    with app_home(home):
        at = AppTest.from_function(_draw_and_report_path, default_timeout=60)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        served = Path(at.text[0].value)
    assert served.is_relative_to(home.resolve() / "components"), served
    assert {p.name for p in served.iterdir()} == {"index.html", "vis-network.min.js", "vis-network.css"}
    assert (served / "index.html").read_bytes() == (ROOT / "ui" / "graph_component" / "index.html").read_bytes()
    assert stat.S_IMODE(served.stat().st_mode) & 0o077 == 0, "no one else may write (or read) it"


def test_a_planted_page_is_replaced(tmp_path):
    from ui.graph_canvas import served_dir

    first = served_dir(tmp_path)
    (first / "index.html").write_text("<script>alert('planted')</script>")
    again = served_dir(tmp_path)
    assert again == first
    assert (again / "index.html").read_bytes() == (ROOT / "ui" / "graph_component" / "index.html").read_bytes()


def test_no_module_of_the_app_uses_the_shared_temp_dir_by_name():
    pattern = re.compile(r"gettempdir\(|[\"']/tmp\b|tempfile\.(mkdtemp|mkstemp|NamedTemporaryFile|TemporaryDirectory)"
                         r"\((?![^)]*\bdir=)")
    hits = [f"{p.relative_to(ROOT)}:{i}" for folder in ("core", "ui", "views") for p in (ROOT / folder).rglob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    hits += [f"app.py:{i}" for i, line in enumerate((ROOT / "app.py").read_text().splitlines(), 1)
             if pattern.search(line)]
    assert hits == []
