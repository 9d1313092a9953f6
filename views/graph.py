"""Graph: the heterograph at levels of detail. A big workspace opens on its communities as super-nodes (coloured by
the hierarchy they fall under, labelled by title, sized by documents); a click (or "Open community") opens one into
its child communities and member entities, with a breadcrumb back up. Small workspaces, and a node's neighbourhood,
draw the nodes themselves. Find a node by name (found: ringed and centred); beside the canvas a legend and the
details of the node clicked or found; settings and filters, "How are two entities connected?" and the exports further down. Algorithms live in
core/explore; this page only draws."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import streamlit as st

from core.explore import explorer as X
from core.explore.connect import community_documents, connect, entity_documents, path_graph
from core.explore.details import describe_node
from core.explore.display import KIND_COLORS, display_graph
from core.explore.drawing import vis_payload, with_focus
from core.explore.explore_index import fingerprint, load_index
from core.explore.find import Found, search_names
from core.explore.legend import legend_html, sized_by
from ui import offered
from ui import resources as R
from ui.graph_canvas import graph_canvas
from ui.graph_panels import connection_panel, details_panel, entity_picker
from ui.text import md_label

# A selectbox's format_func is `dict.get` of a dict keyed by the options: Streamlit formats the options (every one a
# key, so never None) and a stale session value (None there makes Streamlit reset the widget, as it always has).
Label = Callable[[str], str]
MODES = ["Communities", "Nodes"]
HEIGHT = 560
FIND_KINDS = ("entity", "document", "community")
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


@st.cache_resource(show_spinner="Reading which documents mention which entities…", max_entries=4)
def entity_docs(ws_id: int, key: str):
    return entity_documents(store, ws_id, explore_index(ws_id, key))


@st.cache_data(show_spinner=False, max_entries=4)
def comm_docs(ws_id: int, key: str):
    return community_documents(entity_docs(ws_id, key))


@st.cache_data(show_spinner="Drawing the communities…", max_entries=64)
def community_view(ws_id: int, key: str, cid: str | None, f: X.Filters, cap: int, extra: tuple[str, ...],
                   physics: bool, hier: bool) -> tuple[dict, str, list, list, str]:
    ix = explore_index(ws_id, key)
    docs = comm_docs(ws_id, key)
    per = cfg.edges_per_node
    dg = (X.open_community(store, ix, cid, f, cap, per, docs, ws_id) if cid
          else X.overview(store, ix, f, cap, per, docs, ws_id))
    if extra:
        dg = X.add_nodes(store, ws_id, ix, dg, list(extra), cap, f.color_by)
    return (vis_payload(dg, HEIGHT, physics, hier), dg.note, X.community_choices(ix, dg),
            [(n.id, n.kind, n.label) for n in dg.nodes], legend_html(dg, sized_by(dg, True)))


@st.cache_data(show_spinner="Drawing the graph…", max_entries=32)
def node_view(ws_id: int, key: str, kinds: tuple[str, ...], cap: int, focus: str | None, f: X.Filters,
              extra: tuple[str, ...], physics: bool, hier: bool) -> tuple[dict, str, list, str]:
    ix = explore_index(ws_id, key)
    methods = () if set(f.methods) >= set(ix.comm_method) else f.methods  # all methods: no filter
    flt = X.node_filter(ix, X.Filters(methods=methods, levels=f.levels, layers=f.layers, min_degree=f.min_degree))
    dg = display_graph(store, ws_id, list(kinds), cap, focus, flt, extra, f.min_degree)
    return (vis_payload(dg, HEIGHT, physics, hier), dg.note, [(n.id, n.kind, n.label) for n in dg.nodes],
            legend_html(dg, sized_by(dg, False)))


@st.cache_data(show_spinner=False, max_entries=256)
def details(ws_id: int, key: str, node_id: str):
    return describe_node(store, ws_id, node_id)


@st.cache_data(show_spinner=False, max_entries=256)
def find(ws_id: int, key: str, q: str, layers: tuple[int, ...], kinds: tuple[str, ...] = FIND_KINDS) -> Found:
    return search_names(store, ws_id, q, layers, kinds=kinds)


@st.cache_data(show_spinner="Looking for paths…", max_entries=64)
def connection(ws_id: int, key: str, a: str, b: str):
    con = connect(store, ws_id, entity_docs(ws_id, key), a, b)
    return con, [vis_payload(path_graph(store, ws_id, p), 150, False) for p in (con.paths if con else [])]


key = fingerprint(store, ws_id)
ix = explore_index(ws_id, key)
layers_key = f"graph_layers_{ws.name}"

# -- UI state: reset when the workspace changes; a node sent from the Ask page (or found) opens its neighbourhood --
if S.get("graph_ws") != ws.name:
    S["graph_ws"] = ws.name
    for k in ("graph_path", "graph_extra", "graph_pick", "graph_mode", "graph_drawn_ids"):
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
    """A click in the canvas: a community super-node opens (in the Communities view); any node shows its details."""
    ev = S.get("graph_canvas") or {}
    if not ev.get("id") or ev.get("seq") == S.get("graph_seq"):
        return
    S["graph_seq"] = ev["seq"]
    if ev.get("kind") == "community" and ev["id"] in ix.comm_index and S.get("graph_mode") == "Communities":
        open_community(ev["id"])
    S["graph_pick"] = ev["id"]


def show_found(nid: str | None) -> None:
    """A node found by name: picked, ringed and centred; when the canvas does not draw it, its neighbourhood is
    drawn around it."""
    if not nid:
        return
    S["graph_pick"] = nid
    S["graph_centre"] = S.get("graph_centre", 0) + 1
    if nid not in S.get("graph_drawn_ids", ()):
        S["graph_focus"] = nid


def on_query() -> None:
    found = find(ws_id, key, (S.get("graph_query") or "").strip(), tuple(S.get(layers_key) or ()))
    show_found(found.matches[0].id if found.matches else None)


def on_open_select() -> None:
    cid = S.get("graph_open")
    if cid:
        open_community(cid)
        S["graph_pick"] = cid
    S["graph_open"] = None


def go_to(new_path: list[str]) -> None:
    S["graph_path"], S["graph_extra"] = new_path, []


# -- top: the view and the search ----------------------------------------------------------------------------------
t1, t2, t3 = st.columns([1.3, 2, 2.4], vertical_alignment="bottom")
mode = offered.one(t1.radio, "View", MODES, key="graph_mode", horizontal=True,
                   help="Communities: super-nodes that open on a click. Nodes: the nodes themselves, most important "
                        "first, or a node's neighbourhood.")
query = t2.text_input("Find a node by name", placeholder="e.g. Okafor", key="graph_query", on_change=on_query,
                      help="Entities (the exact name first, then names starting with it, then near spellings), "
                           "documents and communities. Summary entities only for the HiRAG layers chosen in the "
                           "filters.")
found = find(ws_id, key, query.strip(), tuple(S.get(layers_key) or ())) if query and query.strip() else None
if found and found.matches:
    options = {m.id: m.label for m in found.matches}
    offered.one(t3.selectbox, "Matches", list(options), format_func=cast(Label, options.get), key="graph_match",
                on_change=lambda: show_found(S.get("graph_match")))
elif found is not None:
    t3.caption("No entity, document or community with that name.")
crumbs_row = st.container(horizontal=True, key="graph_crumbs")  # in both views: the canvas keeps its place (and frame)
left, right = st.columns([3, 2], gap="medium")
canvas_box = left.container()

# -- settings and filters (below the drawing; read before it is drawn) -------------------------------------------------
methods_present = sorted(set(ix.comm_method))
with st.expander("Display settings and filters", icon=":material/tune:"):
    c2, c3, c4, g3 = st.columns([2, 1, 1.4, 2])
    cap = c2.slider("Max nodes", 50, max(50, cfg.max_nodes), min(max(50, cfg.default_nodes), cfg.max_nodes),
                    step=50, help=f"The page never sends more than {cfg.max_nodes:,} nodes to the browser.")
    physics = c3.toggle("Physics", value=True)
    hier = c4.toggle("Hierarchical layout", value=False, help="Levels: community level, then HiRAG layer.")
    color_by = offered.one(g3.radio, "Colour communities by", list(X.COLOR_BY), horizontal=True, key="graph_color_by",
                           help="parent: a super-node takes the colour of the top community it falls under (in an "
                                "opened community each child its own colour, its members too); method; level.")
    f1, f2, f3 = st.columns(3)
    kinds = offered.many(f1.multiselect, "Node kinds", list(KIND_COLORS), key=f"graph_kinds_{ws.name}",
                         default=list(X.DEFAULT_KINDS), help="What the Nodes view draws and expanding a node adds.")
    layers = offered.many(f2.multiselect, "HiRAG layers", sorted({int(x) for x in set(ix.ent_layer.tolist())}),
                          key=layers_key, help="Entities of these layers only (none chosen: every layer is drawn, "
                                               "and the search finds the extracted entities, layer 0).")
    min_degree = f3.number_input("Minimum degree", 0, 10_000, 0, help="Entities linked to at least this many "
                                 "other entities through relationships.")
    g1, g2 = st.columns(2)
    methods = offered.many(g1.multiselect, "Community methods", methods_present, key=f"graph_methods_{ws.name}",
                           default=[m for m in methods_present if m in X.DEFAULT_METHODS] or methods_present,
                           help="Leiden: GraphRAG's, on the extracted entities; hirag: HiRAG's, on its layered "
                                "graph; noderag: NodeRAG's, on its heterograph; attributed: ArchRAG's.")
    levels = offered.many(g2.multiselect, "Community levels", sorted({int(x) for x in set(ix.comm_level.tolist())}),
                          key=f"graph_levels_{ws.name}",
                          help="Super-nodes of these levels (none chosen: the top of each hierarchy).")
f = X.Filters(methods=tuple(methods), levels=tuple(sorted(levels)), layers=tuple(sorted(layers)),
              min_degree=int(min_degree), kinds=tuple(kinds), color_by=color_by)
extra = tuple(S.get("graph_extra", []))

# -- the drawing; beside it the legend and the details ----------------------------------------------------------------
with canvas_box:
    if mode == "Communities" and not ix.comm_ids:
        st.info("This build has no communities; use the Nodes view.")
        st.stop()
    if mode == "Communities":
        crumbs = [("", "Overview")] + (X.breadcrumb(ix, path[-1]) if path else [])
        crumbs_row.button("Back", icon=":material/arrow_upward:", disabled=not path, on_click=go_to,
                          args=(path[:-1],), key="graph_back")
        for i, (_cid, title) in enumerate(crumbs):
            crumbs_row.button(("› " if i else "") + md_label(title, 40), key=f"graph_crumb_{i}", type="tertiary",
                              disabled=i == len(crumbs) - 1, on_click=go_to, args=(path[:i],))
        payload, note, choices, drawn, legend = community_view(ws_id, key, path[-1] if path else None, f, cap,
                                                               extra, physics, hier)
    else:
        choices = []
        payload, note, drawn, legend = node_view(ws_id, key, tuple(kinds), cap, focus, f, extra, physics, hier)
    S["graph_drawn_ids"] = [i for i, _, _ in drawn]
    pick: str | None = S.get("graph_pick")
    graph_canvas(with_focus(payload, pick, S.get("graph_centre", 0)), key="graph_canvas", on_event=on_canvas)
    if note:
        st.caption(note)
    if mode == "Nodes" and focus:
        st.info("Neighbourhood of the selected node.", icon=":material/filter_center_focus:")
        if st.button("Back to the overview"):
            S.pop("graph_focus", None)
            S.pop("graph_focus_seen", None)
            S["graph_extra"] = []
            st.rerun()
    if extra:
        st.caption(f"{len(extra):,} nodes added by expanding neighbourhoods.")
        st.button("Clear expansions", on_click=lambda: S.update(graph_extra=[]))


def actions(det) -> None:
    nid = det.id
    row = st.container(horizontal=True, gap="small")
    x1 = x2 = x3 = row
    if x1.button("Expand +1 hop", icon=":material/add_circle:", key="graph_expand",
                 help="Add its neighbours to the drawing."):
        have = {i for i, _, _ in drawn}
        room = max(0, cap - len(have))
        S["graph_extra"] = list(S.get("graph_extra", [])) + ([nid] if nid not in have else []) + X.expand(
            store, ws_id, ix, have | {nid}, nid, f, limit=max(room, 1))
        st.rerun()
    if x2.button("Draw its neighbourhood", icon=":material/hub:", key="graph_focus_btn",
                 help="Its related entities, communities and documents, around it."):
        S["graph_focus"] = nid
        st.rerun()
    if det.kind == "community" and nid in ix.comm_index and x3.button("Open this community",
                                                                       icon=":material/open_in_full:"):
        open_community(nid)
        S["graph_mode_next"] = "Communities"
        st.rerun()
    if det.kind == "entity" and x3.button("Connect from here", icon=":material/route:", key="graph_connect_from",
                                          help="Ask below how it is connected to another entity."):
        S["connect_a_next"] = det.title
        st.rerun()


with right:
    if found is not None and found.hidden:
        st.caption(f"{found.hidden:,} summary entities (HiRAG layer ≥ 1) also match “{md_label(query, 40)}”; choose "
                   "their layer in the filters to find them.")
    if choices:
        labels = dict(choices)
        offered.maybe(st.selectbox, "Open community", list(labels), format_func=cast(Label, labels.get), index=None,
                      key="graph_open", placeholder="Click a super-node, or pick a drawn community here",
                      on_change=on_open_select)
    on_view = {nid: f"{label} · {kind}" for nid, kind, label in drawn}
    offered.maybe(st.selectbox, "Pick a drawn node", list(on_view), format_func=cast(Label, on_view.get), index=None,
                  key="graph_drawn", placeholder="—", on_change=lambda: show_found(S.get("graph_drawn")))
    with st.container(key="graph_legend"):
        st.markdown(legend, unsafe_allow_html=True)  # Strata's own kind names, meanings and colours only
    det = details(ws_id, key, pick) if pick else None
    if det is not None:
        details_panel(det, HEIGHT - (250 if choices else 170), actions)
    else:
        st.caption("Click a node, find one by name or pick a drawn one: its details show here.")

# -- how are two entities connected? ----------------------------------------------------------------------------------
st.subheader("How are two entities connected?")
if "connect_a_next" in S:
    S["connect_a"] = S.pop("connect_a_next")
k1, k2 = st.columns(2)
ends = []
for col, label, k, eg in ((k1, "From", "connect_a", "e.g. Amara Okafor"), (k2, "To", "connect_b", "e.g. Port Halden")):
    text = (S.get(k) or "").strip()
    ends.append(entity_picker(col, label, k, find(ws_id, key, text, (0,), ("entity",)) if text else None, eg))
if ends[0] and ends[1]:
    con, payloads = connection(ws_id, key, ends[0], ends[1])
    if con is not None:
        connection_panel(con, payloads, on_click=lambda k: S.update(graph_pick=(S.get(k) or {}).get("id")
                                                                    or S.get("graph_pick")))
else:
    st.caption("Two names: the shortest paths between them through relationships and the documents that mention "
               "them, and the documents that mention both.")

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
