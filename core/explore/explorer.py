"""Levels of detail for big heterographs: communities drawn as super-nodes that open on demand.

The Graph page draws one of three things, each at most `max_nodes` nodes, each saying what it left out:

* `overview`: the communities of some methods (roots, or chosen levels) as super-nodes sized by their member
  entities, linked by the relationships between their members (aggregated once per build in `ExploreIndex`);
* `open_community`: one community's child communities as super-nodes and its member entities (most mentioned
  first), each member linked to the child it belongs to, members linked by their relationships;
* the flat, importance-ranked subgraph of `display.display_graph` (small workspaces, a node's neighbourhood).

`expand` adds a node's one-hop neighbourhood to whatever is drawn (`add_nodes`), within the cap. These are pure
functions of the store and the index; the page only draws what they return. Notes carry counts, never document
text, so they can be shown as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import bindparam, text

from core.explore.display import (
    SUMMARY_COLOR,
    SUMMARY_GROUP,
    DisplayEdge,
    DisplayGraph,
    DisplayNode,
    NodeFilter,
    materialize,
    tooltip,
)
from core.explore.drawing import community_colors, member_colors
from core.explore.explore_index import ExploreIndex
from core.store import without_hints
from core.text import truncate

DEFAULT_KINDS = ("entity", "community", "document")
COLOR_BY = ("parent", "method", "level")  # how super-nodes are coloured (`community_colors`)
# the methods the Graph page draws first (GraphRAG's Leiden and ArchRAG's attributed hierarchies); HiRAG's and
# NodeRAG's own communities partition the same entities again and are drawn when chosen
DEFAULT_METHODS = ("leiden", "attributed")


@dataclass(frozen=True)
class Filters:
    """What the community views draw: super-nodes of `methods` (at `levels`, or the roots when empty), entities of
    HiRAG `layers` (empty: all) with at least `min_degree` linked entities, and one-hop expansions of `kinds`."""

    methods: tuple[str, ...] = ("leiden",)
    levels: tuple[int, ...] = ()
    layers: tuple[int, ...] = ()
    min_degree: int = 0
    kinds: tuple[str, ...] = DEFAULT_KINDS
    color_by: str = "level"  # or "method", or "parent" (see `community_colors`)


def entity_mask(ix: ExploreIndex, f: Filters) -> np.ndarray:
    mask = np.ones(len(ix.ent_ids), dtype=bool)
    if f.layers:
        mask &= np.isin(ix.ent_layer, np.array(f.layers, dtype=np.int16))
    if f.min_degree > 0:
        mask &= ix.degree >= f.min_degree
    return mask


def node_filter(ix: ExploreIndex, f: Filters) -> NodeFilter:
    """The same filters for the flat view (`display.display_graph`)."""
    ents = None
    if f.min_degree > 0:
        ents = frozenset(ix.ent_ids[i] for i in np.flatnonzero(entity_mask(ix, Filters(min_degree=f.min_degree))))
    return NodeFilter(layers=tuple(f.layers), methods=tuple(f.methods), levels=tuple(f.levels), entities=ents)


# -- nodes ------------------------------------------------------------------------------------------------------
def _texts(store, ws_id: int | None, table: str, col: str, ids: list[str]) -> dict[str, str]:
    """`col` of the rows `ids` of `table` (ids from the index; within workspace `ws_id` when given)."""
    out: dict[str, str] = {}
    if not ids:
        return out
    scope = "workspace_id=:ws AND " if ws_id is not None else ""
    stmt = text(f"SELECT id, {col} FROM {table} WHERE {scope}id IN :ids").bindparams(bindparam("ids", expanding=True))
    with store.session() as s:
        for i in range(0, len(ids), 500):
            out.update({k: v or "" for k, v in s.connection().execute(stmt, {"ws": ws_id, "ids": ids[i : i + 500]})})
    return out


def super_node(ix: ExploreIndex, c: int, color: tuple[str, str], biggest: int, summary: str = "",
               docs: np.ndarray | None = None) -> DisplayNode:
    """A community as a super-node, sized by the documents its members appear in (by its members without
    `docs`), labelled by its title."""
    m, lv, n = ix.comm_method[c], int(ix.comm_level[c]), int(ix.comm_size[c])
    title = ix.comm_title[c] or f"{m} community"
    kids = len(ix.children[c])
    nd = int(docs[c]) if docs is not None else 0
    facts = (f"{m} · level {lv} · {n:,} member entities" + (f" · {nd:,} documents" if docs is not None else "")
             + (f" · {kids:,} child communities" if kids else ""))
    amount = nd if docs is not None else n
    return DisplayNode(ix.comm_ids[c], "community", truncate(title, 40), tooltip("community", title, summary, facts),
                       size=12 + 38 * (amount / max(1, biggest)) ** 0.5, shape="dot", level=lv, members=max(1, n),
                       color=color[0], group=color[1])


def entity_node(ix: ExploreIndex, e: int, description: str = "", color: str = "") -> DisplayNode:
    layer, w = int(ix.ent_layer[e]), float(ix.ent_weight[e])
    facts = f"{ix.ent_type[e] or 'entity'} · layer {layer} · weight {w:g} · {int(ix.degree[e]):,} linked entities"
    group = SUMMARY_GROUP if layer > 0 else ("entity, in its child community's colour" if color else "")
    return DisplayNode(ix.ent_ids[e], "entity", truncate(ix.ent_title[e], 40),
                       tooltip("entity", ix.ent_title[e], description, facts), size=min(40.0, 10 + 2 * max(w, 1) ** 0.5),
                       level=layer, color=SUMMARY_COLOR if layer > 0 else color, group=group)


def _community_nodes(store, ws_id: int | None, ix: ExploreIndex, cs: list[int], colors: dict[int, tuple[str, str]],
                     docs: np.ndarray | None = None) -> list[DisplayNode]:
    summ = _texts(store, ws_id, "community", "summary", [ix.comm_ids[c] for c in cs])
    amounts = docs if docs is not None else ix.comm_size
    biggest = max((int(amounts[c]) for c in cs), default=1)
    return [super_node(ix, c, colors[c], biggest, summ.get(ix.comm_ids[c], ""), docs) for c in cs]


def _entity_nodes(store, ws_id: int | None, ix: ExploreIndex, es: list[int],
                  colors: dict[int, str] | None = None) -> list[DisplayNode]:
    desc = _texts(store, ws_id, "node", "text", [ix.ent_ids[e] for e in es])
    return [entity_node(ix, e, desc.get(ix.ent_ids[e], ""), (colors or {}).get(e, "")) for e in es]


# -- edges ------------------------------------------------------------------------------------------------------
def _community_links(ix: ExploreIndex, cs: list[int]) -> list[DisplayEdge]:
    """Aggregated links among the drawn communities (same method and level), and child_of between them."""
    drawn = np.zeros(len(ix.comm_ids), dtype=bool)
    drawn[cs] = True
    out = []
    for g in sorted({ix.group_of(c) for c in cs}):
        a, b, n = ix.aggregated(g)
        keep = drawn[a] & drawn[b]
        out += [DisplayEdge(ix.comm_ids[x], ix.comm_ids[y], "links", weight=float(w))
                for x, y, w in zip(a[keep].tolist(), b[keep].tolist(), n[keep].tolist())]
    out += [DisplayEdge(ix.comm_ids[c], ix.comm_ids[int(ix.comm_parent[c])], "child_of")
            for c in cs if ix.comm_parent[c] >= 0 and drawn[ix.comm_parent[c]]]
    return out


def _entity_links(ix: ExploreIndex, es: list[int]) -> list[DisplayEdge]:
    """Relationships (collapsed, counted) and `summarizes` links among the drawn entities."""
    if not es:
        return []
    sel = np.array(sorted(es), dtype=np.int64)
    sub = ix.adjacency[sel][:, sel].tocoo()
    keep = sub.row < sub.col
    out = [DisplayEdge(ix.ent_ids[sel[r]], ix.ent_ids[sel[c]], "relationship", weight=float(w))
           for r, c, w in zip(sub.row[keep].tolist(), sub.col[keep].tolist(), sub.data[keep].tolist())]
    drawn = np.zeros(len(ix.ent_ids), dtype=bool)
    drawn[sel] = True
    up = drawn[ix.up_a] & drawn[ix.up_b]
    out += [DisplayEdge(ix.ent_ids[a], ix.ent_ids[b], "summarizes")
            for a, b in zip(ix.up_a[up].tolist(), ix.up_b[up].tolist())]
    return out


def _cap_edges(edges: list[DisplayEdge], max_edges: int, keep_kinds: tuple[str, ...] = ()) -> tuple[list, int]:
    """Every edge of `keep_kinds`, then the heaviest others while `max_edges` allows; and how many were dropped."""
    fixed = [e for e in edges if e.kind in keep_kinds]
    rest = sorted((e for e in edges if e.kind not in keep_kinds), key=lambda e: -e.weight)
    room = max(0, max_edges - len(fixed))
    return fixed + rest[:room], max(0, len(rest) - room)


# -- views ------------------------------------------------------------------------------------------------------
def overview_candidates(ix: ExploreIndex, f: Filters) -> list[int]:
    """Communities the overview may draw, largest first."""
    method_ok = set(f.methods) if f.methods else set(ix.comm_method)
    cand = [c for c in range(len(ix.comm_ids)) if ix.comm_method[c] in method_ok
            and (int(ix.comm_level[c]) in f.levels if f.levels else ix.comm_parent[c] < 0)]
    return sorted(cand, key=lambda c: (-int(ix.comm_size[c]), int(ix.comm_level[c]), ix.comm_ids[c]))


def overview(store, ix: ExploreIndex, f: Filters, max_nodes: int, edges_per_node: int = 4,
             docs: np.ndarray | None = None, ws_id: int | None = None) -> DisplayGraph:
    """Communities as super-nodes, the largest first, at most `max_nodes`, sized by the documents their members
    appear in (`docs`, per community of the index; without it by their members); at most `edges_per_node` links
    per drawn node, the heaviest."""
    cand = overview_candidates(ix, f)
    drawn = cand[:max_nodes]
    dg = DisplayGraph(nodes=_community_nodes(store, ws_id, ix, drawn,
                                             community_colors(ix, drawn, f.color_by), docs))
    dg.edges, dropped = _cap_edges(_community_links(ix, drawn), edges_per_node * len(drawn), ("child_of",))
    what = " and ".join(sorted({ix.comm_method[c] for c in cand})) or "no"
    where = ("level " + ", ".join(map(str, f.levels))) if f.levels else "the top of each hierarchy"
    sized = "the documents their members appear in" if docs is not None else "their member entities"
    notes = [f"{len(cand):,} {what} communities at {where} as super-nodes, sized by {sized}; a link "
             "counts the relationships between two communities' members. Click a super-node to open it."]
    if len(cand) > len(drawn):
        dg.omitted["communities"] = len(cand) - len(drawn)
        notes.append(f"Showing {len(drawn):,} of {len(cand):,} communities; {len(cand) - len(drawn):,} smaller "
                     f"communities not drawn (cap {max_nodes:,}).")
    if dropped:
        dg.omitted["links"] = dropped
        notes.append(f"{dropped:,} lighter links not drawn.")
    dg.note = " ".join(notes)
    return dg


def open_community(store, ix: ExploreIndex, cid: str, f: Filters, max_nodes: int, edges_per_node: int = 4,
                   docs: np.ndarray | None = None, ws_id: int | None = None) -> DisplayGraph:
    """A community opened: its child communities as super-nodes (largest first, at most a quarter of the cap when
    there are members to draw) and its member entities passing the filters (most mentioned first) in the rest."""
    c = ix.comm_index[cid]
    kids = ix.children[c]
    members = ix.members(c)
    shown = members[entity_mask(ix, f)[members]] if "entity" in f.kinds else members[:0]
    kid_cap = min(len(kids), max(1, max_nodes // 4)) if len(shown) else min(len(kids), max_nodes)
    drawn_kids = kids[:kid_cap]
    room = max(0, max_nodes - len(drawn_kids))
    order = np.lexsort((shown, -ix.degree[shown], -ix.ent_weight[shown]))  # ties: by id
    drawn_members = shown[order][:room].tolist()

    ws = ws_id
    colors = community_colors(ix, drawn_kids, f.color_by, opened=c)
    tint = member_colors(ix, drawn_kids, colors) if f.color_by == "parent" else {}
    dg = DisplayGraph(nodes=_community_nodes(store, ws, ix, drawn_kids, colors, docs)
                      + _entity_nodes(store, ws, ix, drawn_members, tint))
    in_drawn = np.zeros(len(ix.ent_ids), dtype=bool)
    in_drawn[drawn_members] = True
    memberships = [DisplayEdge(ix.ent_ids[e], ix.comm_ids[k], "in_community")
                   for k in drawn_kids for e in ix.members(k)[in_drawn[ix.members(k)]].tolist()]
    edges = memberships + _community_links(ix, drawn_kids) + _entity_links(ix, drawn_members)
    dg.edges, dropped = _cap_edges(edges, edges_per_node * len(dg.nodes), ("in_community", "summarizes"))

    notes = [f"{len(members):,} member entities, {len(kids):,} child communities."]
    part = f"Showing {len(drawn_members):,} of {len(members):,} members (most mentioned first)"
    if len(shown) < len(members):
        part += f"; {len(members) - len(shown):,} hidden by the filters"
        dg.omitted["filtered"] = len(members) - len(shown)
    if len(drawn_members) < len(shown):
        dg.omitted["members"] = len(shown) - len(drawn_members)
    if len(drawn_kids) < len(kids):
        part += f"; {len(kids) - len(drawn_kids):,} smaller child communities not drawn"
        dg.omitted["children"] = len(kids) - len(drawn_kids)
    notes.append(part + f" (cap {max_nodes:,}).")
    if dropped:
        dg.omitted["links"] = dropped
        notes.append(f"{dropped:,} lighter links not drawn.")
    dg.note = " ".join(notes)
    return dg


def breadcrumb(ix: ExploreIndex, cid: str) -> list[tuple[str, str]]:
    """(id, title) from the root of the community's hierarchy down to it."""
    c = ix.comm_index[cid]
    return [(ix.comm_ids[x], ix.comm_title[x] or f"{ix.comm_method[x]} community") for x in ix.ancestors(c) + [c]]


def community_choices(ix: ExploreIndex, dg: DisplayGraph) -> list[tuple[str, str]]:
    """(id, label) of the drawn communities, largest first: what the "Open community" box offers."""
    cs = [ix.comm_index[n.id] for n in dg.nodes if n.kind == "community" and n.id in ix.comm_index]
    cs.sort(key=lambda c: (-int(ix.comm_size[c]), ix.comm_ids[c]))
    return [(ix.comm_ids[c], f"{truncate(ix.comm_title[c] or 'community', 60)} · {ix.comm_method[c]} level "
                             f"{int(ix.comm_level[c])} · {int(ix.comm_size[c]):,} members") for c in cs]


# -- one hop ----------------------------------------------------------------------------------------------------
def _sql(store, sql: str, **params) -> list:
    stmt = text(without_hints(store.engine, sql)).bindparams(*(bindparam(k, expanding=True) for k, v in params.items()
                                  if isinstance(v, (list, tuple))))
    with store.session() as s:
        return list(s.connection().execute(stmt, params))


def expand(store, ws_id: int, ix: ExploreIndex, drawn: set[str], node_id: str, f: Filters,
           limit: int = 200) -> list[str]:
    """The node's neighbours not drawn yet, of the kinds in `f.kinds`, most linked first, at most `limit`: linked
    entities (through relationships), its communities (or a community's parent, children and top members), and
    the nodes its stored edges reach; chunks stand for their documents when chunks are not drawn but documents are."""
    kinds = set(f.kinds)
    out: list[str] = []
    e, c = ix.ent_index.get(node_id), ix.comm_index.get(node_id)
    if e is not None:
        if "entity" in kinds:
            row = ix.adjacency.getrow(e)
            ok = entity_mask(ix, f)[row.indices]
            nb, w = row.indices[ok], row.data[ok]
            out += [ix.ent_ids[i] for i in nb[np.lexsort((nb, -w))].tolist()]
        if "community" in kinds:
            out += [ix.comm_ids[x] for x in ix.communities_of(e) if not f.methods or ix.comm_method[x] in f.methods]
    elif c is not None:
        if "community" in kinds:
            out += ([ix.comm_ids[int(ix.comm_parent[c])]] if ix.comm_parent[c] >= 0 else [])
            out += [ix.comm_ids[k] for k in ix.children[c]]
        if "entity" in kinds:
            m = ix.members(c)
            m = m[entity_mask(ix, f)[m]]
            out += [ix.ent_ids[i] for i in m[np.lexsort((m, -ix.ent_weight[m]))].tolist()]
    rows = _sql(store, "SELECT dst FROM edge WHERE workspace_id=:ws AND src=:id LIMIT 2000", ws=ws_id, id=node_id)
    rows += _sql(store, "SELECT src FROM edge INDEXED BY ix_edge_ws_dst WHERE workspace_id=:ws AND dst=:id LIMIT 2000",
                 ws=ws_id, id=node_id)
    if "entity" in kinds:  # stored links between entities (summarizes) beyond the relationships
        mask = entity_mask(ix, f)
        out += [r[0] for r in rows if r[0] in ix.ent_index and mask[ix.ent_index[r[0]]]]
    others = [r[0] for r in rows if r[0] not in ix.ent_index and r[0] not in ix.comm_index]
    found = {}
    for i in range(0, len(others), 500):
        part = others[i : i + 500]
        found.update({r[0]: (r[1], r[2]) for r in _sql(
            store, "SELECT id, kind, document_id FROM node WHERE workspace_id=:ws AND id IN :ids", ws=ws_id, ids=part)})
        found.update({r[0]: ("document", None) for r in _sql(
            store, "SELECT id FROM document WHERE workspace_id=:ws AND id IN :ids", ws=ws_id, ids=part)})
    docs = []
    for o in others:
        kind, doc = found.get(o, ("", None))  # "": a community row the explorer does not draw (WCC)
        if kind in kinds:
            out.append(o)
        elif kind == "chunk" and doc and "document" in kinds:
            docs.append(doc)
    out += docs
    return [i for i in dict.fromkeys(out) if i not in drawn and i != node_id][:limit]


def add_nodes(store, ws_id: int, ix: ExploreIndex, dg: DisplayGraph, extra: list[str], max_nodes: int,
              color_by: str = "level") -> DisplayGraph:
    """`dg` plus the `extra` nodes (from expansions) while the cap allows, with every edge between a new node and
    what is drawn: stored edges, relationships collapsed into entity links, memberships, child_of, and a
    document's chunks' mentions. `dg` itself is left as it was."""
    dg = DisplayGraph(nodes=list(dg.nodes), edges=list(dg.edges), available=dict(dg.available), note=dg.note,
                      omitted=dict(dg.omitted))
    have = set(dg.ids)
    new_all = [i for i in dict.fromkeys(extra) if i not in have]
    new = new_all[: max(0, max_nodes - len(dg.nodes))]
    if len(new_all) > len(new):
        dg.omitted["expanded"] = len(new_all) - len(new)
        dg.note += f" {len(new_all) - len(new):,} nodes of the expanded neighbourhoods not drawn (cap {max_nodes:,})."
    if not new:
        return dg
    ents = [ix.ent_index[i] for i in new if i in ix.ent_index]
    comms = [ix.comm_index[i] for i in new if i in ix.comm_index]
    rest = [i for i in new if i not in ix.ent_index and i not in ix.comm_index]
    nodes = {n.id: n for n in _entity_nodes(store, ws_id, ix, ents)
             + _community_nodes(store, ws_id, ix, comms, community_colors(ix, comms, color_by))
             + materialize(store, ws_id, rest)}
    dg.nodes += [nodes[i] for i in new if i in nodes]
    every, fresh = have | set(nodes), set(nodes)
    seen = {(e.src, e.dst, e.kind) for e in dg.edges}

    def add(src: str, dst: str, kind: str, weight: float = 1.0) -> None:
        if src in every and dst in every and (src in fresh or dst in fresh) and (src, dst, kind) not in seen:
            seen.add((src, dst, kind))
            dg.edges.append(DisplayEdge(src, dst, kind, weight=weight))

    ids = sorted(fresh)
    all_ids = sorted(every)
    for src, dst, kind in _sql(store, "SELECT src, dst, kind FROM edge WHERE workspace_id=:ws AND src IN :ids "
                                      "AND dst IN :all", ws=ws_id, ids=ids, all=all_ids) + _sql(
            store, "SELECT src, dst, kind FROM edge INDEXED BY ix_edge_ws_dst WHERE workspace_id=:ws AND dst IN :ids "
                   "AND src IN :all", ws=ws_id, ids=ids, all=all_ids):
        add(src, dst, kind)
    ent_ids = sorted(i for i in every if i in ix.ent_index)
    for ed in _entity_links(ix, [ix.ent_index[i] for i in ent_ids]):
        add(ed.src, ed.dst, ed.kind, ed.weight)
    for c in sorted(ix.comm_index[i] for i in every if i in ix.comm_index):
        p = int(ix.comm_parent[c])
        if p >= 0:
            add(ix.comm_ids[c], ix.comm_ids[p], "child_of")
    docs = sorted(i for i in every if i not in ix.ent_index and i not in ix.comm_index)
    if docs and ent_ids:
        # a document's chunks' mentions of the drawn entities (from the new entities, or of the new documents)
        new_ents = [i for i in ent_ids if i in fresh]
        new_docs = [i for i in docs if i in fresh]
        pairs = _sql(store, "SELECT n.document_id, e.dst FROM edge e INDEXED BY ix_edge_ws_dst JOIN node n ON n.id = "
                            "e.src WHERE e.workspace_id=:ws AND e.dst IN :ents AND e.kind='mentions' AND n.kind='chunk' "
                            "AND n.document_id IN :docs", ws=ws_id, ents=new_ents, docs=docs) if new_ents else []
        if new_docs:
            chunks = dict(_sql(store, "SELECT id, document_id FROM node WHERE workspace_id=:ws AND document_id IN :docs "
                                      "AND kind='chunk'", ws=ws_id, docs=new_docs))
            pairs += [(chunks[c], e) for c, e in _sql(
                store, "SELECT src, dst FROM edge WHERE workspace_id=:ws AND src IN :cs AND kind='mentions'",
                ws=ws_id, cs=sorted(chunks)) if e in every] if chunks else []
        for doc, ent in pairs:
            add(doc, ent, "mentions")
    return dg
