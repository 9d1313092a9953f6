"""The Graph page's canvas: a bidirectional Streamlit component (components v1, a hand-written index.html speaking
the postMessage protocol) that draws a vis-network payload (core/explore/drawing.vis_payload) and reports a click
on a node back to Python as {event, id, kind, view, seq}.

vis-network and its stylesheet come from the installed pyvis package: they are copied once, with index.html, into
a content-addressed folder under STRATA_HOME/components (made private, its files checked against their sources
before use), which the component serves: never a predictable folder of the shared temp dir, where another local
user could plant a page. Nothing is fetched from a CDN.
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

from ui import resources as R

SOURCE = Path(__file__).resolve().parent / "graph_component" / "index.html"


def _vis_dir() -> Path:
    import pyvis

    return Path(pyvis.__file__).resolve().parent / "templates" / "lib" / "vis-9.1.2"


def served_dir(home: Path) -> Path:
    """index.html + vis-network.min.js + vis-network.css in one folder under `home` (STRATA_HOME), made once per
    content and shared by processes; a folder whose files differ from their sources is made again."""
    lib = _vis_dir()
    files = {"index.html": SOURCE, "vis-network.min.js": lib / "vis-network.min.js",
             "vis-network.css": lib / "vis-network.css"}
    sources = {name: p.read_bytes() for name, p in files.items()}
    digest = hashlib.sha256(b"".join(sources.values())).hexdigest()[:16]
    parent = Path(home).resolve() / "components"
    parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    out = parent / f"graph-canvas-{digest}"
    if all((out / name).is_file() and (out / name).read_bytes() == data for name, data in sources.items()):
        return out
    tmp = Path(tempfile.mkdtemp(prefix=out.name + "-", dir=parent))  # private (0700) until complete
    for name, data in sources.items():
        (tmp / name).write_bytes(data)
    old = parent / f".old-{tmp.name}"
    if out.exists():
        os.replace(out, old)  # a folder that differs from the sources: put aside, then removed
    try:
        os.replace(tmp, out)  # atomic; fails if another process made it first
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    return out


@st.cache_resource(show_spinner=False)
def _served(home: str) -> str:
    return str(served_dir(Path(home)))


def graph_canvas(payload: dict, key: str, on_event: Callable[[], None] | None = None) -> dict | None:
    """Draw `payload`; the last click comes back as the value (also in st.session_state[key])."""
    component = components.declare_component("strata_graph", path=_served(str(R.settings().storage.home)))
    return component(data=payload, key=key, default=None, on_change=on_event)
