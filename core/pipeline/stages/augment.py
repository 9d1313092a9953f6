"""The `augment` stage: NodeRAG graph augmentation and enrichment (noderag.txt §2.3-2.4, Appendix C.2-C.3).

Adds to the stored heterograph (Table 4 kinds: T chunk, S statement, N entity, R relationship):
* A `attribute` nodes: a summary of each important entity (k-core ∪ betweenness over the S-N / R-N graph of §2.2,
  core/algorithms/noderag.py) from its statements and relationships, linked entity -> attribute by `has_attribute`;
* NodeRAG's own communities: Leiden over the heterograph after attribute augmentation (N, R, S, A), stored as
  `noderag` Community rows with `in_community` edges and a report each (core/pipeline/noderag_communities.py);
* H `high_level` nodes, one per finding of each noderag community's report, each with an O `overview` node (a
  keyword title, `has_overview`) and a `derived_from` edge to its community;
* `matches` edges high_level -> statement / attribute / high_level of the same K-means cluster and community
  (one cluster for all when K-means would average 39 nodes or fewer per cluster, `hcluster_size`);
* vectors for A and H (collections "attribute", "high_level"); T and S were embedded by the embed stage;
* `semantic` edges from the base layer of an HNSW graph over every T, S, A, H vector; a pair already linked by
  a heterograph edge has that edge's weight raised by 1 (marked `data.hnsw`) instead (core/pipeline/noderag_edges.py).

An attribute or a community report whose call still fails after its retries is a failed unit
(core/pipeline/failures.py): it is not written, so the next build makes it. The stage goes on without it: the
communities are found over the heterograph as it stands (the next build, with the attribute, finds them again and
keeps the unchanged ones with their reports), and a community without its report has no high-level element yet.

Resumable: attributes are written in batches and skipped once stored from the same material (a hash in `data`); communities keep their rows and reports
while their members are unchanged; high-level and overview nodes are synced to the reports (new ones added, stale
ones removed); the edges of the last step are replaced in one transaction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import igraph as ig
import numpy as np
from sqlalchemy import func
from sqlmodel import col, select

from core.algorithms import noderag
from core.ids import local_id
from core.index.embedding import embed_missing
from core.models import Edge, Node, sql_table
from core.pipeline.beside import Beside, embedded_beside
from core.pipeline.context import BuildContext, Progress
from core.pipeline.noderag_communities import (
    HeteroPartition,
    communities,
    delete_nodes,
    edge_row,
    high_level,
    keyword_title,
    node_communities,
    node_row,
)
from core.pipeline.noderag_edges import EMBEDDED, embed_rows, load_vectors, write_edges
from core.pipeline.stages.index import report_rows
from core.pipeline.tasks import summarize_one
from core.store import bulk_insert, content_id
from core.text import truncate

__all__ = ["EMBEDDED", "Decomposed", "augment_stage", "keyword_title"]
MAX_STATEMENTS = 20  # material of one attribute summary
MAX_RELATIONSHIPS = 20


# ---------------------------------------------------------------------------------------------- the decomposed graph
class Decomposed:
    """Entities (layer 0), relationships and statements with their S-N and R-N edges (§2.2), loaded once."""

    def __init__(self, store, ws_id: int):
        with store.session() as s:
            ents = s.exec(select(Node.id, Node.title, Node.weight).where(
                Node.workspace_id == ws_id, Node.kind == "entity", Node.layer == 0).order_by(Node.id)).all()
            rels = s.exec(select(Node.id, Node.title, Node.text, Node.weight).where(
                Node.workspace_id == ws_id, Node.kind == "relationship").order_by(Node.id)).all()
            stmts = s.exec(select(Node.id, Node.text).where(
                Node.workspace_id == ws_id, Node.kind == "statement").order_by(Node.id)).all()
            ends = s.exec(select(Edge.src, Edge.dst).where(  # edges in a canonical order, not insertion order
                Edge.workspace_id == ws_id, col(Edge.kind).in_(("subject", "object"))).order_by(Edge.src, Edge.dst)).all()
            mentions = s.exec(select(Edge.src, Edge.dst).where(
                Edge.workspace_id == ws_id, Edge.kind == "mentions").order_by(Edge.src, Edge.dst)).all()
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
            if dst not in self.entity:
                continue  # S-R mentions (the HLG lexical stage's) are not NodeRAG's E_{S,N,R} either
            self.stmts_of[dst].append(src)
            self.ents_in[src].add(dst)
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


# ---------------------------------------------------------------------------------------------- the steps
def _attributes(ctx: BuildContext, dec: Decomposed, important: list[str]) -> Iterator[tuple[int, int]]:
    """Summarize each important entity once; drop attributes of entities no longer important."""
    store, ws_id = ctx.store, ctx.ws_id
    want = {ctx.ids.id("attribute", local_id(e)): e for e in important}
    material = {aid: content_id(dec.entity[e][0], *dec.material(e)) for aid, e in want.items()}
    with store.session() as s:
        have = {i: (d or {}).get("material") for i, d in s.exec(select(Node.id, Node.data).where(
            Node.workspace_id == ws_id, Node.kind == "attribute"))}
        gone = sorted(set(have) - set(want))
        # an attribute summarized from other material (its entity's statements or relationships changed: documents
        # added or deleted) is made again; one from the same material is kept
        redo = sorted(aid for aid in set(have) & set(want) if have[aid] != material[aid])
        if gone or redo:
            delete_nodes(s, ws_id, gone + redo)
            s.commit()
    ctx.index.delete("attribute", gone)
    todo = [(aid, e) for aid, e in want.items() if aid not in have or aid in redo]
    total = len(todo)
    workers = ctx.settings.backend.parallel_calls if ctx.backend.name != "offline" else 1
    batch = max(32, workers * 4)

    # each entity's attribute is a unit; one whose model call failed after its retries is a failed unit (made by
    # the next build)
    asked = ctx.model_engine.map(summarize_one, (("attribute", dec.entity[e][0], dec.material(e)) for _, e in todo),
                           ctx.parts, window=workers)
    for off in range(0, total, batch):
        part = todo[off : off + batch]
        got = [(aid, eid, ctx.failures.take(aid, next(asked), f"attribute of {dec.entity[eid][0]!r}"))
               for aid, eid in part]
        results = [(aid, eid, summ) for aid, eid, summ in got if summ is not None]  # failed: made next build
        nodes = [node_row(ws_id, aid, "attribute", dec.entity[eid][0], summ.summary,
                           {"entity_id": eid, "keywords": list(summ.keywords)[:10], "material": material[aid]})
                 for aid, eid, summ in results]
        edges = [edge_row(ws_id, eid, aid, "has_attribute") for aid, eid, _ in results]
        if nodes:
            with store.session() as s:
                conn = s.connection()
                bulk_insert(conn, sql_table(Node), nodes)
                bulk_insert(conn, sql_table(Edge), edges)
                s.commit()
        yield off + len(part), total
        if ctx.should_stop():
            return


# ---------------------------------------------------------------------------------------------- the stage
def augment_stage(ctx: BuildContext) -> Iterator[Progress]:
    # the index stage's reports, on the core this stage leaves idle (held while it embeds on both itself)
    with embedded_beside(ctx, ("community", report_rows)) as beside:
        yield from _augment(ctx, beside)


def _augment(ctx: BuildContext, beside: Beside) -> Iterator[Progress]:
    cfg = ctx.settings.noderag
    if not cfg.enabled:
        yield Progress(0, 0, "NodeRAG augmentation is turned off", {})
        return
    counts: dict = {}
    yield Progress(0, 0, "loading the decomposed graph", counts)
    dec = Decomposed(ctx.store, ctx.ws_id)
    imp = dec.importance(cfg)
    important = [dec.ids[v] for v in imp.selected]
    counts.update(important_entities=len(important), k_core_k=imp.k)
    yield Progress(0, 0, f"{len(important)} important entities (k-core k={imp.k}) of {dec.n_entities}", counts)
    for done, total in _attributes(ctx, dec, important):
        yield Progress(done, total, f"summarized {done}/{total} important entities", counts)
    if ctx.should_stop():
        return
    yield Progress(0, 0, "Leiden communities of the heterograph", counts)
    part = HeteroPartition(ctx.store, ctx.ws_id, cfg)
    counts.update(communities=len(part.communities), community_modularity=round(part.modularity, 4))
    for done, total in communities(ctx, part):
        yield Progress(done, total, f"summarized {done}/{total} of {len(part.communities)} communities", counts)
    if ctx.should_stop():
        return
    del part
    high_level(ctx)
    for kind in ("attribute", "high_level"):
        rows = embed_rows(ctx, kind)
        live = {r[0] for r in rows}
        ctx.index.delete(kind, [i for i in ctx.index.existing(kind) if i not in live])
        with beside.paused():
            for done, total in embed_missing(ctx.index, ctx.embedder, kind, rows, ctx.settings.embed.batch_size,
                                             ctx.should_stop):
                yield Progress(done, total, f"embedded {done}/{total} {kind.replace('_', '-')} nodes", counts)
        if ctx.should_stop():
            return
    yield Progress(0, 0, "semantic matching within communities", counts)
    ids, kinds, x = load_vectors(ctx)
    # the HNSW graph (one thread, a global step taken whole): on a cluster a worker builds it while this process
    # finds the matches
    graph = ctx.engine.submit(noderag.hnsw_base_pairs, x, cfg.hnsw_m, cfg.seed, cfg.hnsw_ef, cpu=True) \
        if len(ids) > 1 else None
    sah = [v for v, k in enumerate(kinds) if k != "chunk"]
    matches: list[tuple[int, int]] = []
    if sah:
        # the rows themselves, not a copy, when they are one run (chunks load first): this is the stage's peak
        block = x[sah[0]:sah[-1] + 1] if sah[-1] - sah[0] + 1 == len(sah) else x[sah]
        labels = noderag.matching_labels(block, cfg.seed, cfg.hcluster_size)
        del block
        comm = node_communities(ctx, [ids[v] for v in sah], [kinds[v] for v in sah])
        is_high = np.array([kinds[v] == "high_level" for v in sah], dtype=bool)
        matches = [(sah[h], sah[j]) for h, j in noderag.semantic_matches(labels, comm, is_high)]
    yield Progress(0, 0, f"HNSW over {len(ids)} vectors", counts)
    pairs = graph.result() if graph is not None else np.zeros((0, 2), dtype=np.int64)
    semantic, boosted = write_edges(ctx, ids, matches, pairs, noderag.pair_scores(x, pairs))
    with ctx.store.session() as s:
        per_kind = dict(s.exec(select(Node.kind, func.count()).where(
            Node.workspace_id == ctx.ws_id, col(Node.kind).in_(("attribute", "high_level", "overview")))
            .group_by(Node.kind)).all())
    counts.update(nodes={k: int(per_kind.get(k, 0)) for k in ("attribute", "high_level", "overview")},
                  matches=len(matches), semantic_edges=semantic, boosted_edges=boosted)
    yield Progress(1, 1, f"{len(matches)} matches, {semantic} semantic edges, {boosted} edges boosted", counts)
