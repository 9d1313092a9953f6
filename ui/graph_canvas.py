"""The Graph page's canvas: a bidirectional Streamlit component (components v1, a hand-written index.html speaking
the postMessage protocol) that draws a vis-network payload (core/explore/drawing.vis_payload) and reports a click
on a node back to Python as {event, id, kind, view, seq}.

vis-network and its stylesheet come from the installed pyvis package: they are copied once, with index.html, into
a content-addressed folder under the system temp dir, which the component serves. Nothing is fetched from a CDN.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import streamlit as st
import streamlit.components.v1 as components

SOURCE = Path(__file__).resolve().parent / "graph_component" / "index.html"


def _vis_dir() -> Path:
    import pyvis

    return Path(pyvis.__file__).resolve().parent / "templates" / "lib" / "vis-9.1.2"


@st.cache_resource(show_spinner=False)
def served_dir() -> str:
    """index.html + vis-network.min.js + vis-network.css in one folder (made once per content, shared by processes)."""
    lib = _vis_dir()
    files = {"index.html": SOURCE, "vis-network.min.js": lib / "vis-network.min.js",
             "vis-network.css": lib / "vis-network.css"}
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in files.values())).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"strata-graph-canvas-{digest}"
    if not all((out / name).is_file() for name in files):
        tmp = Path(tempfile.mkdtemp(prefix=out.name + "-", dir=out.parent))
        for name, src in files.items():
            shutil.copyfile(src, tmp / name)
        try:
            os.replace(tmp, out)  # atomic; fails if another process made it first
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return str(out)


def graph_canvas(payload: dict, key: str, on_event: Callable[[], None] | None = None) -> dict | None:
    """Draw `payload`; the last click comes back as the value (also in st.session_state[key])."""
    component = components.declare_component("strata_graph", path=served_dir())
    return component(data=payload, key=key, default=None, on_change=on_event)
