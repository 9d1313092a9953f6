"""NodeRAG graph searching (noderag.txt §2.5 "Graph Searching", Appendix C.4 "Dual Search" and "Shallow PPR").

Node kinds (Table 4): T text = `chunk`, S semantic unit = `statement`, N entity = `entity` (layer 0), R
relationship = `relationship`, A attribute = `attribute`, H high-level element = `high_level`, O high-level
overview = `overview`. T, S, A, H are retrievable and embedded; N and O are names / titles, entry points only;
R is a connector, retrievable but never an entry point.

1. Dual search. Exact matching: entity names and overview titles that occur as whole words in the question
   (`res.names.find`). The paper has an LLM extract the question's entities and matches them at word level; the
   offline stand-in keeps the stored names found in the question except those made only of stop words ("a")
   and, with `proper_names_only` (default), those written in lower case in the question ("season", "actor"),
   which an entity extraction would not return. Vector search: the `entry_k` nodes nearest to the question
   among the retrievable embedded kinds (collections chunk, statement, attribute, high_level), taken over the
   four together as the paper's single HNSW does (`joint_entries`; off = `entry_k` per kind).
2. Shallow PPR (core/algorithms/ppr.py: the published code's update p <- alpha·Pᵀp + (1 − alpha)·p, alpha = 0.5,
   2 iterations; the ablation `noderag-teleport` runs p <- alpha·e + (1 − alpha)·Pᵀp without the degree cap, as
   Strata did before issue 37) personalized on the entry points
   (weight 1 for a vector entry, `exact_weight` for an exact match: the published code's `similarity_weight` /
   `accuracy_weight`, both 1) over NodeRAG's heterograph edges only (`core.algorithms.noderag.HETEROGRAPH_EDGES`):
   S-N `mentions`, R-N `subject` / `object` (§2.2), N-A `has_attribute`, H-S/A/H `matches`, H-O `has_overview`
   (§2.3), S-T `derived_from` (§2.4 text insertion) and the HNSW `semantic` edges (§2.4), each of weight 1 (§2.1)
   plus 1 where an HNSW edge fell on it (§2.4). Everything else stored in the graph is not walked (HiRAG
   `summarizes`, HLG `in_topic`, chunk `next`, ...). Options, off by default, add links NodeRAG does not define:
   `chunk_entity_links` (a chunk's `mentions` of an entity; T links to S only in the paper);
   `relationship_chunk_links` (a relationship's `derived_from` chunk);
   `statement_relationship_links` (the HLG lexical stage's statement -> relationship `mentions`).
   `degree_cap` applies the published code's `unbalance_adjust` (each link weight capped at 1/degree of both
   ends), on by default as in its Node_config.yaml (`unbalance_adjust: True`); the paper does not describe it.
3. Cross nodes and filtering (§2.5, Appendix C.4: "the top-k nodes with the highest PPR scores for each type are
   selected as cross nodes"): going down the PPR ranking (vector entries excluded, zero scores never taken), the
   top `cross_nodes` of EACH retrievable type (T, S, A and H, each its own top k) are cross nodes
   (`cross_per_kind`; off = the published code's `post_process_top_k`, which takes `cross_nodes` over T, S, A, H
   together); the top `top_entity` entities are not returned but their attributes are; the top
   `top_high_level` overviews are not returned but their high-level elements are; the top `top_relationship`
   relationships are returned. The retrieval is the vector entries plus all of these.

Sections: local = detail, the chunks, statements and attributes found by vector search and the attributes of
the top entities; bridge = connection, the relationships and the T / S / A cross nodes the walk reached;
global = overview, every high-level element (entry, cross node or reached through its overview title).
Each item's score is its PPR score (an attribute or element reached through its entity or overview takes the
larger of the two). The paper ranks no documents; sources here are the documents of the chunks behind the
returned nodes (a chunk itself, a statement's or relationship's chunks, an attribute's entity's chunks, a
high-level element's `matches` neighbours' chunks or else its community members' chunks), each node's PPR score
split evenly over its chunks, summed per document.

Path: entry points (role entry), cross nodes (cross), the entities / overview titles that led to returned
attributes / elements (key), those and the relationships (result); each non-entry node with one stored, walked
edge to a node already on the path (an entry first, else the best PPR score) when it has one.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import scipy.sparse as sp

from core.algorithms.noderag import HETEROGRAPH_EDGES
from core.algorithms.ppr import personalization_vector, personalized_pagerank, top_by_kind
from core.graph.hetero import EdgeList
from core.retrieval.base import (
    ContextItem,
    PathEdge,
    PathStep,
    Resources,
    Retrieval,
    RetrievalLLM,
    Timer,
    register,
    sources_from_chunks,
)
from core.retrieval.cache import CacheKey
from core.text import STOPWORDS

RETRIEVABLE = ("chunk", "statement", "attribute", "high_level")  # T, S, A, H: embedded, entry and cross nodes
SECTION_OF = {"chunk": "local", "statement": "local", "attribute": "local", "relationship": "bridge",
              "high_level": "global"}
EDGES: CacheKey[EdgeList] = CacheKey("noderag.edges")  # every stored edge, for the walks (core/retrieval/cache.py)
WALK: CacheKey[Walk] = CacheKey("noderag.walk")  # the walked graph, per walk settings


def question_names(res: Resources, question: str, proper_only: bool) -> list[tuple[str, list[str]]]:
    """The stored names (entity names, overview titles) the question contains, standing in offline for the
    paper's LLM extraction of the question's entities (asked with Ollama, the model's `query_terms` entities are
    looked up whole instead): names made only of stop words are dropped and, with `proper_only`,
    names whose occurrence in the question starts in lower case (common nouns such as "season" or "actor")."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", question) if not unicodedata.combining(c))
    out = []
    for name, ids in res.names.find(question):
        toks = name.split()
        if all(tok in STOPWORDS for tok in toks):
            continue
        if proper_only:
            m = re.search(r"\b" + r"(?:'s)?\W+".join(map(re.escape, toks)) + r"\b", folded, flags=re.IGNORECASE)
            if m is not None and not (m.group(0)[0].isupper() or m.group(0)[0].isdigit()):
                continue
        out.append((name, ids))
    return out


def walked_edges(cfg) -> frozenset[tuple[str, str, str]]:
    """The (edge kind, source kind, target kind) triples the walk follows: NodeRAG's heterograph edges
    (`noderag.HETEROGRAPH_EDGES`), plus those the named options add (module doc)."""
    out = set(HETEROGRAPH_EDGES)
    if cfg.chunk_entity_links:
        out.add(("mentions", "chunk", "entity"))
    if cfg.relationship_chunk_links:
        out.add(("derived_from", "relationship", "chunk"))
    if cfg.statement_relationship_links:
        out.add(("mentions", "statement", "relationship"))
    return frozenset(out)


class Walk:
    """The heterograph as NodeRAG walks it: code tables and the weighted adjacency of the walked edges only.

    Each walked edge weighs 1, plus 1 where an HNSW semantic edge fell on it (§2.1, §2.4). A pair joined by several
    walked edges sums them; `link_kind` (aligned with `adj.data`) is the kind of its first walked edge."""

    def __init__(self, h, edges: EdgeList, allowed=HETEROGRAPH_EDGES, degree_cap: bool = False):
        self.h = h
        self.code = {k: i for i, k in enumerate(h.kind_names)}
        self.ecode = {k: i for i, k in enumerate(h.edge_kind_names)}
        nk = max(len(h.kind_names), 1)
        want = [(self.ecode[e] * nk + self.code[a]) * nk + self.code[b] for e, a, b in allowed
                if e in self.ecode and a in self.code and b in self.code]
        key = (edges.kind.astype(np.int64) * nk + h.kinds[edges.src]) * nk + h.kinds[edges.dst]
        keep = np.isin(key, want) & (edges.kind >= 0)
        weight = 1.0 + edges.hnsw
        self.edge_kinds = sorted({h.edge_kind_names[k] for k in np.unique(edges.kind[keep])})
        src, dst, w, ek = edges.src[keep], edges.dst[keep], weight[keep], edges.kind[keep]
        n = len(h.ids)
        r, c = np.concatenate([src, dst]), np.concatenate([dst, src])
        uniq, first, inverse = np.unique(r * max(n, 1) + c, return_index=True, return_inverse=True)
        data = np.bincount(inverse, weights=np.concatenate([w, w]), minlength=len(uniq)) if len(uniq) else np.zeros(0)
        rr, cc = uniq // max(n, 1), uniq % max(n, 1)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(indptr, rr + 1, 1)
        indptr = np.cumsum(indptr)
        if degree_cap and len(data):
            deg = np.diff(indptr).astype(np.float64)
            data = np.minimum(data, 1.0 / np.maximum(np.maximum(deg[rr], deg[cc]), 1.0))
        self.adj = sp.csr_matrix((data, cc.astype(np.int64), indptr), shape=(n, n))
        self.link_kind = np.concatenate([ek, ek])[first]

    def kind_of(self, u: int, v: int) -> str | None:
        """The kind of the walked edge joining vertices u and v, None when they are not joined by one."""
        lo, hi = self.adj.indptr[u], self.adj.indptr[u + 1]
        pos = lo + np.searchsorted(self.adj.indices[lo:hi], v)
        if pos < hi and self.adj.indices[pos] == v:
            return self.h.edge_kind_names[self.link_kind[pos]]
        return None

    def kind(self, v: int) -> str:
        return self.h.kind_names[self.h.kinds[v]]

    def neighbours(self, v: int, link_kinds: tuple[str, ...], node_kinds: tuple[str, ...]) -> np.ndarray:
        """Vertices linked to v by a stored edge of one of `link_kinds`, of one of `node_kinds`."""
        lo, hi = self.h.adj.indptr[v], self.h.adj.indptr[v + 1]
        nb = self.h.adj.indices[lo:hi]
        ok = np.isin(self.h.link_kind[lo:hi], [self.ecode[k] for k in link_kinds if k in self.ecode])
        ok &= np.isin(self.h.kinds[nb], [self.code[k] for k in node_kinds if k in self.code])
        return nb[ok]

    def link_to(self, v: int, targets: np.ndarray, rank: np.ndarray) -> int | None:
        """The walked neighbour of v among `targets` (a vertex mask) with the highest `rank`, if any."""
        lo, hi = self.adj.indptr[v], self.adj.indptr[v + 1]
        nb = self.adj.indices[lo:hi]
        ok = targets[nb] & (self.adj.data[lo:hi] > 0)
        if not ok.any():
            return None
        cand = nb[ok]
        return int(cand[np.lexsort((cand, -rank[cand]))[0]])


@register
class NodeRAGStrategy:
    name = "noderag"
    label = "NodeRAG (dual search + shallow PPR)"
    description = (
        "local: chunks, semantic units and attributes found by vector search, and the attributes of the entities "
        "the walk ranks highest; bridge: relationships and cross nodes (chunks, semantic units, attributes) that a "
        "shallow personalized PageRank from the entry points reaches; global: high-level elements of communities, "
        "found by vector search, as cross nodes or through overview titles named in the question."
    )
    teleport = False  # the ablation noderag-teleport: the teleport update, no degree cap (Strata before issue 37)

    @staticmethod
    def walk(res: Resources, teleport: bool = False) -> Walk:
        """The walked graph, built once per Resources (i.e. per workspace build) and walk settings (`teleport`:
        the ablation's, without the degree cap)."""
        cfg = res.settings.retrieval.noderag
        allowed = walked_edges(cfg)
        cap = cfg.degree_cap and not teleport

        def build() -> Walk:
            edges = res.cached(EDGES, lambda: EdgeList.load(res.store, res.ws_id, res.hetero))
            return Walk(res.hetero, edges, allowed, cap)

        return res.cached(WALK, build, variant=(allowed, cap))

    def retrieve(self, res: Resources, question: str, llm: RetrievalLLM | None = None) -> Retrieval:
        cfg = res.settings.retrieval.noderag
        r = Retrieval(self.name, question)
        t = Timer(r.trace)
        w = self.walk(res, self.teleport)
        h = w.h
        view = res.view
        t.lap("load_graph")

        # 1. dual search
        q = res.embed_query(question)
        t.lap("embed_query")
        hits = []
        for kind in RETRIEVABLE:
            hits += [(x.score, x.id) for x in res.nearest(kind, q, cfg.entry_k) if x.id in h.index]
        hits.sort(key=lambda sh: (-sh[0], sh[1]))
        if cfg.joint_entries:
            hits = hits[: cfg.entry_k]
        vec_entries = list(dict.fromkeys(i for _, i in hits))
        t.lap("vector_search")
        exact: list[str] = []
        named = (res.names.lookup(llm.query_terms(question).entities) if llm is not None
                 else question_names(res, question, cfg.proper_names_only))
        for _name, ids in named:
            exact += [i for i in ids if i in h.index and i not in exact]
        t.lap("exact_search")
        entries = list(dict.fromkeys(vec_entries + exact))
        vec_set = set(vec_entries)
        weights = {h.index[i]: (1.0 if i in vec_set else cfg.exact_weight) for i in entries}
        if not any(wt > 0 for wt in weights.values()):
            r.trace["counts"] = {"entries": 0, "sources": 0}
            return r

        # 2. shallow PPR from the entry points
        n = len(h.ids)
        e = personalization_vector(n, weights)
        update = "teleport" if self.teleport else cfg.ppr_update
        p = personalized_pagerank(w.adj, e, alpha=cfg.alpha, iterations=cfg.iterations, dangling="uniform",
                                  update=update)
        t.lap("ppr")

        # 3. cross nodes, per-kind tops, filtering to retrievable nodes
        is_vec_entry = np.zeros(n, dtype=bool)
        is_vec_entry[[h.index[i] for i in vec_entries]] = True
        if cfg.cross_per_kind:  # §2.5: the top k of each type
            ranked = [self._top(p, w, kind, cfg.cross_nodes, is_vec_entry) for kind in RETRIEVABLE]
            cross = np.concatenate(ranked) if ranked else np.zeros(0, dtype=np.int64)
            cross = cross[np.lexsort((cross, -p[cross]))]  # best first, as one ranking
        else:  # the published code: T, S, A, H together
            retrievable = np.isin(h.kinds, [w.code[k] for k in RETRIEVABLE if k in w.code]).astype(np.int8)
            cross = top_by_kind(p, retrievable, 1, cfg.cross_nodes, exclude=is_vec_entry)
        top_ent = self._top(p, w, "entity", cfg.top_entity, is_vec_entry)
        top_rel = self._top(p, w, "relationship", cfg.top_relationship, is_vec_entry)
        top_ov = self._top(p, w, "overview", cfg.top_high_level, is_vec_entry)

        score: dict[int, float] = {}
        via: dict[int, int] = {}  # attribute / high-level element -> the entity / overview that led to it
        for v in [h.index[i] for i in vec_entries] + list(cross) + list(top_rel):
            score.setdefault(int(v), float(p[v]))
        for lead, link, kind in [(top_ent, "has_attribute", "attribute"), (top_ov, "has_overview", "high_level")]:
            for v in lead:
                for a in w.neighbours(int(v), (link,), (kind,)):
                    a = int(a)
                    s = max(float(p[a]), float(p[v]))
                    if s > score.get(a, -1.0):
                        score[a] = s
                        via.setdefault(a, int(v))
        t.lap("select")

        # sections and sources
        leads = list(dict.fromkeys(via.values()))
        nodes = res.store.nodes_by_id(res.ws_id, [h.ids[v] for v in list(score) + leads] + exact)
        chunks_of = {v: self._chunks(w, view, v, (nodes[h.ids[v]].data or {}).get("community_id")
                                     if h.ids[v] in nodes else None) for v in score}
        for v, s in sorted(score.items(), key=lambda kv: (-kv[1], kv[0])):
            nid, kind = h.ids[v], w.kind(v)
            node = nodes.get(nid)
            if node is None:
                continue
            cs = chunks_of[v]
            docs = view.documents_of(cs)
            section = SECTION_OF[kind]
            if section == "local" and nid not in vec_set and v not in via:
                section = "bridge"  # a T / S / A cross node: reached through the walk
            r.sections[section].append(ContextItem(nid, kind, node.title, node.text, round(s, 6),
                                                   level=None, documents=docs))
        r.sources = sources_from_chunks(view, self.rank_chunks(score, chunks_of), res.settings.retrieval.max_sources)
        t.lap("rank_sources")

        self._path(r, w, p, vec_entries, exact, cross, via, top_rel, nodes)
        t.lap("path")
        r.trace["ppr"] = {"update": update, "degree_cap": bool(cfg.degree_cap and not self.teleport)}
        r.trace["counts"] = {
            "vector_entries": len(vec_entries), "exact_entries": len(exact), "cross_nodes": len(cross),
            "entities": len(top_ent), "relationships": len(top_rel), "overviews": len(top_ov),
            **{s: len(r.sections[s]) for s in r.sections}, "sources": len(r.sources),
            "reached": int((p > 0).sum()),
        }
        return r

    @staticmethod
    def rank_chunks(score: dict[int, float], chunks_of: dict[int, list[str]]) -> dict[str, float]:
        """Chunk scores for the sources: each returned node's score split evenly over the chunks behind it."""
        out: dict[str, float] = {}
        for v, s in score.items():
            cs = chunks_of[v]
            for c in cs:
                out[c] = out.get(c, 0.0) + max(s, 1e-12) / len(cs)
        return out

    @staticmethod
    def _top(p: np.ndarray, w: Walk, kind: str, k: int, exclude: np.ndarray) -> np.ndarray:
        if kind not in w.code:
            return np.zeros(0, dtype=np.int64)
        return top_by_kind(p, w.h.kinds, w.code[kind], k, exclude=exclude)

    @staticmethod
    def _chunks(w: Walk, view, v: int, community: str | None = None) -> list[str]:
        """Chunk ids behind a retrievable node (see module doc)."""
        h, kind = w.h, w.kind(v)
        if kind == "chunk":
            return [h.ids[v]]
        if kind == "relationship":
            return [c for c in view.rel_chunks.get(h.ids[v], []) if c in view.chunk_doc]
        if kind == "statement":
            return [h.ids[c] for c in w.neighbours(v, ("derived_from",), ("chunk",))]
        if kind == "attribute":
            out: list[str] = []
            for ent in w.neighbours(v, ("has_attribute",), ("entity",)):
                out += [c for c, _ in view.entity_chunks.get(h.ids[ent], [])]
            return list(dict.fromkeys(out))
        if kind == "high_level":
            out = []
            for m in w.neighbours(v, ("matches",), ("statement", "attribute")):
                out += NodeRAGStrategy._chunks(w, view, int(m))
            if not out:  # no matched node: the members of the community it was derived from
                for ent in view.members.get(community or "", []):
                    out += [c for c, _ in view.entity_chunks.get(ent, [])]
            return list(dict.fromkeys(out))
        return []

    @staticmethod
    def _path(r: Retrieval, w: Walk, p: np.ndarray, vec_entries: list[str], exact: list[str], cross: np.ndarray,
              via: dict[int, int], top_rel: np.ndarray, nodes: dict) -> None:
        h = w.h
        on_path = np.zeros(len(h.ids), dtype=bool)
        rank = p.copy()
        steps: list[tuple[int, str]] = []
        for i in dict.fromkeys(vec_entries + exact):
            steps.append((h.index[i], "entry"))
        for v in cross:
            steps.append((int(v), "cross"))
        for lead in dict.fromkeys(via.values()):
            steps.append((lead, "key"))
        for v in list(via) + [int(x) for x in top_rel]:
            steps.append((v, "result"))
        seen: set[int] = set()
        for v, role in steps:
            if v in seen:
                continue
            seen.add(v)
            node = nodes.get(h.ids[v])
            label = (node.title or node.text[:80]) if node is not None else h.ids[v]
            r.path_nodes.append(PathStep(h.ids[v], w.kind(v), role, label))
            if role != "entry":
                # one stored edge to a node already on the path: entries first, then the best PPR score
                u = via.get(v) if via.get(v) is not None and on_path[via[v]] else w.link_to(v, on_path, rank)
                if u is not None:
                    kind = w.kind_of(u, v)
                    if kind is not None:
                        r.path_edges.append(PathEdge(h.ids[u], h.ids[v], kind, role))
            on_path[v] = True
            if role == "entry":
                rank[v] = p[v] + 1.0  # entries are preferred as the other end of a path edge


@register
class NodeRAGTeleport(NodeRAGStrategy):
    name = "noderag-teleport"
    label = "NodeRAG (ablation: teleport PPR, no degree cap)"
    teleport = True
