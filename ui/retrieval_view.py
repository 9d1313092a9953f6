"""One retrieval drawn, on the Ask page and on the Evaluate page's question view: its local / bridge / global
context panels (every item names its node; one click shows it on the Graph page) and the path it took on the
graph (core/explore/route.py: the Graph page's canvas, the roles' legend), with the gold documents and their
chunks highlighted, and the gold documents it missed drawn apart, when the Evaluate page passes them."""

from __future__ import annotations

import json
from collections import Counter

import streamlit as st

from core.explore.route import legend_html, route_graph, route_payload
from core.retrieval.base import Retrieval, get_strategy, per_kind
from ui import resources as R
from ui.graph_canvas import graph_canvas
from ui.text import md_escape, md_label

SECTION_HELP = {"local": "Detail", "bridge": "Connection", "global": "Overview"}
MAX_ITEMS = 12  # shown per kind of item in a panel (`per_kind`)


@st.cache_data(show_spinner=False, max_entries=48)
def _route(ws_id: int, version: str, payload: str, height: int, gold: tuple[str, ...] = (),
           gold_docs: tuple[str, ...] = ()) -> tuple[dict, str, str]:
    rg = route_graph(Retrieval.from_dict(json.loads(payload)), R.store(), ws_id, gold=set(gold),
                     gold_docs=list(gold_docs))
    return route_payload(rg, height=height), legend_html(rg), rg.note


def strategy_about(name: str) -> tuple[str, str]:
    """A strategy's label and description (its name alone for a past result of a strategy this version lacks)."""
    try:
        s = get_strategy(name)
        return s.label, s.description
    except KeyError:
        return name, ""


def strategy_label(name: str) -> str:
    return strategy_about(name)[0]


def show_on_graph(node_id: str, key: str) -> None:
    if st.button("Show on graph", key=key, icon=":material/hub:", type="tertiary"):
        st.session_state["graph_focus"] = node_id
        st.switch_page("views/graph.py")


def panel(i: int | str, r: Retrieval, section: str, key: str, width: int) -> None:
    """The `section` context of `r` in a bordered container `key`: each item in an expander naming its node."""
    items = r.sections.get(section, [])
    with st.container(border=True, key=key):
        st.markdown(f"**{section.capitalize()}** · {SECTION_HELP[section]} ({len(items)})")
        if not items:
            st.caption("Nothing at this level for this strategy.")
            return
        kinds = Counter(it.kind for it in items)
        st.caption("From " + ", ".join(f"{n} {k} node{'s' if n > 1 else ''}" for k, n in kinds.most_common())
                   + "; each names its node.")
        shown, left_out = per_kind(items, MAX_ITEMS)
        for j, it in shown:
            with st.expander(f"{md_label(it.title, width)} · {it.kind} · {it.score:.2f}"):
                st.markdown(md_escape(it.text[:1500]))
                level = f" · level {it.level}" if it.level is not None else ""
                st.caption(f"node {md_escape(it.id)} · {it.kind}{level}")
                show_on_graph(it.id, f"go_{i}_{section}_{j}")
        if left_out:  # (a leading "+ " would render as a list)
            st.caption("and " + ", ".join(f"{n} more {k} node{'s' if n > 1 else ''}" for k, n in left_out.items()))


def path(ws_id: int, version: str, i: int | str, r: Retrieval, height: int, gold: set[str] | None = None,
         gold_docs: list[str] | None = None) -> None:
    """The path `r` took, drawn in container `route_{i}`; a click on a node names it and offers it on the Graph
    page. `gold` / `gold_docs`: the gold nodes to highlight and the gold documents to draw when not reached."""
    st.markdown("#### Path on the graph")
    if not r.path_nodes and not r.sources and not gold_docs:
        st.caption("This strategy visited no graph nodes.")
        return
    drawing, legend, note = _route(ws_id, version, json.dumps(r.to_dict()), height, tuple(sorted(gold or ())),
                                   tuple(gold_docs or ()))
    with st.container(key=f"route_{i}"):
        clicked = graph_canvas(drawing, key=f"route_canvas_{i}")
    st.markdown(legend, unsafe_allow_html=True)  # Strata's own role / kind names and colours only
    if note:
        st.caption(note)
    node = next((n for n in drawing["nodes"] if clicked and n["id"] == clicked.get("id")), None)
    if node is not None:  # a click on a node of the path: name it, and offer it on the Graph page
        a, b = st.columns([4, 1], vertical_alignment="center")
        a.caption(f"Clicked: {md_escape(node['label'])} · {node['kind']} · {', '.join(node['roles'])}")
        with b:
            show_on_graph(node["id"], f"goroute_{i}")
