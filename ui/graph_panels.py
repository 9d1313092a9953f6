"""The Graph page's panels beside and below the canvas (views/graph.py draws the page): one node's details, and
"How are two entities connected?". They only draw what core/explore computes; every document-derived text is
escaped (`md_escape`, `md_label`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import cast

import streamlit as st

from core.explore.connect import Connection
from core.explore.details import NodeDetails
from core.explore.find import Found
from ui import offered
from ui.graph_canvas import graph_canvas
from ui.text import md_escape, md_label

Label = Callable[[str], str]
S = st.session_state


def details_panel(det: NodeDetails, height: int, actions: Callable[[NodeDetails], None]) -> None:
    """A node's title, facts, its actions (drawn by `actions`), text, communities, sources and neighbours, in a
    bordered box of the canvas's height that scrolls."""
    with st.container(border=True, height=height, key="graph_details"):
        st.markdown(f"#### {md_label(det.title or det.id, 120)}")
        st.caption(md_escape(" · ".join(det.facts)))
        actions(det)
        if det.text:
            with st.container(height=min(200, 40 + 18 * (len(det.text) // 60 + 1)), border=False):
                st.text(det.text[:3000])
        if det.communities:
            st.markdown("**Communities**: " + "; ".join(
                f"{md_escape(m)} level {lv}: {md_label(t or 'untitled', 50)}" for _, m, lv, t in det.communities))
        if det.sources:
            st.markdown("**Sources**: " + "; ".join(f"{md_label(t, 60)} ({n})" for _, t, n in det.sources))
        for kind, items in det.neighbours.items():
            st.markdown(f"**{md_escape(kind)}** ({det.counts.get(kind, len(items)):,}): "
                        + ", ".join(md_label(t, 50) for _, t in items))


def entity_picker(col, label: str, key: str, found: Found | None, placeholder: str) -> str | None:
    """A name box and, once it matches, the entity it names (the first match, another one pickable)."""
    col.text_input(label, key=key, placeholder=placeholder)
    if found is None:
        return None
    if not found.matches:
        col.caption("No entity with that name." + (f" {found.hidden:,} summary entities match; choose their HiRAG "
                                                     "layer in the filters to find them." if found.hidden else ""))
        return None
    names = {m.id: m.label for m in found.matches}
    return offered.one(col.selectbox, f"{label}: entity", list(names), format_func=cast(Label, names.get),
                       key=f"{key}_pick", label_visibility="collapsed")


def connection_panel(con: Connection, payloads: list[dict], on_click: Callable[[str], None]) -> None:
    """The paths between two entities, each in words and drawn small (a click on a node calls `on_click` with the
    canvas's key), then the documents mentioning both."""
    a, b = md_label(con.a_title, 60), md_label(con.b_title, 60)
    if con.a == con.b:
        st.info("Those are the same entity.")
    elif not con.paths:
        st.info(f"No path joins {a} and {b} through relationships and documents.")
    else:
        more = len(con.paths)
        st.markdown(f"**{a}** and **{b}** are **{con.hops} step{'s' if con.hops != 1 else ''}** apart (a step: a "
                    "relationship, or a document mentioning an entity). "
                    + (f"The {more} shortest paths:" if more > 1 else "The shortest path:"))
        for i, (path, payload) in enumerate(zip(con.paths, payloads)):
            words = []
            for j, title in enumerate(path.titles):
                kind = path.kinds[j]
                words.append(("the document " if kind == "document" else "") + f"**{md_label(title, 50)}**")
                if j < len(path.steps):
                    st_ = path.steps[j]
                    words.append(f" —*{md_escape(st_.label)}*— " if st_.kind == "relationship" else " — mentioned in — "
                                 if path.kinds[j + 1] == "document" else " — mentions — ")
            st.markdown(f"{i + 1}. ({path.hops} steps) " + "".join(words))
            key = f"graph_connect_{i}"
            graph_canvas(payload, key=key, on_event=functools.partial(on_click, key))
    if con.shared:
        st.markdown(f"**Documents that mention both** ({len(con.shared):,}):")
        st.markdown("\n".join(f"* {md_label(t, 80)} ({pa} and {pb} passages)" for _, t, pa, pb in con.shared[:30]))
        if len(con.shared) > 30:
            st.caption(f"and {len(con.shared) - 30:,} more.")
    elif con.a != con.b:
        st.caption("No document mentions both.")
