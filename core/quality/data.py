"""The levels of each community method as core/quality/metrics.py measures them: the graph each method clustered,
the member embeddings (collection "entity" of the vector index) and the level's communities.

* leiden: the extracted entity graph the `communities` stage clustered for GraphRAG (core/graph/entity_graph.py
  `EntityGraph.extracted`: layer-0 entities, relationships collapsed into weighted links; weights as the stage used
  them, `use_weights` of the last build). Level L holds the Leiden communities stored at L; its partition view
  gives every entity its community at L or its deepest one above (communities.level_modularity), so its modularity
  is the build's figure.
* hirag: HiRAG's communities, measured the same way on the layered graph they were found on (entities of every
  layer plus `summarizes` links).
* noderag: NodeRAG's communities on the heterograph (core/graph/hetero.py: every node kind, every stored edge);
  only entity members carry embeddings, so coherence and Calinski–Harabasz read the entities of each community.
* attributed: ArchRAG's first-layer graph (attributed.py): the layer-0 entities with vectors, their relationship
  links plus the KNN augmentation (the build's rule, `augmentation_plan`), each link weighted by attribute
  similarity max(cos, EPS). Every attributed level is a partition of those entities (members are stored
  transitively), so each level is measured on that one graph.
* hirag_layers: level i groups the layer-i entities by the summary entity (layer i + 1) they `summarizes` into.
  HiRAG clusters embeddings, not a graph; the graph of layer 0 is the relationship graph among the layer-0 entities
  and that of layer i the same graph contracted onto layer i (each layer-0 entity carried to its layer-i ancestor;
  links inside one ancestor become its self-loop). Soft membership: conductance, coherence, sizes and the cluster
  sparsity CS use the groups as stored, overlaps included (CS then equals the `layers` stage's figure); the hard
  labels behind modularity, coverage, Calinski–Harabasz and the contraction put an entity of several groups in
  the one whose centroid is most similar to it. An entity no summary entity covers (a GMM singleton) is unclustered.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sqlmodel import col, select

from core.algorithms.attributed import Hierarchy
from core.config import Settings
from core.graph.entity_graph import load_entity_graph
from core.graph.hetero import HeteroGraph
from core.models import BuildRun, Community, Edge, Node
from core.quality.metrics import LevelData, adjacency, level_labels
from core.secrets import with_secrets

METHODS = {"leiden": "Leiden (GraphRAG)", "hirag": "HiRAG communities", "noderag": "NodeRAG communities",
           "attributed": "Attributed (ArchRAG)", "hirag_layers": "HiRAG layers"}


def build_settings(store, ws_id: int, current: Settings | None = None) -> Settings:
    """The settings of the workspace's last finished build (`current` when it has none or they do not parse), with
    the storage, the Ollama host and the quality thresholds of `current` (the caller's settings): a database
    copied elsewhere keeps the paths of the machine that built it in its run."""
    current = current or Settings()
    with store.session() as s:
        run = s.exec(select(BuildRun).where(BuildRun.workspace_id == ws_id, BuildRun.status == "done",
                                            BuildRun.kind == "build")
                     .order_by(col(BuildRun.id).desc())).first()
    try:
        out = Settings.model_validate(run.settings) if run is not None and run.settings else current
    except ValueError:
        out = current
    out = out.model_copy(deep=True)
    out.storage = current.storage.model_copy(deep=True)
    out.quality = current.quality.model_copy(deep=True)
    out.backend.ollama_host = current.backend.ollama_host
    return with_secrets(out, current)  # a stored run holds no secret (core/secrets.py): the caller's own


@dataclass
class EntityBase:
    """The entity graph of a workspace with its embeddings, vertex i = entity ids[i] (sorted by id)."""

    ids: list[str]
    layer: np.ndarray
    pairs: np.ndarray  # (m, 2) every link of the entity graph (a < b)
    weights: np.ndarray  # their summed weights
    rel_pairs: np.ndarray  # the links that come from relationships (not `summarizes`)
    rel_weights: np.ndarray
    vecs: np.ndarray  # unit rows, zeros where has_vec is False
    has_vec: np.ndarray
    ext_pairs: np.ndarray | None = None  # the extracted graph's links (layer 0, relationships) in the stage's order
    ext_weights: np.ndarray | None = None  # their relationship weights

    def extracted(self) -> "EntityBase":
        """The base of the extracted graph `leiden` clusters: the layer-0 entities (in id order) and the links of
        their relationships in the order the `communities` stage gave them to Leiden."""
        verts = np.flatnonzero(self.layer == 0)
        if len(verts) == len(self.ids) and self.ext_pairs is None:
            return self
        pos = np.full(len(self.ids), -1, dtype=np.int64)
        pos[verts] = np.arange(len(verts))
        if self.ext_pairs is not None:
            pairs, weights = pos[self.ext_pairs], np.asarray(self.ext_weights, dtype=np.float64)
        else:
            pairs, weights = pos[self.rel_pairs], self.rel_weights
        keep = (pairs >= 0).all(axis=1) if len(pairs) else np.zeros(0, bool)
        pairs, weights = pairs[keep].reshape(-1, 2), weights[keep]
        rel = pos[self.rel_pairs] if len(self.rel_pairs) else np.zeros((0, 2), np.int64)
        rkeep = (rel >= 0).all(axis=1) if len(rel) else np.zeros(0, bool)
        return EntityBase([self.ids[v] for v in verts], np.zeros(len(verts), dtype=np.int64), pairs, weights,
                          rel[rkeep].reshape(-1, 2), self.rel_weights[rkeep], self.vecs[verts], self.has_vec[verts])

    def adj(self, use_weights: bool = True) -> sp.csr_matrix:
        """The adjacency the `communities` stage clustered (igraph weights max(1e-6, w), or 1 each)."""
        w = np.maximum(self.weights, 1e-6) if use_weights else np.ones(len(self.pairs))
        return adjacency(len(self.ids), self.pairs, w)


def load_base(store, index, ws_id: int) -> EntityBase:
    eg = load_entity_graph(store, ws_id)
    ex = eg.extracted()
    n = len(eg.ids)
    pairs = np.array(list(eg.links), dtype=np.int64).reshape(-1, 2)
    weights = np.array(list(eg.links.values()), dtype=np.float64)
    rel = np.array(sorted(eg.link_rels), dtype=np.int64).reshape(-1, 2)
    rel_w = np.array([eg.links[(int(a), int(b))] for a, b in rel], dtype=np.float64)
    with store.session() as s:
        layer_of = dict(s.exec(select(Node.id, Node.layer).where(Node.workspace_id == ws_id,
                                                                 Node.kind == "entity")).all())
    layer = np.array([int(layer_of.get(i, 0)) for i in eg.ids], dtype=np.int64)
    got = index.vectors("entity", eg.ids) if n else {}
    dim = len(next(iter(got.values()))) if got else 1
    vecs = np.zeros((n, dim), dtype=np.float32)
    has = np.zeros(n, dtype=bool)
    for i, e in enumerate(eg.ids):
        v = got.get(e)
        if v is not None:
            vecs[i], has[i] = v, True
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = np.where(norms > 0, vecs / np.maximum(norms, 1e-12), 0.0).astype(np.float32)
    ext = np.array([(eg.index[ex.ids[a]], eg.index[ex.ids[b]]) for a, b in ex.links], dtype=np.int64).reshape(-1, 2)
    ext_w = np.array(list(ex.links.values()), dtype=np.float64)
    return EntityBase(list(eg.ids), layer, pairs, weights, rel, rel_w, vecs, has, ext, ext_w)


@dataclass
class Group:
    id: str
    title: str
    level: int
    members: np.ndarray  # vertex indices
    parent: int = -1  # index of the parent group, -1 for none


def stored_groups(store, ws_id: int, method: str, index_of: dict[str, int]) -> list[Group]:
    """The stored communities of `method` with their member vertices (members outside `index_of` dropped)."""
    with store.session() as s:
        rows = s.exec(select(Community.id, Community.title, Community.level, Community.parent_id).where(
            Community.workspace_id == ws_id, Community.method == method)
            .order_by(col(Community.level), col(Community.id))).all()
        links = s.exec(select(Edge.src, Edge.dst).join(Community, col(Community.id) == Edge.dst).where(
            Edge.workspace_id == ws_id, Edge.kind == "in_community", Community.method == method)).all()
    members: dict[str, list[int]] = {}
    for src, dst in links:
        v = index_of.get(src)
        if v is not None:
            members.setdefault(dst, []).append(v)
    pos = {r[0]: i for i, r in enumerate(rows)}
    return [Group(cid, title or "", int(level), np.array(sorted(members.get(cid, [])), dtype=np.int64),
                  pos.get(parent, -1) if parent else -1) for cid, title, level, parent in rows]


def leiden_levels(base: EntityBase, adj: sp.csr_matrix, groups: list[Group], method: str = "leiden"
                  ) -> list[LevelData]:
    """One LevelData per level of a nested hierarchy over the entity graph (stored Leiden or a what-if variant)."""
    lv = np.array([g.level for g in groups], dtype=np.int64)
    members = [g.members for g in groups]
    out = []
    for level in sorted(set(lv.tolist())):
        at = [i for i in range(len(groups)) if lv[i] == level]
        out.append(LevelData(method, level, base.ids, adj, base.vecs, base.has_vec, [groups[i].id for i in at],
                             [groups[i].title for i in at], [members[i] for i in at],
                             level_labels(len(base.ids), lv, members, level)))
    return out


def attributed_levels(base: EntityBase, groups: list[Group], settings: Settings) -> list[LevelData]:
    sub = np.flatnonzero((base.layer == 0) & base.has_vec)
    pos = np.full(len(base.ids), -1, dtype=np.int64)
    pos[sub] = np.arange(len(sub))
    edges = pos[base.rel_pairs] if len(base.rel_pairs) else np.zeros((0, 2), np.int64)
    edges = edges[(edges >= 0).all(axis=1)]
    h = Hierarchy(edges, base.vecs[sub], settings.archrag)
    for _ in h.augment():
        pass
    adj = adjacency(len(sub), h.pairs, h.weights)
    ids = [base.ids[i] for i in sub]
    out = []
    for level in sorted({g.level for g in groups}):
        at = [g for g in groups if g.level == level]
        mem = [pos[g.members][pos[g.members] >= 0] for g in at]
        lab = np.full(len(sub), -1, dtype=np.int64)
        for i, m in enumerate(mem):
            lab[m] = i
        out.append(LevelData("attributed", level, ids, adj, base.vecs[sub], base.has_vec[sub], [g.id for g in at],
                             [g.title for g in at], mem, lab,
                             note=f"ArchRAG's layer-1 graph: {len(h.edges):,} relationship links plus "
                                  f"{h.knn_added:,} KNN links, weighted by attribute similarity"))
    return out


def _hard(groups: list[np.ndarray], vecs: np.ndarray, n: int) -> np.ndarray:
    """Hard label of every vertex: its group, or among several the one whose centroid is most similar."""
    lab = np.full(n, -1, dtype=np.int64)
    if not groups:
        return lab
    v = np.concatenate(groups)
    g = np.repeat(np.arange(len(groups)), [len(x) for x in groups])
    cent = np.vstack([vecs[x].mean(axis=0) if len(x) else np.zeros(vecs.shape[1]) for x in groups])
    score = np.einsum("ij,ij->i", vecs[v].astype(np.float64), cent[g])
    order = np.lexsort((g, -score, v))  # per vertex: best score first (ties: lowest group)
    v, g = v[order], g[order]
    first = np.ones(len(v), dtype=bool)
    first[1:] = v[1:] != v[:-1]
    lab[v[first]] = g[first]
    return lab


def hirag_levels(store, ws_id: int, base: EntityBase) -> list[LevelData]:
    with store.session() as s:
        ups = s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws_id, Edge.kind == "summarizes")).all()
        titles = dict(s.exec(select(Node.id, Node.title).where(Node.workspace_id == ws_id, Node.kind == "entity",
                                                               Node.layer > 0)).all())
    index_of = {e: i for i, e in enumerate(base.ids)}
    up: dict[int, list[int]] = {}
    for a, b in ups:
        if a in index_of and b in index_of:
            up.setdefault(index_of[b], []).append(index_of[a])
    verts0 = np.flatnonzero((base.layer == 0) & base.has_vec)
    pos0 = np.full(len(base.ids), -1, dtype=np.int64)
    pos0[verts0] = np.arange(len(verts0))
    e0 = pos0[base.rel_pairs] if len(base.rel_pairs) else np.zeros((0, 2), np.int64)
    keep = (e0 >= 0).all(axis=1)
    a0 = adjacency(len(verts0), e0[keep], base.rel_weights[keep])
    anc = verts0.copy()  # each layer-0 vertex's ancestor on the current layer (base index, -1 = none)
    out = []
    top = int(base.layer.max()) if len(base.layer) else 0
    for i in range(top):
        verts = np.flatnonzero((base.layer == i) & base.has_vec)
        pos = np.full(len(base.ids), -1, dtype=np.int64)
        pos[verts] = np.arange(len(verts))
        summ = sorted(b for b in up if base.layer[b] == i + 1)
        groups = [np.unique(pos[np.array(up[b])][pos[np.array(up[b])] >= 0]) for b in summ]
        ok = anc >= 0
        ok[ok] = pos[anc[ok]] >= 0
        p = sp.csr_matrix((np.ones(int(ok.sum())), (np.flatnonzero(ok), pos[anc[ok]])),
                          shape=(len(verts0), len(verts)))
        adj = a0 if i == 0 else sp.csr_matrix(p.T @ a0 @ p)
        lab = _hard(groups, base.vecs[verts], len(verts))
        out.append(LevelData("hirag_layers", i, [base.ids[v] for v in verts], adj, base.vecs[verts], base.has_vec[verts],
                             [base.ids[b] for b in summ], [titles.get(base.ids[b], "") for b in summ], groups, lab,
                             soft=True, note=f"layer {i} entities grouped by their layer-{i + 1} summary entity"))
        to_summary = np.array(summ + [-1], dtype=np.int64)  # hard label -> the summary entity's base index
        carried = np.full(len(anc), -1, dtype=np.int64)
        carried[ok] = to_summary[lab[pos[anc[ok]]]]
        anc = carried
    return out


def load_levels(store, index, ws_id: int, method: str, settings: Settings, base: EntityBase | None = None
                ) -> list[LevelData]:
    """Every level of `method` (a key of METHODS) in the workspace, ready for quality.level_metrics."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    base = base or load_base(store, index, ws_id)
    if method == "hirag_layers":
        return hirag_levels(store, ws_id, base)
    if method == "noderag":
        return noderag_levels(store, ws_id, base)
    if method == "leiden":
        base = base.extracted()
    groups = stored_groups(store, ws_id, method, {e: i for i, e in enumerate(base.ids)})
    if method == "attributed":
        return attributed_levels(base, groups, settings)
    return leiden_levels(base, base.adj(settings.community.use_weights), groups, method=method)


def noderag_levels(store, ws_id: int, base: EntityBase) -> list[LevelData]:
    """NodeRAG's communities on the heterograph (module doc); none stored, no levels (and no graph loaded)."""
    with store.session() as s:
        if s.exec(select(Community.id).where(Community.workspace_id == ws_id, Community.method == "noderag")
                  ).first() is None:
            return []
    hg = HeteroGraph.load(store, ws_id)
    groups = stored_groups(store, ws_id, "noderag", hg.index)
    at = {e: i for i, e in enumerate(base.ids)}
    ent = np.array([at.get(i, -1) for i in hg.ids], dtype=np.int64)
    vecs = np.zeros((len(hg.ids), base.vecs.shape[1]), dtype=np.float32)
    has = np.zeros(len(hg.ids), dtype=bool)
    ok = ent >= 0
    vecs[ok], has[ok] = base.vecs[ent[ok]], base.has_vec[ent[ok]]
    hb = EntityBase(hg.ids, np.zeros(len(hg.ids), dtype=np.int64), np.zeros((0, 2), np.int64), np.zeros(0),
                    np.zeros((0, 2), np.int64), np.zeros(0), vecs, has)
    out = leiden_levels(hb, sp.csr_matrix(hg.adj), groups, method="noderag")
    for ld in out:
        ld.note = "NodeRAG's heterograph: nodes of every kind; embeddings of the entity members only"
    return out


def describe(store, ws_id: int, ids: list[str]) -> dict[str, tuple[str, list[str]]]:
    """(summary, finding headlines) of communities, (description, []) of HiRAG summary entities."""
    if not ids:
        return {}
    with store.session() as s:
        nodes = s.exec(select(Node.id, Node.text).where(Node.workspace_id == ws_id,
                                                        col(Node.id).in_(ids))).all()
        comms = s.exec(select(Community.id, Community.summary, Community.report).where(
            Community.workspace_id == ws_id, col(Community.id).in_(ids))).all()
    out: dict[str, tuple[str, list[str]]] = {i: (t or "", []) for i, t in nodes}
    for cid, summary, report in comms:
        heads = [f.get("summary", "") for f in (report or {}).get("findings", []) if isinstance(f, dict)]
        out[cid] = (summary or "", [h for h in heads if h])
    return out
