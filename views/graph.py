"""Graph: the heterograph at levels of detail. A big workspace opens on its communities as super-nodes; a click
(or "Open community") opens one into its child communities and member entities, with a breadcrumb back up. Small
workspaces, and a node's neighbourhood (from the Ask page), draw the nodes themselves; both views draw in the
same canvas, where a click on a node shows its details. Filters, search, node details, one-hop expansion, export.
Algorithms live in core/explore/explorer.py; this page only draws."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import streamlit as st

from core.explore import explorer as X
from core.explore.details import describe_node, search_nodes
from core.explore.display import KIND_COLORS, available, display_graph
from core.explore.drawing import level_color, method_color, vis_payload
from core.explore.explore_index import fingerprint, load_index
from ui import offered
from ui import resources as R
from ui.graph_canvas import graph_canvas
from ui.text import md_escape, md_label

# A selectbox's format_func is `dict.get` of a dict keyed by the options: Streamlit formats the options (every one a
# key, so never None) and a stale session value (None there makes Streamlit reset the widget, as it always has).
Label = Callable[[str], str]
MODES = ["Communities", "Nodes"]
HEIGHT = 680
S = st.session_state
store = R.store()
settings = R.settings()
cfg = settings.graph
ws = R.current_workspace()
st.title("Graph")
if ws is None or ws.build_version == 0:
    st.info("Nothing to draw yet: this workspace has not finished a build.")
    st.stop()
assert ws.id is not None  # a row read from or written to the store has its key
ws_id: int = ws.id


@st.cache_resource(show_spinner="Indexing the graph for exploring…", max_entries=4)
def explore_index(ws_id: int, key: str):
    return load_index(store, ws_id, settings.storage.home / "derived" if cfg.derived_cache else None)


@st.cache_data(show_spinner="Drawing the communities…", max_entries=64)
def community_view(ws_id: int, key: str, cid: str | None, f: X.Filters, cap: int, extra: tuple[str, ...],
                   physics: bool, hier: bool) -> tuple[dict, str, list, list]:
    ix = explore_index(ws_id, key)
    per = cfg.edges_per_node
    dg = X.open_community(store, ix, cid, f, cap, per) if cid else X.overview(store, ix, f, cap, per)
    if extra:
        dg = X.add_nodes(store, ws_id, ix, dg, list(extra), cap, f.color_by)
    return (vis_payload(dg, HEIGHT, physics, hier), dg.note, X.community_choices(ix, dg),
            [(n.id, n.kind, n.label) for n in dg.nodes])


@st.cache_data(show_spinner="Drawing the graph…", max_entries=32)
def node_view(ws_id: int, key: str, kinds: tuple[str, ...], cap: int, focus: str | None, f: X.Filters,
              extra: tuple[str, ...], physics: bool, hier: bool) -> tuple[dict, str, dict, list]:
    ix = explore_index(ws_id, key)
    methods = () if set(f.methods) >= set(ix.comm_method) else f.methods  # all methods: no filter
    flt = X.node_filter(ix, X.Filters(methods=methods, levels=f.levels, layers=f.layers, min_degree=f.min_degree))
    dg = display_graph(store, ws_id, list(kinds), cap, focus, flt, extra, f.min_degree)
    return (vis_payload(dg, HEIGHT, physics, hier), dg.note, dg.available,
            [(n.id, n.kind, n.label) for n in dg.nodes])


@st.cache_data(show_spinner=False, max_entries=16)
def kind_counts(ws_id: int, key: str) -> dict[str, int]:
    return available(store, ws_id)


@st.cache_data(show_spinner=False, max_entries=256)
def details(ws_id: int, key: str, node_id: str):
    return describe_node(store, ws_id, node_id)


@st.cache_data(show_spinner=False, max_entries=256)
def search(ws_id: int, key: str, q: str) -> list[tuple[str, str, str]]:
    return search_nodes(store, ws_id, q)


key = fingerprint(store, ws_id)
ix = explore_index(ws_id, key)

# -- UI state: reset when the workspace changes; a node sent from the Ask page opens the Nodes view on it --------
if S.get("graph_ws") != ws.name:
    S["graph_ws"] = ws.name
    for k in ("graph_path", "graph_extra", "graph_pick", "graph_mode"):
        S.pop(k, None)
focus = S.get("graph_focus")
if focus and S.get("graph_focus_seen") != focus:
    S["graph_focus_seen"], S["graph_mode_next"], S["graph_extra"] = focus, "Nodes", []
if "graph_mode_next" in S:
    S["graph_mode"] = S.pop("graph_mode_next")
big = len(ix.ent_ids) + len(ix.comm_ids) > cfg.max_nodes
if S.get("graph_mode") not in MODES:
    S["graph_mode"] = "Nodes" if focus or not big or not ix.comm_ids else "Communities"
path = [c for c in S.get("graph_path", []) if c in ix.comm_index]
S["graph_path"] = path


def open_community(cid: str) -> None:
    S["graph_path"] = [c for c, _ in X.breadcrumb(ix, cid)]
    S["graph_extra"] = []


def on_canvas() -> None:
    """A click in the canvas: a community super-node opens (in the Communities view); any node shows its details
    below."""
    ev = S.get("graph_canvas") or {}
    if not ev.get("id") or ev.get("seq") == S.get("graph_seq"):
        return
    S["graph_seq"] = ev["seq"]
    if ev.get("kind") == "community" and ev["id"] in ix.comm_index and S.get("graph_mode") == "Communities":
        open_community(ev["id"])
    S["graph_pick"] = ev["id"]


def on_open_select() -> None:
    cid = S.get("graph_open")
    if cid:
        open_community(cid)
        S["graph_pick"] = cid
    S["graph_open"] = None


def go_to(new_path: list[str]) -> None:
    S["graph_path"], S["graph_extra"] = new_path, []


# -- controls ------------------------------------------------------------------------------------------------
c1, c2, c3, c4 = st.columns([2, 2, 1, 1.4])
mode = offered.one(c1.radio, "View", MODES, key="graph_mode", horizontal=True,
                help="Communities: super-nodes that open on a click. Nodes: the nodes themselves, most important first.")
cap = c2.slider("Max nodes", 50, max(50, cfg.max_nodes), min(max(50, cfg.default_nodes), cfg.max_nodes), step=50,
                help=f"The page never sends more than {cfg.max_nodes:,} nodes to the browser.")
physics = c3.toggle("Physics", value=True)
hier = c4.toggle("Hierarchical layout", value=False, help="Levels: community level, then HiRAG layer.")
methods_present = sorted(set(ix.comm_method))
with st.expander("Filters", icon=":material/filter_alt:"):
    f1, f2, f3 = st.columns(3)
    kinds = offered.many(f1.multiselect, "Node kinds", list(KIND_COLORS), key=f"graph_kinds_{ws.name}", default=list(X.DEFAULT_KINDS),
                           help="What the Nodes view draws and what expanding a node adds.")
    layers = offered.many(f2.multiselect, "HiRAG layers", sorted({int(x) for x in set(ix.ent_layer.tolist())}),
                          key=f"graph_layers_{ws.name}",
                            help="Entities of these layers only (none chosen: every layer).")
    min_degree = f3.number_input("Minimum degree", 0, 10_000, 0, help="Entities linked to at least this many "
                                 "other entities through relationships.")
    g1, g2, g3 = st.columns(3)
    methods = offered.many(g1.multiselect, "Community methods", methods_present, key=f"graph_methods_{ws.name}",
                             default=[m for m in methods_present if m in X.DEFAULT_METHODS] or methods_present,
                             help="Leiden: GraphRAG's, on the extracted entities; hirag: HiRAG's, on its layered "
                                  "graph; noderag: NodeRAG's, on its heterograph; attributed: ArchRAG's.")
    levels = offered.many(g2.multiselect, "Community levels", sorted({int(x) for x in set(ix.comm_level.tolist())}),
                          key=f"graph_levels_{ws.name}",
                            help="Super-nodes of these levels (none chosen: the top of each hierarchy).")
    color_by = offered.one(g3.radio, "Colour communities by", ["level", "method"], horizontal=True, key="graph_color_by")
f = X.Filters(methods=tuple(methods), levels=tuple(sorted(levels)), layers=tuple(sorted(layers)),
              min_degree=int(min_degree), kinds=tuple(kinds), color_by=color_by)
extra = tuple(S.get("graph_extra", []))


def chip(color: str, text: str) -> str:  # only our own names, numbers and colours
    return (f"<span style='display:inline-block;margin-right:14px'><span style='display:inline-block;width:11px;"
            f"height:11px;border-radius:50%;background:{color};margin-right:5px'></span>{text}</span>")


# -- the drawing -------------------------------------------------------------------------------------------------
if mode == "Communities":
    if not ix.comm_ids:
        st.info("This build has no communities; use the Nodes view.")
        st.stop()
    crumbs = [("", "Overview")] + (X.breadcrumb(ix, path[-1]) if path else [])
    row = st.container(horizontal=True, key="graph_crumbs")
    row.button("Back", icon=":material/arrow_upward:", disabled=not path, on_click=go_to, args=(path[:-1],),
               key="graph_back")
    for i, (_cid, title) in enumerate(crumbs):
        row.button(("› " if i else "") + md_label(title, 40), key=f"graph_crumb_{i}", type="tertiary",
                   disabled=i == len(crumbs) - 1, on_click=go_to, args=(path[:i],))
    payload, note, choices, drawn = community_view(ws_id, key, path[-1] if path else None, f, cap, extra,
                                                   physics, hier)
    labels = dict(choices)
    offered.maybe(st.selectbox, "Open community", list(labels), format_func=cast(Label, labels.get), index=None, key="graph_open",
                 placeholder="Click a super-node, or pick a drawn community here", on_change=on_open_select)
    shown = sorted({int(lv) for c in labels for lv in [ix.comm_level[ix.comm_index[c]]]})
    legend = ([chip(method_color(m), f"{m} communities") for m in methods_present if m in set(methods)]
              if color_by == "method" else [chip(level_color(lv), f"level {lv}") for lv in shown])
    if any(k == "entity" for _, k, _ in drawn):
        legend += [chip(KIND_COLORS["entity"], "entity"), chip("#173753", "summary entity (HiRAG layer ≥ 1)")]
    st.markdown(" ".join(legend), unsafe_allow_html=True)
    st.caption(note)
    graph_canvas(payload, key="graph_canvas", on_event=on_canvas)
else:
    payload, note, avail, drawn = node_view(ws_id, key, tuple(kinds), cap, focus, f, extra, physics, hier)
    st.markdown(" ".join(chip(color, f"{kind} ({avail.get(kind, 0):,})") for kind, color in KIND_COLORS.items()
                         if kind in kinds and avail.get(kind)), unsafe_allow_html=True)
    if note:
        st.caption(note)
    if focus:
        st.info("Neighbourhood of the selected node.", icon=":material/filter_center_focus:")
        if st.button("Back to the overview"):
            S.pop("graph_focus", None)
            S.pop("graph_focus_seen", None)
            S["graph_extra"] = []
            st.rerun()
    graph_canvas(payload, key="graph_canvas", on_event=on_canvas)
if extra:
    st.caption(f"{len(extra):,} nodes added by expanding neighbourhoods.")
    st.button("Clear expansions", on_click=lambda: S.update(graph_extra=[]))


# -- find a node, and its details ----------------------------------------------------------------------------------
def on_query() -> None:
    found = search(ws_id, key, (S.get("graph_query") or "").strip())
    if found:
        S["graph_pick"] = found[0][0]


@st.fragment
def finder(drawn: list[tuple[str, str, str]]) -> None:
    st.subheader("Find a node")
    a, b = st.columns(2)
    query = a.text_input("Search entities and communities by name", placeholder="e.g. Okafor", key="graph_query",
                         live=True, on_change=on_query)
    matches = search(ws_id, key, query.strip()) if query and query.strip() else []
    options = {nid: f"{title} · {kind}" for nid, kind, title in matches}
    if options:
        offered.one(a.selectbox, "Matches", list(options), format_func=cast(Label, options.get), key="graph_match",
                    on_change=lambda: S.update(graph_pick=S.get("graph_match")))
    elif query and query.strip():
        a.caption("No entity, community or document with that name.")
    on_view = {nid: f"{label} · {kind}" for nid, kind, label in drawn}
    offered.maybe(b.selectbox, "…or pick a drawn node", list(on_view), format_func=cast(Label, on_view.get), index=None, key="graph_drawn",
                placeholder="—", on_change=lambda: S.update(graph_pick=S.get("graph_drawn")))
    nid: str | None = S.get("graph_pick")
    if not nid:
        return
    det = details(ws_id, key, nid)
    if det is None:
        return
    with st.container(border=True, key="graph_details"):
        st.markdown(f"#### {md_label(det.title or det.id, 120)}")
        st.caption(md_escape(" · ".join(det.facts)))
        if det.text:
            st.text(det.text[:3000])
        if det.communities:
            st.markdown("**Communities**: " + "; ".join(
                f"{md_escape(m)} level {lv}: {md_label(t or 'untitled', 50)}" for _, m, lv, t in det.communities))
        if det.sources:
            st.markdown("**Sources**: " + "; ".join(f"{md_label(t, 60)} ({n})" for _, t, n in det.sources))
        for kind, items in det.neighbours.items():
            st.markdown(f"**{md_escape(kind)}** ({det.counts.get(kind, len(items)):,}): "
                        + ", ".join(md_label(t, 50) for _, t in items))
        x1, x2, x3 = st.columns(3)
        if x1.button("Expand neighbourhood (+1 hop)", icon=":material/add_circle:", key="graph_expand"):
            have = {i for i, _, _ in drawn}
            room = max(0, cap - len(have))
            S["graph_extra"] = list(S.get("graph_extra", [])) + ([nid] if nid not in have else []) + X.expand(
                store, ws_id, ix, have | {nid}, nid, f, limit=max(room, 1))
            st.rerun()
        if x2.button("Draw its neighbourhood", icon=":material/hub:", key="graph_focus_btn"):
            S["graph_focus"] = nid
            st.rerun()
        if det.kind == "community" and nid in ix.comm_index and x3.button("Open this community",
                                                                           icon=":material/open_in_full:"):
            open_community(nid)
            S["graph_mode_next"] = "Communities"
            st.rerun()


finder(drawn)

# -- export --------------------------------------------------------------------------------------------------------
with st.expander("Export", icon=":material/download:"):
    from core.export import communities_csv, graph_export

    e1, e2 = st.columns(2)
    scope = offered.one(e1.radio, "What", ["Current view", "Whole graph"], horizontal=True, key="graph_export_scope",
                     help=f"Current view: the {len(drawn):,} nodes drawn above and the edges among them.")
    fmt = offered.one(e2.selectbox, "Format", ["graphml", "gexf", "json"], key="graph_export_fmt")
    ids = {i for i, _, _ in drawn} if scope == "Current view" else None
    name = f"{ws.name}-{'view' if ids is not None else 'graph'}.{fmt}"
    st.download_button(f"Download {name}", data=lambda: graph_export(store, ws_id, fmt, ids), file_name=name,
                       on_click="ignore",  # a download leaves the page as it is (no rerun, no redraw)
                       mime="application/json" if fmt == "json" else "application/xml", icon=":material/download:",
                       help="Made when you click: the whole graph of a big workspace takes a while.")
    st.download_button("Download the communities (CSV)", data=lambda: communities_csv(store, ws_id), on_click="ignore",
                       file_name=f"{ws.name}-communities.csv", mime="text/csv", icon=":material/table:")
