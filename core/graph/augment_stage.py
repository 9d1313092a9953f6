"""The `augment` stage: NodeRAG graph augmentation and enrichment (noderag.txt §2.3-2.4, Appendix C.2-C.3).

Adds to the stored heterograph (Table 4 kinds: T chunk, S statement, N entity, R relationship):
* A `attribute` nodes: a summary of each important entity (k-core ∪ betweenness, core/graph/noderag.py) from its
  statements and relationships, linked entity -> attribute by `has_attribute`;
* H `high_level` nodes, one per finding of each Leiden community report at `community_level`, each with an
  O `overview` node (a keyword title, `has_overview`) and a `derived_from` edge to its community;
* `matches` edges high_level -> statement / attribute / high_level of the same K-means cluster and community;
* vectors for A and H (collections "attribute", "high_level"); T and S were embedded by the embed stage;
* `semantic` edges from the base layer of an HNSW graph over every T, S, A, H vector; a pair already linked by
  another edge has that edge's weight raised by 1 (marked `data.hnsw`) instead.

Resumable: attributes are written in batches and skipped once stored; high-level and overview nodes are synced to
the reports (new ones added, stale ones removed); the edges of the last step are replaced in one transaction.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import igraph as ig
import numpy as np
from sqlalchemy import delete, func, insert, literal_column, or_, update
from sqlalchemy import text as sql_text
from sqlmodel import select

from core.extract.text import STOPWORDS, truncate
from core.graph import noderag
from core.index.stage import embed_missing, node_text_for_embedding
from core.models import Community, Edge, Node
from core.store import content_id

EMBEDDED = ("chunk", "statement", "attribute", "high_level")  # NodeRAG's retrievable, vector-searched kinds
MAX_STATEMENTS = 20  # material of one attribute summary
MAX_RELATIONSHIPS = 20
_WORD = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9'\-]|[.,](?=\d))*")  # "1,000" and "2.5" stay whole


# ---------------------------------------------------------------------------------------------- the decomposed graph
class Decomposed:
    """Entities (layer 0), relationships and statements with their S-N, S-R and R-N edges, loaded once."""

    def __init__(self, store, ws_id: int):
        with store.session() as s:
            ents = s.exec(select(Node.id, Node.title, Node.weight).where(
                Node.workspace_id == ws_id, Node.kind == "entity", Node.layer == 0).order_by(Node.id)).all()
            rels = s.exec(select(Node.id, Node.title, Node.text, Node.weight).where(
                Node.workspace_id == ws_id, Node.kind == "relationship").order_by(Node.id)).all()
            stmts = s.exec(select(Node.id, Node.text).where(
                Node.workspace_id == ws_id, Node.kind == "statement").order_by(Node.id)).all()
            ends = s.exec(select(Edge.src, Edge.dst).where(
                Edge.workspace_id == ws_id, Edge.kind.in_(("subject", "object")))).all()
            mentions = s.exec(select(Edge.src, Edge.dst).where(
                Edge.workspace_id == ws_id, Edge.kind == "mentions")).all()
        self.entity = {i: (t, float(w or 0.0)) for i, t, w in ents}
        self.rel = {i: (t, x or "", float(w or 0.0)) for i, t, x, w in rels}
        self.stmt = {i: x or "" for i, x in stmts}
        self.ids = [e[0] for e in ents] + [r[0] for r in rels] + [s[0] for s in stmts]
        self.index = {nid: v for v, nid in enumerate(self.ids)}
        self.rels_of: dict[str, list[str]] = defaultdict(list)  # entity -> relationships
        self.ends_of: dict[str, list[str]] = defaultdict(list)  # relationship -> entities
        self.stmts_of: dict[str, list[str]] = defaultdict(list)  # entity -> statements
        self.ents_in: dict[str, set[str]] = defaultdict(set)  # statement -> entities
        edges: list[tuple[int, int]] = []
        for r, e in ends:
            if r in self.rel and e in self.entity:
                self.rels_of[e].append(r)
                self.ends_of[r].append(e)
                edges.append((self.index[r], self.index[e]))
        for src, dst in mentions:
            if src not in self.stmt:
                continue  # chunk -> entity mentions are not part of NodeRAG's decomposed graph
            if dst in self.entity:
                self.stmts_of[dst].append(src)
                self.ents_in[src].add(dst)
            elif dst not in self.rel:
                continue  # S-R mentions (added by the lexical stage) join the graph below
            edges.append((self.index[src], self.index[dst]))
        g = ig.Graph(n=len(self.ids), edges=edges)
        g.simplify()
        self.graph = g
        self.n_entities = len(ents)

    def importance(self, cfg) -> noderag.Importance:
        is_entity = np.zeros(len(self.ids), dtype=bool)
        is_entity[: self.n_entities] = True
        weight = np.array([self.entity[i][1] if v < self.n_entities else 0.0 for v, i in enumerate(self.ids)])
        return noderag.important_entities(self.graph, is_entity, weight, cfg.betweenness_samples, cfg.seed,
                                          cfg.max_attributes)

    def material(self, eid: str) -> list[str]:
        """Statements mentioning the entity (those naming more of its relationship partners first), then its
        relationships' descriptions (strongest first)."""
        rels = sorted(set(self.rels_of.get(eid, [])), key=lambda r: (-self.rel[r][2], self.rel[r][0], r))
        partners = {e for r in rels for e in self.ends_of.get(r, []) if e != eid}
        stmts = sorted(set(self.stmts_of.get(eid, [])),
                       key=lambda s: (-len(self.ents_in[s] & partners), len(self.stmt[s]), s))
        lines = [truncate(self.stmt[s], 300) for s in stmts[:MAX_STATEMENTS]]
        lines += [f"{self.rel[r][0]}: {truncate(self.rel[r][1], 300)}" if self.rel[r][1] else self.rel[r][0]
                  for r in rels[:MAX_RELATIONSHIPS]]
        return lines


def keyword_title(headline: str, max_words: int = 6) -> str:
    """A short keyword title from a headline: its first content words, original case kept."""
    seen: set[str] = set()
    out: list[str] = []
    for w in _WORD.findall(headline):
        low = w.lower()
        if low in STOPWORDS or len(w) < 2 or low in seen:
            continue
        seen.add(low)
        out.append(w)
        if len(out) == max_words:
            break
    return " ".join(out) or truncate(headline, 60)


def _node_row(ws_id: int, nid: str, kind: str, title: str, text: str, data: dict) -> dict:
    return {"id": nid, "workspace_id": ws_id, "kind": kind, "key": "", "title": title[:300], "text": text,
            "type": "", "layer": 0, "weight": 1.0, "document_id": None, "ord": None, "data": data}


def _edge_row(ws_id: int, src: str, dst: str, kind: str, weight: float = 1.0, data: dict | None = None) -> dict:
    return {"workspace_id": ws_id, "src": src, "dst": dst, "kind": kind, "weight": weight, "data": data or {}}


def _delete_nodes(s, ws_id: int, ids: list[str]) -> None:
    """Delete nodes and every edge touching them."""
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        s.exec(delete(Edge).where(Edge.workspace_id == ws_id, or_(Edge.src.in_(part), Edge.dst.in_(part))))
        s.exec(delete(Node).where(Node.workspace_id == ws_id, Node.id.in_(part)))


# ---------------------------------------------------------------------------------------------- the steps
def _attributes(ctx, dec: Decomposed, important: list[str]) -> Iterator[tuple[int, int]]:
    """Summarize each important entity once; drop attributes of entities no longer important."""
    store, ws_id = ctx.store, ctx.ws.id
    want = {content_id(str(ws_id), "attribute", e): e for e in important}
    with store.session() as s:
        have = set(s.exec(select(Node.id).where(Node.workspace_id == ws_id, Node.kind == "attribute")))
        stale = sorted(have - set(want))
        if stale:
            _delete_nodes(s, ws_id, stale)
            s.commit()
    ctx.index.delete("attribute", stale)
    todo = [(aid, e) for aid, e in want.items() if aid not in have]
    total = len(todo)
    workers = ctx.settings.backend.concurrency if ctx.backend.name == "ollama" else 1
    batch = max(32, workers * 4)

    def summarize(item: tuple[str, str]) -> tuple[str, str, object]:
        aid, eid = item
        return aid, eid, ctx.backend.summarize("attribute", dec.entity[eid][0], dec.material(eid))

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for off in range(0, total, batch):
            part = todo[off : off + batch]
            results = list(pool.map(summarize, part)) if workers > 1 else [summarize(t) for t in part]
            nodes = [_node_row(ws_id, aid, "attribute", dec.entity[eid][0], summ.summary,
                               {"entity_id": eid, "keywords": list(summ.keywords)[:10]}) for aid, eid, summ in results]
            edges = [_edge_row(ws_id, eid, aid, "has_attribute") for aid, eid, _ in results]
            with store.session() as s:
                conn = s.connection()
                conn.execute(insert(Node.__table__), nodes)
                conn.execute(insert(Edge.__table__), edges)
                s.commit()
            yield off + len(part), total
            if ctx.should_stop():
                return


def _high_level(ctx) -> tuple[int, int]:
    """Sync high-level element and overview nodes (and their edges) with the level's community reports."""
    ws_id, level = ctx.ws.id, ctx.settings.noderag.community_level
    with ctx.store.session() as s:
        comms = s.exec(select(Community).where(Community.workspace_id == ws_id, Community.method == "leiden",
                                                  Community.level == level).order_by(Community.id)).all()
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
            hid = content_id(str(ws_id), "high_level", c.id, str(k))
            want[hid] = _node_row(ws_id, hid, "high_level", head or truncate(text, 90), text,
                                  {"community_id": c.id, "finding": k, "importance": importance})
            oid = content_id(str(ws_id), "overview", hid)
            want[oid] = _node_row(ws_id, oid, "overview", overview, overview, {"high_level_id": hid,
                                                                               "community_id": c.id})
    with ctx.store.session() as s:
        have = {i: (t, x) for i, t, x in s.exec(select(Node.id, Node.title, Node.text).where(
            Node.workspace_id == ws_id, Node.kind.in_(("high_level", "overview"))))}
        have_high = set(s.exec(select(Node.id).where(Node.workspace_id == ws_id, Node.kind == "high_level")))
        stale = sorted(set(have) - set(want))
        _delete_nodes(s, ws_id, stale)
        new = [r for i, r in want.items() if i not in have]
        edges = []
        for r in new:
            if r["kind"] == "high_level":
                edges.append(_edge_row(ws_id, r["id"], content_id(str(ws_id), "overview", r["id"]), "has_overview"))
                edges.append(_edge_row(ws_id, r["id"], r["data"]["community_id"], "derived_from"))
        conn = s.connection()
        if new:
            conn.execute(insert(Node.__table__), new)
        if edges:
            conn.execute(insert(Edge.__table__), edges)
        for i, r in want.items():
            if i in have and have[i] != (r["title"], r["text"]):
                s.exec(update(Node).where(Node.id == i).values(title=r["title"], text=r["text"], data=r["data"]))
        s.commit()
    ctx.index.delete("high_level", [i for i in stale if i in have_high])
    return len(new), len(stale)


def _embed_rows(ctx, kind: str) -> list[tuple[str, str, dict]]:
    with ctx.store.session() as s:
        rows = s.exec(select(Node.id, Node.title, Node.text, Node.data).where(
            Node.workspace_id == ctx.ws.id, Node.kind == kind).order_by(Node.id)).all()
    key = "entity_id" if kind == "attribute" else "community_id"
    return [(i, node_text_for_embedding(kind, t, x), {key: (d or {}).get(key, "")}) for i, t, x, d in rows]


def _load_vectors(ctx) -> tuple[list[str], list[str], np.ndarray]:
    """(ids, kinds, unit vectors) of every node of the embedded kinds that has a vector, in a stable order."""
    ids: list[str] = []
    kinds: list[str] = []
    parts: list[np.ndarray] = []
    with ctx.store.session() as s:
        live = {k: set(s.exec(select(Node.id).where(Node.workspace_id == ctx.ws.id, Node.kind == k)))
                for k in EMBEDDED}
    for kind in EMBEDDED:
        got, vecs = ctx.index.all_vectors(kind)
        keep = sorted((i, v) for v, i in enumerate(got) if i in live[kind])
        if not keep:
            continue
        ids += [i for i, _ in keep]
        kinds += [kind] * len(keep)
        parts.append(vecs[[v for _, v in keep]])
    if not parts:
        return [], [], np.zeros((0, 0), dtype=np.float32)
    x = np.vstack(parts).astype(np.float32)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return ids, kinds, x


def _node_communities(ctx, dec: Decomposed, ids: list[str], kinds: list[str]) -> np.ndarray:
    """Level-`community_level` Leiden community (as an int, -1 for none) of each statement, attribute and
    high-level node: a statement's is the one holding most of the entities it mentions, an attribute's is its
    entity's, a high-level element's is its own."""
    ws_id, level = ctx.ws.id, ctx.settings.noderag.community_level
    with ctx.store.session() as s:
        cids = set(s.exec(select(Community.id).where(Community.workspace_id == ws_id, Community.method == "leiden",
                                                        Community.level == level)))
        member = {src: dst for src, dst in s.exec(select(Edge.src, Edge.dst).where(
            Edge.workspace_id == ws_id, Edge.kind == "in_community")) if dst in cids}
        data = dict(s.exec(select(Node.id, Node.data).where(
            Node.workspace_id == ws_id, Node.kind.in_(("attribute", "high_level")))).all())
    code = {c: k for k, c in enumerate(sorted(cids))}
    out = np.full(len(ids), -1, dtype=np.int64)
    for v, (nid, kind) in enumerate(zip(ids, kinds)):
        comm = None
        if kind == "statement":
            votes = Counter(member[e] for e in dec.ents_in.get(nid, ()) if e in member)
            if votes:
                comm = min(votes, key=lambda c: (-votes[c], c))
        elif kind == "attribute":
            comm = member.get((data.get(nid) or {}).get("entity_id", ""))
        elif kind == "high_level":
            comm = (data.get(nid) or {}).get("community_id")
        out[v] = code.get(comm, -1) if comm else -1
    return out


# Every edge between two nodes of the embedded kinds except this stage's own (matches, HNSW semantic edges), with
# its HNSW boost. Driven from the nodes (kind index) into the edge table's (workspace_id, src) prefix, so it reads
# the embedded nodes' edges instead of scanning every edge of the workspace.
_KINDS = ", ".join(f"'{k}'" for k in EMBEDDED)
_LINKED = sql_text(f"""
    SELECT e.id, e.src, e.dst, e.kind, json_extract(e.data, '$.hnsw')
    FROM {Node.__tablename__} AS a
    CROSS JOIN {Edge.__tablename__} AS e ON e.workspace_id = a.workspace_id AND e.src = a.id
    JOIN {Node.__tablename__} AS b ON b.id = e.dst
    WHERE a.workspace_id = :ws AND a.kind IN ({_KINDS}) AND b.kind IN ({_KINDS}) AND e.kind != 'matches'
      AND (e.kind != 'semantic' OR coalesce(json_extract(e.data, '$.by'), '') != 'hnsw')""")


def _delete_ids(s, ids: list[int]) -> None:
    for k in range(0, len(ids), 500):
        s.exec(delete(Edge).where(Edge.id.in_(ids[k : k + 500])))


def _write_edges(ctx, ids: list[str], matches: list[tuple[int, int]], pairs: np.ndarray,
                 scores: np.ndarray) -> tuple[int, int]:
    """Bring this stage's `matches` and `semantic` edges and HNSW weight boosts to the wanted state in one
    transaction, touching only the rows that differ (a re-run over an unchanged graph writes nothing)."""
    ws_id, n = ctx.ws.id, len(ids)
    index = {nid: v for v, nid in enumerate(ids)}
    by = func.coalesce(func.json_extract(Edge.data, "$.by"), "")
    hnsw = func.json_extract(Edge.data, "$.hnsw")
    with ctx.store.session() as s:
        old_sem = {(a, b): (eid, sc) for eid, a, b, sc in s.exec(
            select(Edge.id, Edge.src, Edge.dst, func.json_extract(Edge.data, "$.score")).where(
                Edge.workspace_id == ws_id, Edge.kind == "semantic", by == "hnsw"))}
        old_match = {(a, b): (eid, w) for eid, a, b, w in s.exec(select(Edge.id, Edge.src, Edge.dst, Edge.weight).where(
            Edge.workspace_id == ws_id, Edge.kind == "matches"))}
        linked = s.exec(_LINKED, params={"ws": ws_id}).all()
        old_boost = {eid for eid, _, _, _, boost in linked if boost is not None}
        # pair -> the one edge that takes the boost: any edge but this stage's own semantic ones
        owner: dict[tuple[int, int], tuple] = {}
        for eid, src, dst, _kind, _ in sorted(linked, key=lambda r: (r[3], r[0])):
            if src in index and dst in index:
                owner.setdefault(tuple(sorted((index[src], index[dst]))), ("db", eid))
        for h, j in matches:
            owner.setdefault(tuple(sorted((h, j))), ("matches", (h, j)))
        boosted = noderag.split_linked(pairs, np.array(list(owner), dtype=np.int64).reshape(-1, 2), n)
        boost_db, boost_match = set(), set()
        for i, j in pairs[boosted].tolist():
            where, ref = owner[(i, j)]
            (boost_db.add(ref) if where == "db" else boost_match.add(ref))
        want_match = {(ids[h], ids[j]): 2.0 if (h, j) in boost_match else 1.0 for h, j in matches}
        new = ~boosted
        want_sem = {(ids[i], ids[j]): round(float(sc), 4) for (i, j), sc in zip(pairs[new].tolist(), scores[new].tolist())}
        _delete_ids(s, [eid for k, (eid, sc) in old_sem.items() if k not in want_sem or sc != want_sem[k]])
        _delete_ids(s, [eid for k, (eid, w) in old_match.items() if want_match.get(k) != w])
        gone = sorted(old_boost - boost_db)
        for k in range(0, len(gone), 500):
            s.exec(update(Edge).where(Edge.id.in_(gone[k : k + 500])).values(
                weight=Edge.weight - hnsw, data=func.json_remove(Edge.data, "$.hnsw")))
        fresh = sorted(boost_db - old_boost)
        for k in range(0, len(fresh), 500):
            s.exec(update(Edge).where(Edge.id.in_(fresh[k : k + 500])).values(
                weight=Edge.weight + 1,
                data=func.json_set(func.coalesce(Edge.data, literal_column("'{}'")), "$.hnsw", 1)))
        rows = [_edge_row(ws_id, src, dst, "matches", w, {"hnsw": 1} if w > 1 else {})
                for (src, dst), w in want_match.items() if old_match.get((src, dst), (0, None))[1] != w]
        rows += [_edge_row(ws_id, src, dst, "semantic", 1.0, {"by": "hnsw", "score": sc})
                 for (src, dst), sc in want_sem.items() if old_sem.get((src, dst), (0, None))[1] != sc]
        conn = s.connection()
        for k in range(0, len(rows), 20_000):
            conn.execute(insert(Edge.__table__), rows[k : k + 20_000])
        s.commit()
    return len(want_sem), len(boost_db) + len(boost_match)


# ---------------------------------------------------------------------------------------------- the stage
def augment_stage(ctx) -> Iterator:
    from core.pipeline import Progress

    cfg = ctx.settings.noderag
    if not cfg.enabled:
        yield Progress(0, 0, "NodeRAG augmentation is turned off", {})
        return
    counts: dict = {}
    yield Progress(0, 0, "loading the decomposed graph", counts)
    dec = Decomposed(ctx.store, ctx.ws.id)
    imp = dec.importance(cfg)
    important = [dec.ids[v] for v in imp.selected]
    counts.update(important_entities=len(important), k_core_k=imp.k)
    yield Progress(0, 0, f"{len(important)} important entities (k-core k={imp.k}) of {dec.n_entities}", counts)
    for done, total in _attributes(ctx, dec, important):
        yield Progress(done, total, f"summarized {done}/{total} important entities", counts)
    if ctx.should_stop():
        return
    _high_level(ctx)
    for kind in ("attribute", "high_level"):
        rows = _embed_rows(ctx, kind)
        live = {r[0] for r in rows}
        ctx.index.delete(kind, [i for i in ctx.index.existing(kind) if i not in live])
        for done, total in embed_missing(ctx, kind, rows):
            yield Progress(done, total, f"embedded {done}/{total} {kind.replace('_', '-')} nodes", counts)
        if ctx.should_stop():
            return
    yield Progress(0, 0, "semantic matching within communities", counts)
    ids, kinds, x = _load_vectors(ctx)
    sah = [v for v, k in enumerate(kinds) if k != "chunk"]
    matches: list[tuple[int, int]] = []
    if sah:
        labels = noderag.kmeans_labels(x[sah], cfg.seed)
        comm = _node_communities(ctx, dec, [ids[v] for v in sah], [kinds[v] for v in sah])
        is_high = np.array([kinds[v] == "high_level" for v in sah], dtype=bool)
        matches = [(sah[h], sah[j]) for h, j in noderag.semantic_matches(labels, comm, is_high)]
    yield Progress(0, 0, f"HNSW over {len(ids)} vectors", counts)
    pairs = noderag.hnsw_base_pairs(x, cfg.hnsw_m, cfg.seed) if len(ids) > 1 else np.zeros((0, 2), dtype=np.int64)
    semantic, boosted = _write_edges(ctx, ids, matches, pairs, noderag.pair_scores(x, pairs))
    with ctx.store.session() as s:
        per_kind = dict(s.exec(select(Node.kind, func.count()).where(
            Node.workspace_id == ctx.ws.id, Node.kind.in_(("attribute", "high_level", "overview")))
            .group_by(Node.kind)).all())
    counts.update(nodes={k: int(per_kind.get(k, 0)) for k in ("attribute", "high_level", "overview")},
                  matches=len(matches), semantic_edges=semantic, boosted_edges=boosted)
    yield Progress(1, 1, f"{len(matches)} matches, {semantic} semantic edges, {boosted} edges boosted", counts)
