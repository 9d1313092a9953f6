"""The hierarchy as pictures and as a detail panel: sunburst / treemap / icicle frames of the community hierarchies
(Leiden: GraphRAG §2; HiRAG's communities on its layered graph: hirag.txt §4.1; NodeRAG's communities on its
heterograph; attributed: ArchRAG §3) and of HiRAG's summary layers (hirag.txt §4.1, key "hirag_layers"), and
everything one community (or summary entity) holds: its report, its members by kind, the documents behind it,
its subgraph.

Pure reads, aggregated in SQL, so the app can cache them per build. A frame draws at most `max_sectors`
sectors: coarse levels first, the largest communities of each level next; the children left out of a parent are
drawn as one "N more" sector, so areas stay true. Values are computed bottom-up (a parent is never smaller than
its drawn children), so `branchvalues="total"` is valid even when sizes do not add up (soft membership, a
hierarchy still being written). Rows whose parent is not (yet) stored hang from the synthetic root.
"""

from __future__ import annotations

import html
from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

from sqlalchemy import bindparam, text

from core.text import truncate

METHODS = {"leiden": "Leiden communities (GraphRAG)", "hirag": "HiRAG communities",
           "noderag": "NodeRAG communities", "attributed": "Attributed communities (ArchRAG)",
           "hirag_layers": "HiRAG summary layers"}
ROOT, MORE, ENTITIES = "root:", "more:", "entities:"


class Row(NamedTuple):
    id: str
    parent: str | None
    level: int
    size: int
    title: str
    kind: str  # community, summary, entities


@dataclass
class Sector:
    id: str
    parent: str  # "" for the root
    label: str
    title: str
    level: int
    size: int
    kind: str  # root, community, summary, entities, more
    value: float = 0.0
    target: str | None = None  # the community or summary entity a click on this sector opens


@dataclass
class HierarchyFrame:
    method: str
    sectors: list[Sector]
    total: int  # communities (or summary entities) stored for this method
    shown: int  # of which drawn as their own sector
    per_level: dict[int, int] = field(default_factory=dict)
    note: str = ""

    def columns(self) -> dict[str, list]:
        return {"ids": [s.id for s in self.sectors], "parents": [s.parent for s in self.sectors],
                "labels": [s.label for s in self.sectors], "values": [s.value for s in self.sectors]}

    def target(self, sector_id: str | None) -> str | None:
        return next((s.target for s in self.sectors if s.id == sector_id), None)

    def choices(self) -> list[Sector]:
        """Sectors that open a community (or summary entity), coarse levels first."""
        return [s for s in self.sectors if s.kind in ("community", "summary")]


def _rows(session, sql: str, **params) -> list:
    """Rows of a raw SQL read; a list or tuple parameter binds as an `IN :name` list."""
    stmt = text(sql).bindparams(*(bindparam(k, expanding=True) for k, v in params.items()
                                  if isinstance(v, (list, tuple))))
    return list(session.connection().execute(stmt, params))


def hierarchy_frame(store, ws_id: int, method: str, max_sectors: int = 800, max_children: int = 40) -> HierarchyFrame:
    """The communities of `method` (leiden, hirag, noderag, attributed, wcc) as a tree under a synthetic root,
    or HiRAG's summary layers for "hirag_layers". Read level by level: only the children of the communities drawn
    so far are loaded."""
    if method == "hirag_layers":
        return hirag_frame(store, ws_id, max_sectors, max_children)
    cols = "c.id, c.parent_id, c.level, c.size, c.title"
    with store.session() as s:
        per_level = {int(lv): int(n) for lv, n in _rows(
            s, "SELECT level, count(*) FROM community WHERE workspace_id=:ws AND method=:m GROUP BY level",
            ws=ws_id, m=method)}
        tops = _rows(s, f"SELECT {cols} FROM community c LEFT JOIN community p ON p.id=c.parent_id "
                        "AND p.workspace_id=c.workspace_id AND p.method=c.method "
                        "WHERE c.workspace_id=:ws AND c.method=:m AND (p.id IS NULL OR c.parent_id=c.id)", ws=ws_id,
                     m=method)

        def children_of(parents: list[str]) -> list[Row]:
            out = []
            for i in range(0, len(parents), 5000):
                out += _rows(s, f"SELECT {cols} FROM community c WHERE c.workspace_id=:ws AND c.method=:m "
                                "AND c.parent_id IN :ps AND c.id != c.parent_id", ws=ws_id, m=method,
                             ps=parents[i : i + 5000])
            return [Row(i, p, lv, n or 0, t or "", "community") for i, p, lv, n, t in out]

        return _frame(method, METHODS.get(method, method), [Row(i, None, lv, n or 0, t or "", "community")
                                                            for i, _p, lv, n, t in tops],
                      children_of, per_level, max_sectors, max_children)


def hirag_frame(store, ws_id: int, max_sectors: int = 800, max_children: int = 40) -> HierarchyFrame:
    """HiRAG summary layers: top-layer summary entities at the root, down to layer-1 summaries, each of which holds
    one leaf counting the extracted (layer-0) entities it summarizes. A member summarized into several summaries
    (soft membership) hangs under its strongest one."""
    with store.session() as s:
        summaries = _rows(s, "SELECT id, layer, title FROM node WHERE workspace_id=:ws AND kind='entity' "
                             "AND layer>0", ws=ws_id)
        n_in = dict(_rows(s, "SELECT dst, count(*) FROM edge INDEXED BY ix_edge_ws_kind WHERE workspace_id=:ws "
                             "AND kind='summarizes' GROUP BY dst", ws=ws_id))
        upper = [i for i, lv, _ in summaries if lv > 1]  # summaries of summaries: their members are summaries
        links = [r for k in range(0, len(upper), 5000) for r in _rows(
            s, "SELECT src, dst, weight FROM edge INDEXED BY ix_edge_ws_dst WHERE workspace_id=:ws AND dst IN :ds "
               "AND kind='summarizes'", ws=ws_id, ds=upper[k : k + 5000])]
    layer = {i: lv for i, lv, _ in summaries}
    links = [(src, dst, w) for src, dst, w in links if src in layer]
    best: dict[str, tuple[float, str]] = {}
    n0 = {i: int(n_in.get(i, 0)) for i in layer}  # members from layer 0: every member but the summary ones
    for src, dst, w in links:
        if dst in n0:
            n0[dst] -= 1
        if dst in layer and (src not in best or (-(w or 0.0), dst) < best[src]):
            best[src] = (-(w or 0.0), dst)
    parent = {src: dst for src, (_, dst) in best.items()}
    size = dict(n0)
    for i, _lv, _ in sorted(summaries, key=lambda r: r[1]):  # lower layers first: sizes roll up
        if parent.get(i) in size:
            size[parent[i]] += size[i]
    kids: dict[str | None, list[Row]] = defaultdict(list)
    for i, lv, t in summaries:
        kids[parent.get(i)].append(Row(i, parent.get(i), lv, max(1, size[i]), t or "", "summary"))
    for i, n in n0.items():
        if n > 0:
            kids[i].append(Row(ENTITIES + i, i, 0, n, f"{n:,} extracted entities", "entities"))
    per_level: dict[int, int] = defaultdict(int)
    for lv in layer.values():
        per_level[lv] += 1
    return _frame("hirag_layers", METHODS["hirag_layers"], kids.get(None, []),
                  lambda ps: [r for p in ps for r in kids.get(p, ())], dict(per_level), max_sectors, max_children)


def _frame(method: str, root_title: str, tops: list[Row], children_of, per_level: dict[int, int], max_sectors: int,
           max_children: int) -> HierarchyFrame:
    """Sectors level by level: of the children of the sectors drawn so far, the largest (at most `max_children`
    per parent) while the budget lasts, one "N more" sector for each parent's remaining children."""
    root_id = ROOT + method
    top_children = max(max_children, max_sectors // 4)  # the first ring may hold more: it is the widest
    def order(r: Row) -> tuple:
        return (r.kind == "entities", -r.size, r.id)

    kids: dict[str, list[Row]] = {root_id: sorted(tops, key=order)}
    out: list[Sector] = []
    frontier, budget, seen = [root_id], max_sectors, {root_id}
    while frontier:
        room = budget - sum(1 for p in frontier if kids.get(p))  # one slot kept per parent for its “N more”
        cand = [r for p in frontier for r in kids.get(p, ())[: max_children if p != root_id else top_children]
                if r.id not in seen]
        cand.sort(key=lambda r: (-r.size, r.level, r.id))
        take = cand[: max(0, room)]
        taken = {r.id for r in take}
        seen |= taken
        rests = [(p, [r for r in kids.get(p, ()) if r.id not in taken]) for p in frontier]
        rests = [(p, rest) for p, rest in rests if rest]
        if not take:  # the budget is spent: what room is left says how much lies deeper, largest first
            rests = sorted(rests, key=lambda pr: -sum(r.size for r in pr[1]))[: max(0, budget)]
        for p, rest in rests:
            what = "communities" if method != "hirag_layers" else "summaries"
            out.append(Sector(MORE + p, p, f"{len(rest):,} more", f"{len(rest):,} more {what} not drawn", -1,
                              sum(r.size for r in rest), "more", target=None if p == root_id else p))
        if not take:
            break
        for r in take:
            label = truncate(r.title, 32) if r.title else f"level {r.level} · {r.size:,}"
            parent = r.parent if r.parent is not None else root_id
            out.append(Sector(r.id, parent, label, r.title, r.level, r.size, r.kind,
                              target=r.parent if r.kind == "entities" else r.id))
        budget = max_sectors - len(out)
        frontier = [r.id for r in take if r.kind != "entities"]
        kids = defaultdict(list)
        for r in children_of(frontier) if frontier else []:
            if r.id not in seen:
                kids[r.parent].append(r)
        for lst in kids.values():
            lst.sort(key=order)
    root = Sector(root_id, "", root_title, root_title, -1, sum(r.size for r in tops), "root")
    value: dict[str, float] = defaultdict(float)
    for sec in reversed(out):  # deeper sectors come later: roll their values up
        sec.value = max(float(max(sec.size, 1)), value[sec.id])
        value[sec.parent] += sec.value
    root.value = value[root_id]
    shown = sum(1 for x in out if x.kind in ("community", "summary"))
    total = sum(per_level.values())
    note = ""
    if shown < total:
        note = (f"Drawing {shown:,} of {total:,} {'communities' if method != 'hirag_layers' else 'summary entities'} "
                f"(cap {max_sectors:,}): coarse levels first, the largest of each level next, the rest of a "
                "parent's children as one “N more” sector.")
    return HierarchyFrame(method, [root] + out if out else [], total, shown, per_level, note)


def find(store, ws_id: int, method: str, text_: str, limit: int = 50) -> list[Sector]:
    """Communities of `method` (or summary entities) whose title contains `text_`: coarse and large first."""
    like = f"%{text_.strip()}%"
    with store.session() as s:
        if method == "hirag_layers":
            rows = _rows(s, "SELECT id, layer, weight, title FROM node WHERE workspace_id=:ws AND kind='entity' "
                            "AND layer>0 AND title LIKE :q ORDER BY layer DESC, weight DESC LIMIT :n",
                         ws=ws_id, q=like, n=limit)
        else:
            rows = _rows(s, "SELECT id, level, size, title FROM community WHERE workspace_id=:ws AND method=:m "
                            "AND title LIKE :q ORDER BY level, size DESC LIMIT :n", ws=ws_id, m=method, q=like,
                         n=limit)
    kind = "summary" if method == "hirag_layers" else "community"
    return [Sector(i, "", truncate(t or "", 32), t or "", int(lv), int(n or 0), kind, target=i) for i, lv, n, t in rows]


def frame_signature(store, ws_id: int, method: str) -> tuple:
    """A cheap fingerprint of what a frame would show (rows and titles per level): a cache key while a build
    writes the hierarchy level by level."""
    with store.session() as s:
        if method == "hirag_layers":
            rows = _rows(s, "SELECT layer, count(*), sum(length(title)) FROM node WHERE workspace_id=:ws "
                            "AND kind='entity' AND layer>0 GROUP BY layer", ws=ws_id)
        else:
            rows = _rows(s, "SELECT level, count(*), sum(size), sum(title != '') FROM community "
                            "WHERE workspace_id=:ws AND method=:m GROUP BY level", ws=ws_id, m=method)
    return tuple(tuple(r) for r in rows)


def plot_text(s: str) -> str:
    """Document text for a plotly label or hover: plotly reads a subset of HTML there, so `&`, `<`, `>` escape."""
    return html.escape(s, quote=False)


def hierarchy_figure(frame: HierarchyFrame, view: str = "sunburst", height: int = 620):
    """A plotly figure (sunburst, treemap or icicle) of `frame`; every document-derived string escaped."""
    import plotly.graph_objects as go

    cols = frame.columns()
    custom = [[plot_text(truncate(s.title, 120)), _where(frame.method, s), f"{s.size:,}"] for s in frame.sectors]
    trace = {"sunburst": go.Sunburst, "treemap": go.Treemap, "icicle": go.Icicle}[view]
    kw = dict(ids=cols["ids"], parents=cols["parents"], labels=[plot_text(x) for x in cols["labels"]],
              values=cols["values"], branchvalues="total", customdata=custom,
              hovertemplate="<b>%{customdata[0]}</b><br>%{customdata[1]} · %{customdata[2]} members<extra></extra>")
    if view == "sunburst":
        kw["insidetextorientation"] = "radial"
    fig = go.Figure(trace(**kw))
    fig.update_layout(height=height, margin=dict(l=4, r=4, t=4, b=4))
    return fig


def _where(method: str, s: Sector) -> str:
    if s.kind == "root":
        return f"{METHODS.get(method, method)}"
    if s.kind == "more":
        return "not drawn (cap)"
    if s.kind == "entities":
        return "HiRAG layer 0"
    return f"HiRAG layer {s.level}" if s.kind == "summary" else f"level {s.level}"


# -- one community (or summary entity) in detail --------------------------------------------------------------------
@dataclass
class Member:
    id: str
    title: str
    type: str
    weight: float
    text: str


@dataclass
class SourceDoc:
    id: str
    title: str
    filename: str
    mentions: int  # mentions of members in the document's chunks (or statements)
    members: int  # distinct members it mentions


@dataclass
class CommunityDetail:
    id: str
    kind: str  # community, summary
    method: str
    level: int
    title: str
    summary: str
    report: dict
    size: int
    parent: tuple[str, str] | None  # (id, title)
    children: list[tuple[str, str, int]]  # (id, title, size), largest first
    members: dict[str, list[Member]]  # kind -> the most important members of that kind
    counts: dict[str, int]  # kind -> how many in all
    documents: list[SourceDoc]
    n_documents: int
    graph: dict | None = None  # the members' subgraph, a canvas payload (core/explore/drawing.py)
    graph_note: str = ""


# Members are gathered once into a temporary table (the connection's own, never the workspace's tables); lookups
# by edge target name their index, which SQLite's planner (no ANALYZE statistics) would otherwise pass over.
_BY_COMMUNITY = ("INSERT OR IGNORE INTO temp.strata_members SELECT src FROM edge INDEXED BY ix_edge_ws_dst "
                 "WHERE workspace_id=:ws AND dst=:cid AND kind='in_community'")
_BY_SUMMARY = ("INSERT OR IGNORE INTO temp.strata_members WITH RECURSIVE d(id) AS (SELECT src FROM edge "
               "INDEXED BY ix_edge_ws_dst WHERE workspace_id=:ws AND dst=:cid AND kind='summarizes' UNION "
               "SELECT e.src FROM d CROSS JOIN edge e INDEXED BY ix_edge_ws_dst ON e.workspace_id=:ws AND e.dst=d.id "
               "AND e.kind='summarizes') SELECT id FROM d")
_GROUP = "CASE WHEN n.kind='entity' AND n.layer>0 THEN 'summary entity' ELSE n.kind END"
_M = "temp.strata_members m"
_BY_DST = "edge e INDEXED BY ix_edge_ws_dst"


def community_detail(store, ws_id: int, cid: str, per_kind: int = 200, max_documents: int = 25,
                     graph_cap: int = 120) -> CommunityDetail | None:
    """Report, members by kind, source documents (most member mentions first) and the drawn subgraph of one
    community, or of one HiRAG summary entity (its members: everything it summarizes, layer by layer)."""
    with store.session() as s:
        c = _rows(s, "SELECT id, method, level, parent_id, size, title, summary, report FROM community "
                     "WHERE id=:cid AND workspace_id=:ws", ws=ws_id, cid=cid)
        if c:
            _, method, level, parent_id, size, title, summary, report = c[0]
            kind, gather = "community", _BY_COMMUNITY
            parent = _rows(s, "SELECT id, title FROM community WHERE id=:p", p=parent_id) if parent_id else []
            children = _rows(s, "SELECT id, title, size FROM community WHERE workspace_id=:ws AND method=:m "
                                "AND parent_id=:cid AND id!=:cid ORDER BY size DESC, id LIMIT 100",
                             ws=ws_id, m=method, cid=cid)
            report = _json(report)
        else:
            n = _rows(s, "SELECT id, layer, title, text FROM node WHERE id=:cid AND workspace_id=:ws "
                         "AND kind='entity' AND layer>0", ws=ws_id, cid=cid)
            if not n:
                return None
            _, level, title, summary = n[0]
            method, kind, gather, report, size = "hirag_layers", "summary", _BY_SUMMARY, {}, 0
            parent = _rows(s, "SELECT n.id, n.title FROM edge e CROSS JOIN node n ON n.id=e.dst "
                              "WHERE e.workspace_id=:ws AND e.src=:cid AND e.kind='summarizes' "
                              "ORDER BY e.weight DESC, n.id LIMIT 1", ws=ws_id, cid=cid)
            children = _rows(s, f"SELECT n.id, n.title, n.weight FROM {_BY_DST} CROSS JOIN node n ON n.id=e.src "
                                "WHERE e.workspace_id=:ws AND e.dst=:cid AND e.kind='summarizes' AND n.layer>0 "
                                "ORDER BY n.weight DESC, n.id LIMIT 100", ws=ws_id, cid=cid)
        p = dict(ws=ws_id, cid=cid, cap=per_kind)
        _rows_w(s, "CREATE TEMP TABLE IF NOT EXISTS strata_members (id TEXT PRIMARY KEY)")
        try:
            _rows_w(s, "DELETE FROM temp.strata_members")
            _rows_w(s, gather, **p)
            members, counts, docs = _members(s, kind, p, max_documents)
            names = {i: (t, f) for i, t, f in _rows(
                s, "SELECT id, title, filename FROM document WHERE workspace_id=:ws AND id IN :ids",
                ws=ws_id, ids=[d[0] for d in docs])} if docs else {}
        finally:
            _rows_w(s, "DROP TABLE IF EXISTS temp.strata_members")
            s.commit()  # ends the read; only the connection's temporary table was written
    if kind == "summary":
        size = counts.get("entity", 0)
    documents = [SourceDoc(d, *names.get(d, (d, "")), int(n), int(ms)) for d, n, ms, _ in docs]
    det = CommunityDetail(cid, kind, method, int(level), title or "", summary or "", report or {}, int(size or 0),
                          (parent[0][0], parent[0][1] or "") if parent else None,
                          [(i, t or "", int(n or 0)) for i, t, n in children], dict(members), counts, documents,
                          int(docs[0][3]) if docs else 0)
    _draw(store, ws_id, det, graph_cap)
    return det


def _rows_w(session, sql: str, **params) -> None:
    session.connection().execute(text(sql), params)


def _members(s, kind: str, p: dict, max_documents: int) -> tuple[dict[str, list[Member]], dict[str, int], list]:
    """Members by kind (the heaviest `cap` of each), relationships inside, attached attributes and high-level
    elements, and the documents whose chunks (or statements) mention members most."""
    members: dict[str, list[Member]] = defaultdict(list)
    counts: dict[str, int] = {}
    for k, i, t, ty, w, x, total in _rows(
            s, f"SELECT k, id, title, type, weight, text, total FROM (SELECT {_GROUP} AS k, n.id, n.title, n.type, "
            "n.weight, substr(n.text, 1, 400) AS text, row_number() OVER (PARTITION BY "
            f"{_GROUP} ORDER BY n.weight DESC, n.id) AS rk, count(*) OVER (PARTITION BY {_GROUP}) AS total "
            f"FROM {_M} CROSS JOIN node n ON n.id=m.id) WHERE rk<=:cap ORDER BY k, rk", **p):
        members[k].append(Member(i, t, ty, w, x))
        counts[k] = total
    for i, t, ty, w, x, total in _rows(
            s, "SELECT r.id, r.title, r.type, r.weight, substr(r.text, 1, 400), count(*) OVER () FROM node r "
            f"WHERE r.id IN (SELECT e.src FROM {_M} CROSS JOIN {_BY_DST} ON e.workspace_id=:ws AND e.dst=m.id "
            "WHERE e.kind IN ('subject', 'object') GROUP BY e.src HAVING count(*)>=2) "
            "ORDER BY r.weight DESC, r.id LIMIT :cap", **p):
        members["relationship (inside)"].append(Member(i, t, ty, w, x))
        counts["relationship (inside)"] = total
    attached = _rows(s, f"SELECT a.kind, a.id, a.title, a.type, a.weight, substr(a.text, 1, 400) FROM {_M} "
                        "CROSS JOIN edge h ON h.workspace_id=:ws AND h.src=m.id AND h.kind='has_attribute' "
                        "CROSS JOIN node a ON a.id=h.dst ORDER BY a.weight DESC LIMIT :cap", **p)
    attached += _rows(s, f"SELECT n.kind, n.id, n.title, n.type, n.weight, substr(n.text, 1, 400) FROM {_BY_DST} "
                         "CROSS JOIN node n ON n.id=e.src WHERE e.workspace_id=:ws AND e.dst=:cid "
                         "AND e.kind NOT IN ('in_community', 'summarizes') ORDER BY n.weight DESC LIMIT :cap", **p)
    attached += _rows(s, f"SELECT o.kind, o.id, o.title, o.type, o.weight, substr(o.text, 1, 400) FROM {_BY_DST} "
                         "CROSS JOIN edge h ON h.workspace_id=:ws AND h.src=e.src AND h.kind='has_overview' "
                         "CROSS JOIN node o ON o.id=h.dst WHERE e.workspace_id=:ws AND e.dst=:cid "
                         "AND e.kind='derived_from' ORDER BY o.weight DESC LIMIT :cap", **p)
    for k, i, t, ty, w, x in attached:
        if k not in ("entity", "relationship", "chunk", "statement"):  # attributes, high-level elements, overviews
            members[k].append(Member(i, t, ty, w, x))
            counts[k] = counts.get(k, 0) + 1
    docs: list = []
    for src_kind in ("chunk", "statement"):  # chunks hold the mentions; statements when chunks link none
        docs = _rows(s, "SELECT x.document_id, count(*) AS mentions, count(DISTINCT e.dst) AS ms, count(*) OVER () "
                        f"FROM {_M} CROSS JOIN {_BY_DST} ON e.workspace_id=:ws AND e.dst=m.id AND e.kind='mentions' "
                        "CROSS JOIN node x ON x.id=e.src WHERE x.kind=:sk AND x.document_id IS NOT NULL "
                        "GROUP BY x.document_id ORDER BY mentions DESC, ms DESC, x.document_id LIMIT :nd",
                     sk=src_kind, nd=max_documents, **p)
        if docs:
            break
    return members, counts, docs


def _json(value) -> dict:
    import json

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


# drawn inside a tab, the frame may start hidden (zero size): fit the drawing again once it gets its size
def _draw(store, ws_id: int, det: CommunityDetail, cap: int) -> None:
    """The members' subgraph for the canvas component: the summary entity itself, then its most mentioned
    entities, capped; relationships drawn as entity—entity links, documents left out."""
    from core.explore.display import DisplayGraph, edges_between, materialize
    from core.explore.drawing import vis_payload

    ids = ([det.id] if det.kind == "summary" else [])
    ids += [m.id for k in ("summary entity", "entity") for m in det.members.get(k, [])]
    ids = list(dict.fromkeys(ids))[:cap]
    if not ids:
        return
    nodes = materialize(store, ws_id, ids)
    edges = edges_between(store, ws_id, {n.id for n in nodes}, collapse_relationships=True, collapse_chunks=False)
    det.graph = vis_payload(DisplayGraph(nodes=nodes, edges=edges), height=520)
    n_all = det.counts.get("entity", 0) + det.counts.get("summary entity", 0)
    if n_all > len(nodes):
        det.graph_note = f"Drawing the {len(nodes):,} most mentioned of {n_all:,} member entities."
