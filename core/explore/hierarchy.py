"""The hierarchy as pictures: sunburst / treemap / icicle frames of the community hierarchies (Leiden: GraphRAG
§2; HiRAG's communities on its layered graph: hirag.txt §4.1; NodeRAG's communities on its heterograph; attributed:
ArchRAG §3) and of HiRAG's summary layers (hirag.txt §4.1, key "hirag_layers"), a title search over them, a frame's
cache fingerprint, and `read_rows`, the raw SQL read both this module and core/explore/community_detail.py (one
community or summary entity in detail) use.

Pure reads, aggregated in SQL, so the app can cache them per build. A frame draws at most `max_sectors`
sectors: coarse levels first, the largest communities of each level next; the children left out of a parent are
drawn as one "N more" sector, so areas stay true. Values are computed bottom-up (a parent is never smaller than
its drawn children), so a child's share of its parent (core/explore/hierarchy_layout.py) never overflows it, even
when sizes do not add up (soft membership, a hierarchy still being written). Rows whose parent is not (yet) stored
hang from the synthetic root. The pictures themselves: ui/hierarchy_chart.py.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

from sqlalchemy import bindparam, text

from core.store import is_sqlite, without_hints
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

    def target(self, sector_id: str | None) -> str | None:
        return next((s.target for s in self.sectors if s.id == sector_id), None)

    def choices(self) -> list[Sector]:
        """Sectors that open a community (or summary entity), coarse levels first."""
        return [s for s in self.sectors if s.kind in ("community", "summary")]


def read_rows(session, sql: str, **params) -> list:
    """Rows of a raw SQL read; a list or tuple parameter binds as an `IN :name` list; index hints only on SQLite."""
    stmt = text(without_hints(session, sql)).bindparams(*(bindparam(k, expanding=True) for k, v in params.items()
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
        per_level = {int(lv): int(n) for lv, n in read_rows(
            s, "SELECT level, count(*) FROM community WHERE workspace_id=:ws AND method=:m GROUP BY level",
            ws=ws_id, m=method)}
        tops = read_rows(s, f"SELECT {cols} FROM community c LEFT JOIN community p ON p.id=c.parent_id "
                            "AND p.workspace_id=c.workspace_id AND p.method=c.method "
                            "WHERE c.workspace_id=:ws AND c.method=:m AND (p.id IS NULL OR c.parent_id=c.id)", ws=ws_id,
                         m=method)

        def children_of(parents: list[str]) -> list[Row]:
            out = []
            for i in range(0, len(parents), 5000):
                out += read_rows(s, f"SELECT {cols} FROM community c WHERE c.workspace_id=:ws AND c.method=:m "
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
        summaries = read_rows(s, "SELECT id, layer, title FROM node WHERE workspace_id=:ws AND kind='entity' "
                                 "AND layer>0", ws=ws_id)
        n_in = dict(read_rows(s, "SELECT dst, count(*) FROM edge INDEXED BY ix_edge_ws_kind WHERE workspace_id=:ws "
                                 "AND kind='summarizes' GROUP BY dst", ws=ws_id))
        upper = [i for i, lv, _ in summaries if lv > 1]  # summaries of summaries: their members are summaries
        links = [r for k in range(0, len(upper), 5000) for r in read_rows(
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
        op = "LIKE" if is_sqlite(s) else "ILIKE"  # SQLite's LIKE ignores ASCII case, PostgreSQL's does not
        if method == "hirag_layers":
            rows = read_rows(s, "SELECT id, layer, weight, title FROM node WHERE workspace_id=:ws AND kind='entity' "
                                f"AND layer>0 AND title {op} :q ORDER BY layer DESC, weight DESC LIMIT :n",
                             ws=ws_id, q=like, n=limit)
        else:
            rows = read_rows(s, "SELECT id, level, size, title FROM community WHERE workspace_id=:ws AND method=:m "
                                f"AND title {op} :q ORDER BY level, size DESC LIMIT :n", ws=ws_id, m=method, q=like,
                             n=limit)
    kind = "summary" if method == "hirag_layers" else "community"
    return [Sector(i, "", truncate(t or "", 32), t or "", int(lv), int(n or 0), kind, target=i) for i, lv, n, t in rows]


def frame_signature(store, ws_id: int, method: str) -> tuple:
    """A cheap fingerprint of what a frame would show (rows and titles per level): a cache key while a build
    writes the hierarchy level by level. Its first item says which workspace; `has_rows` tells whether there is
    anything to draw."""
    with store.session() as s:
        if method == "hirag_layers":
            rows = read_rows(s, "SELECT layer, count(*), sum(length(title)) FROM node WHERE workspace_id=:ws "
                                "AND kind='entity' AND layer>0 GROUP BY layer ORDER BY layer", ws=ws_id)
        else:
            rows = read_rows(s, "SELECT level, count(*), sum(size), sum(CASE WHEN title != '' THEN 1 ELSE 0 END) "
                                "FROM community WHERE workspace_id=:ws AND method=:m GROUP BY level ORDER BY level",
                             ws=ws_id, m=method)
        born = s.connection().execute(text("SELECT created_at FROM workspace WHERE id=:ws"), {"ws": ws_id}).scalar()
    return (str(born),) + tuple(tuple(r) for r in rows)  # a workspace made again under a freed id differs


def has_rows(signature: tuple) -> bool:
    """Whether a `frame_signature` saw any community (or summary layer) at all."""
    return len(signature) > 1


def where(method: str, s: Sector) -> str:
    """Where a sector sits, for a tooltip: the hierarchy (the root), its level or HiRAG layer, or "not drawn"."""
    if s.kind == "root":
        return f"{METHODS.get(method, method)}"
    if s.kind == "more":
        return "not drawn (cap)"
    if s.kind == "entities":
        return "HiRAG layer 0"
    return f"HiRAG layer {s.level}" if s.kind == "summary" else f"level {s.level}"
