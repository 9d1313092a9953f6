"""ArchRAG hierarchical search (archrag.txt §3.2.1): what Algorithm 2 retrieves on each C-HNSW layer, as R_i.

"we propose a hierarchical search approach, which retrieves the top k relevant elements in each layer using the
method outlined in Algorithm 2. Once the query at a given layer is complete, we use the inter-layer link of the
nearest neighbor in that layer to traverse to the next layer, repeating the process until reaching the bottom
layer. At the bottom layer, we extract the relationships between connected retrieved entities, forming the text
information R_0 for this subgraph." (§3.2.1)

So every layer i, from the top one down, is Algorithm 2's target in turn: from the top entry, SearchLayer with a
candidate list of 1 on each layer above i and the inter-layer link of the node it finds (lines 2-4, `upper`), then
SearchLayer(G_i, q, s, k) on layer i (line 6, candidate list `ef`: k in the paper; by default the published code's
efSearch 40, src/hchnsw_index.py) gives its k nearest nodes (`CHNSW.search_layers`). Layer 0 holds the entities (§3.1.3: "each node of the simple graph corresponds to an
attributed community or entity"), layer i >= 1 the attributed communities of ArchRAG layer i. R_0 is the k
entities (name and description) and the relationships whose two ends are both among them; R_i (i >= 1) is the k
communities (title and report). No chunk text is retrieved: the published code's context is the same tables
(entities id/name/description, relationships id/source/target/description, communities id/title/summary).
Chunks and documents only record where an item came from (its sources).

The C-HNSW, the statement table and the sentence-vector cache live in the Resources' cache (key `CHNSW_CACHE`,
core/retrieval/cache.py), the index reloaded when its file's mtime changes; no module-level state.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from core.algorithms.chnsw import CHNSW, CHNSW_ARTIFACT, CHNSW_FILE
from core.retrieval.base import Resources
from core.retrieval.cache import CacheKey
from core.text import split_sentences

if TYPE_CHECKING:
    from core.retrieval.archrag.filter import Statements


@dataclass
class ChnswCache:
    digest: str | None  # of the stored index (None: none stored); the file's mtime for a workspace built before
    index: CHNSW | None
    row: dict[str, int]  # C-HNSW node id -> global index
    sentence_vecs: dict[str, np.ndarray] = field(default_factory=dict)
    statements: Statements | None = None  # loaded on first use (archrag/filter.py)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)  # guards the two above


CHNSW_CACHE: CacheKey[ChnswCache] = CacheKey("archrag.chnsw")  # per stored index, reloaded when its digest changes


def chnsw_cache(res: Resources) -> ChnswCache:
    """The workspace's C-HNSW (index None when the build made none), loaded once per Resources and stored index.
    It is the workspace's `chnsw` artifact in the database; a workspace built before the index moved there keeps
    it in its vector directory until its next build."""
    digest = res.store.artifact_digest(res.ws_id, CHNSW_ARTIFACT)
    legacy = res.settings.storage.vector_dir(res.ws.name) / CHNSW_FILE
    if digest is None and legacy.exists():
        digest = f"file:{legacy.stat().st_mtime_ns}"

    def build() -> ChnswCache:
        index = None
        if digest is not None and digest.startswith("file:"):
            index = CHNSW.load(legacy)
        elif digest is not None:
            stored = res.store.artifact(res.ws_id, CHNSW_ARTIFACT)
            index = CHNSW.from_bytes(stored[1]) if stored is not None else None
        row = {str(i): g for g, i in enumerate(index.ids.tolist())} if index is not None else {}
        return ChnswCache(digest, index, row)

    return res.cached(CHNSW_CACHE, build, valid=lambda c: c.digest == digest)


def hierarchical_search(cache: ChnswCache, q: np.ndarray, k: int, ef: int | None,
                        visited: list[set[int]] | None = None, upper: int | None = 1):
    """(found, descents): found[i] = the k nearest (id, similarity) of layer i, each layer found by Algorithm 2
    with layer i as its target: candidate list `upper` (the paper's 1, line 3) on the layers above it, `ef` on it
    (None = k, line 6: "K ← SearchLayer(G_l, q, s, k, l)"); `upper` None enters each layer through the inter-layer
    link of the nearest node of the layer above's own search. descents = (layer, from id, to id): the inter-layer
    links of each layer's nearest node."""
    index = cache.index
    assert index is not None, "no C-HNSW: the caller checks cache.index first"
    found = index.search_layers(q, k, ef or k, visited, upper)
    descents = []
    for layer in range(index.top, 0, -1):
        if found[layer]:
            best = found[layer][0][0]
            to = int(index.inter[cache.row[best]])
            if to >= 0:
                descents.append((layer, best, str(index.ids[to])))
    return found, descents


@dataclass
class Item:
    """One element of R_i as the analysis reads it."""

    id: str
    kind: str  # entity, relationship, community
    title: str
    section: str
    layer: int
    sentences: list[str]
    chunks: list[str] = field(default_factory=list)  # the chunks behind the item (communities: filled on use)
    ends: tuple[str, str] | None = None  # relationships: (subject, object)
    vecs: np.ndarray | None = None  # offline: one row per sentence
    backing: list[list[str]] = field(default_factory=list)  # offline: per sentence, the chunks it was taken from

    def content(self) -> str:
        return " ".join(self.sentences)


def split_text(text: str) -> list[str]:
    """Sentences, also cut after a "…" that ends a truncated quote inside a sentence; each once."""
    return list(dict.fromkeys(x for s in split_sentences(text or "") for x in re.split(r"(?<=…)\s+", s) if x))


def report_sentences(c) -> list[str]:
    """A community's attributes as sentences: its summary, then its findings."""
    rep = c.report or {}
    out = split_text(c.summary or rep.get("summary", ""))
    for f in rep.get("findings", []) or []:
        out.extend(split_text(f.get("explanation") or f.get("summary") or ""))
    return list(dict.fromkeys(out)) or [c.title or c.id]


def community_chunks(view, cid: str) -> list[str]:
    """The chunks behind a community: those that mention its member entities."""
    return list(dict.fromkeys(c for e in view.members.get(cid, []) for c, _ in view.entity_chunks.get(e, [])))


def layer_content(view, found: list[list[tuple[str, float]]]) -> list[list[Item]]:
    """R_i for every layer: layer 0 the retrieved entities, then the relationships between two of them; layer i
    the retrieved communities. Sections: local = entities; bridge = relationships and, when there are two or more
    community layers, layer 1; global = the higher layers (layer 1 too when it is the only one)."""
    top = len(found) - 1
    out: list[list[Item]] = [[] for _ in found]
    if not found:
        return out
    entities = [e for e, _ in found[0] if e in view.entities]
    for eid in entities:
        n = view.entities[eid]
        out[0].append(Item(eid, "entity", n.title, "local", 0, split_text(n.text) or [n.title],
                           chunks=[c for c, _ in view.entity_chunks.get(eid, [])]))
    seen: set[str] = set()
    for i, a in enumerate(entities):
        for b in entities[i + 1 :]:
            for rid in view.relationships_between(a, b):
                rel = view.relationships.get(rid)
                if rel is None or rid in seen:
                    continue
                seen.add(rid)
                src, dst = (rel.data or {}).get("source"), (rel.data or {}).get("target")
                out[0].append(Item(rid, "relationship", rel.title, "bridge", 0, split_text(rel.text) or [rel.title],
                                   chunks=list(view.rel_chunks.get(rid, [])),
                                   ends=(src, dst) if src is not None and dst is not None and {src, dst} == {a, b}
                                   else None))
    for layer in range(1, top + 1):
        section = "bridge" if layer == 1 and top >= 2 else "global"
        for cid, _ in found[layer]:
            c = view.communities.get(cid)
            if c is not None:
                out[layer].append(Item(cid, "community", c.title or cid, section, layer, report_sentences(c)))
    return out
