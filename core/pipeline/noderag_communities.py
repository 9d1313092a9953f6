"""NodeRAG's own communities and their high-level elements (noderag.txt §2.3 "Community detection based
aggregation", Appendix C.3), for the `augment` stage (core/pipeline/stages/augment.py).

* Communities: "We first apply the Leiden algorithm to G2" - the heterograph after attribute augmentation, i.e.
  entities (N, layer 0), relationships (R), semantic units (S = `statement`) and attributes (A) with the edges of
  §2.2-2.3 (S-N `mentions`, R-N `subject` / `object`, N-A `has_attribute`; `noderag.COMMUNITY_EDGES`), each of
  weight 1. Flat (one level, stored as level 0, `method = "noderag"`), seeded, modularity at
  `community_resolution` (the published code: leidenalg's modularity partition, resolution 1). A node every
  edge of this graph misses is a one-node "community" of Leiden's output, no aggregation: communities smaller
  than `min_community_size` are not stored. Every stored member (N, R, S, A) links to its community by
  `in_community`, so the communities partition the nodes they cover.
* High-level elements: "Within each community, an LLM is utilized to analyze the aggregated content, extracting
  high-level elements (H) ... [and] a keyword title ..., the high-level overview (O)". The content is the
  community's semantic units and attributes (the published code's `Community_summary.used_unit`), most linked
  first, within the prompt budget `MAX_MATERIAL`; the backend's community report over it is stored as the
  community's title / summary / report (the Hierarchy page shows it), and each of its findings becomes one H
  (`derived_from` its community) with one O (`has_overview`).

Resumable: community ids hash their members, so a rerun over an unchanged graph keeps every row and report;
reports are made only for new (or merge-staled) communities and those whose material changed (its hash is kept in
`data["material"]`), before any row is written.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import igraph as ig
import numpy as np
import regex
from sqlalchemy import bindparam, delete, or_, update
from sqlmodel import col, select

from core.algorithms import noderag
from core.ids import local_id, scope_by_id
from core.models import Community, Edge, Node, sql_table
from core.pipeline.community_rows import community_id, write_communities
from core.pipeline.context import BuildContext
from core.pipeline.tasks import report_one
from core.protocols import Report
from core.store import bulk_insert, content_id
from core.text import STOPWORDS, truncate

METHOD = "noderag"
MAX_MATERIAL = 60  # semantic units and attributes in one community prompt (the published code fills its token limit)


# ---------------------------------------------------------------------------------------------- rows
def node_row(ws_id: int, nid: str, kind: str, title: str, text: str, data: dict) -> dict:
    return {"id": nid, "workspace_id": ws_id, "kind": kind, "key": "", "title": title[:300], "text": text,
            "type": "", "layer": 0, "weight": 1.0, "document_id": None, "ord": None, "data": data}


def edge_row(ws_id: int, src: str, dst: str, kind: str, weight: float = 1.0, data: dict | None = None) -> dict:
    return {"workspace_id": ws_id, "src": src, "dst": dst, "kind": kind, "weight": weight, "data": data or {}}


def delete_nodes(s, ws_id: int, ids: list[str]) -> None:
    """Delete nodes and every edge touching them."""
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        s.exec(delete(Edge).where(col(Edge.workspace_id) == ws_id,
                                  or_(col(Edge.src).in_(part), col(Edge.dst).in_(part))))
        s.exec(delete(Node).where(col(Node.workspace_id) == ws_id, col(Node.id).in_(part)))


# a word of any script ("Zürich", "Αθήνα", a run of 東京タワー); "1,000" and "2.5" stay whole
_HEADLINE_WORD = regex.compile(r"[\p{L}\p{N}](?:[\p{L}\p{M}\p{N}'\-]|[.,](?=\d))*")


def keyword_title(headline: str, max_words: int = 6) -> str:
    """A short keyword title from a headline: its first content words, original case kept."""
    seen: set[str] = set()
    out: list[str] = []
    for w in _HEADLINE_WORD.findall(headline):
        low = w.lower()
        if low in STOPWORDS or len(w) < 2 or low in seen:
            continue
        seen.add(low)
        out.append(w)
        if len(out) == max_words:
            break
    return " ".join(out) or truncate(headline, 60)


# ---------------------------------------------------------------------------------------------- the partition
class HeteroPartition:
    """The graph Leiden partitions (module doc) and its communities of at least `min_size` nodes."""

    def __init__(self, store, ws_id: int, cfg):
        kinds = noderag.COMMUNITY_KINDS
        with store.session() as s:
            rows = s.exec(select(Node.id, Node.kind, Node.title, Node.text).where(
                Node.workspace_id == ws_id, col(Node.kind).in_(kinds),
                or_(col(Node.kind) != "entity", col(Node.layer) == 0)).order_by(Node.id)).all()
            edges = s.exec(select(Edge.src, Edge.dst, Edge.kind).where(
                Edge.workspace_id == ws_id, col(Edge.kind).in_({k for k, _, _ in noderag.COMMUNITY_EDGES}))
                .order_by(Edge.src, Edge.dst, Edge.kind)).all()  # canonical order: Leiden depends on edge order
        self.ids = [r[0] for r in rows]
        self.kind = [r[1] for r in rows]
        self.text = [(r[3] or r[2] or "") for r in rows]
        index = {nid: v for v, nid in enumerate(self.ids)}
        allowed = set(noderag.COMMUNITY_EDGES)
        pairs = [(index[a], index[b]) for a, b, k in edges
                 if a in index and b in index and (k, self.kind[index[a]], self.kind[index[b]]) in allowed]
        g = ig.Graph(n=len(self.ids), edges=pairs)
        g.simplify()  # unweighted: weight 1 per linked pair (§2.1)
        self.degree = np.asarray(g.degree(), dtype=np.int64)
        comms, self.modularity = noderag.leiden_communities(g, cfg.community_resolution, cfg.community_iterations,
                                                            cfg.seed)
        self.communities = [c for c in comms if len(c) >= max(1, cfg.min_community_size)]
        self.n_found = len(comms)
        scope = scope_by_id(store, ws_id)
        self.cids = [community_id(scope, METHOD, 0, [self.ids[v] for v in c]) for c in self.communities]

    def material(self, k: int) -> tuple[str, list[str]]:
        """(title hint, content lines) of community k: its semantic units and attributes, most linked first; the
        hint names its most linked entities."""
        members = sorted(self.communities[k], key=lambda v: (-self.degree[v], self.ids[v]))
        lines = [truncate(self.text[v], 400) for v in members if self.kind[v] in ("statement", "attribute")]
        names = [self.text[v] for v in members if self.kind[v] == "entity"][:3]
        return "; ".join(names), lines[:MAX_MATERIAL]


def communities(ctx: BuildContext, part: HeteroPartition) -> Iterator[tuple[int, int]]:
    """Store `part`'s communities as `noderag` rows with their reports; yields (done, total) reports."""
    store, ws_id = ctx.store, ctx.ws_id
    with store.session() as s:
        have = {cid: (summary, data) for cid, summary, data in s.exec(select(
            Community.id, Community.summary, Community.data).where(
            Community.workspace_id == ws_id, Community.method == METHOD))}
    made_from = [part.material(k) for k in range(len(part.cids))]  # (hint, lines) of each community, read once
    material = [content_id(hint, *lines) for hint, lines in made_from]
    # no report yet, a stale one, or one written from other material (documents added or deleted)
    todo = [k for k, cid in enumerate(part.cids)
            if cid not in have or not have[cid][0] or (have[cid][1] or {}).get("stale")
            or (have[cid][1] or {}).get("material") != material[k]]
    workers = ctx.settings.backend.parallel_calls if ctx.backend.name != "offline" else 1
    batch = max(32, workers * 4)
    reports: dict[str, Report] = {}

    # each community's report is a unit; one that failed after its retries is a failed unit (written by the next
    # build)
    asked = ctx.model_engine.map(report_one, (made_from[k] for k in todo), ctx.parts, window=workers)
    for off in range(0, len(todo), batch):
        chunk = todo[off : off + batch]
        for k in chunk:
            rep = ctx.failures.take(part.cids[k], next(asked), f"NodeRAG community report of {made_from[k][0]!r}")
            if rep is not None:
                reports[part.cids[k]] = rep
        yield off + len(chunk), len(todo)
        if ctx.should_stop():
            return
    rows, members_of = [], {}
    failed = {part.cids[k] for k in todo} - set(reports)  # their old material hash stays: the next build redoes them
    for k, cid in enumerate(part.cids):
        kinds: defaultdict[str, int] = defaultdict(int)
        for v in part.communities[k]:
            kinds[part.kind[v]] += 1
        made = {} if cid in failed else {"material": material[k]}
        rows.append(Community(id=cid, workspace_id=ws_id, method=METHOD, level=0, size=len(part.communities[k]),
                              data={"kinds": dict(sorted(kinds.items())),
                                    "modularity_level": round(part.modularity, 4)} | made))
        members_of[cid] = [part.ids[v] for v in part.communities[k]]
    write_communities(store, ws_id, rows, members_of, (METHOD,))
    with store.session() as s:  # a kept community whose member was deleted and made again (an attribute) lost its edge
        have_edges = {(a, b) for a, b in s.exec(select(Edge.src, Edge.dst).where(
            Edge.workspace_id == ws_id, Edge.kind == "in_community")).all() if b in members_of}
        missing = [edge_row(ws_id, m, cid, "in_community") for cid, ms in members_of.items() for m in ms
                   if (m, cid) not in have_edges]
        if missing:
            bulk_insert(s.connection(), sql_table(Edge), missing)
            s.commit()
    if reports:
        data = {r.id: r.data for r in rows}
        t = sql_table(Community)
        with store.session() as s:
            s.connection().execute(update(t).where(t.c.id == bindparam("_id")), [
                {"_id": cid, "title": rep.title[:300], "summary": rep.summary, "report": rep.model_dump(),
                 "data": data[cid]} for cid, rep in reports.items()])
            s.commit()


def high_level(ctx: BuildContext) -> tuple[int, int]:
    """Sync high-level element and overview nodes (and their edges) with the noderag communities' reports:
    (added, removed)."""
    ws_id = ctx.ws_id
    with ctx.store.session() as s:
        comms = s.exec(select(Community).where(Community.workspace_id == ws_id, Community.method == METHOD)
                       .order_by(Community.id)).all()
    want: dict[str, dict] = {}
    for c in comms:
        rep = c.report or {}
        elems = [(f.get("summary") or "", f.get("explanation") or f.get("summary") or "",
                  keyword_title(f.get("summary") or f.get("explanation") or ""), f.get("importance"))
                 for f in rep.get("findings") or [] if (f.get("summary") or f.get("explanation"))]
        if not elems and c.summary:
            elems = [(c.title or truncate(c.summary, 90), c.summary, c.title or keyword_title(c.summary),
                      rep.get("rating"))]
        for k, (head, text, overview, importance) in enumerate(elems):
            hid = ctx.ids.id("high_level", local_id(c.id), str(k))
            want[hid] = node_row(ws_id, hid, "high_level", head or truncate(text, 90), text,
                                 {"community_id": c.id, "finding": k, "importance": importance})
            oid = ctx.ids.id("overview", local_id(hid))
            want[oid] = node_row(ws_id, oid, "overview", overview, overview, {"high_level_id": hid,
                                                                             "community_id": c.id})
    with ctx.store.session() as s:
        have = {i: (t, x) for i, t, x in s.exec(select(Node.id, Node.title, Node.text).where(
            Node.workspace_id == ws_id, col(Node.kind).in_(("high_level", "overview"))))}
        have_high = set(s.exec(select(Node.id).where(Node.workspace_id == ws_id, Node.kind == "high_level")))
        stale = sorted(set(have) - set(want))
        delete_nodes(s, ws_id, stale)
        new = [r for i, r in want.items() if i not in have]
        edges = []
        for r in new:
            if r["kind"] == "high_level":
                edges.append(edge_row(ws_id, r["id"], ctx.ids.id("overview", local_id(r["id"])), "has_overview"))
                edges.append(edge_row(ws_id, r["id"], r["data"]["community_id"], "derived_from"))
        conn = s.connection()
        if new:
            bulk_insert(conn, sql_table(Node), new)
        if edges:
            bulk_insert(conn, sql_table(Edge), edges)
        for i, r in want.items():
            if i in have and have[i] != (r["title"], r["text"]):
                s.exec(update(Node).where(col(Node.id) == i).values(title=r["title"], text=r["text"], data=r["data"]))
        s.commit()
    ctx.index.delete("high_level", [i for i in stale if i in have_high])
    return len(new), len(stale)


def node_communities(ctx: BuildContext, ids: list[str], kinds: list[str]) -> np.ndarray:
    """The noderag community (as an int code, -1 for none) of each semantic unit, attribute and high-level node:
    the one it is a member of (a high-level element: the one it was made for)."""
    ws_id = ctx.ws_id
    with ctx.store.session() as s:
        cids = sorted(s.exec(select(Community.id).where(Community.workspace_id == ws_id,
                                                         Community.method == METHOD)))
        code = {c: k for k, c in enumerate(cids)}
        member = {src: dst for src, dst in s.exec(select(Edge.src, Edge.dst).where(
            Edge.workspace_id == ws_id, Edge.kind == "in_community")) if dst in code}
        data = dict(s.exec(select(Node.id, Node.data).where(Node.workspace_id == ws_id,
                                                            Node.kind == "high_level")).all())
    out = np.full(len(ids), -1, dtype=np.int64)
    for v, (nid, kind) in enumerate(zip(ids, kinds)):
        comm = (data.get(nid) or {}).get("community_id") if kind == "high_level" else member.get(nid)
        out[v] = code.get(comm, -1) if comm else -1
    return out
