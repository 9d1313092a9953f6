"""ArchRAG online retrieval (archrag.txt §3.2): C-HNSW hierarchical search, then adaptive filtering.

1. Hierarchical search (§3.2.1): Algorithm 2 gives the k nearest nodes of the top layer; the inter-layer link of
   the nearest one enters the layer below, down to layer 0 (`CHNSW.search_layers`). Layer 0 holds entities,
   layer i >= 1 the attributed communities of ArchRAG layer i. R_0 adds the relationships between retrieved
   entities (both ends retrieved, as the paper says; the published code takes those whose source is retrieved).
   `ef` is 256: layer 0 is an exact-kNN graph without long links, where ef 32 found 75% of the exact top 5 on
   hotpotqa and 256 finds 93%, in about 2 ms.
2. Adaptive filtering (§3.2.2, Eq. 3-4): an analysis per retrieved part gives points rated for relevance; all
   points are sorted and cut at the first that would pass `max_tokens` (count_tokens), as the published code's
   reduce step; core/answer.py then merges them. A part is one element (entity, chunk, relationship, community
   report), not the published code's token-sized table, so each point names its node. Offline the analysis is
   extractive: the part's sentences (<= `max_part_sentences`) rated by the cosine of their embedding to the
   question, the `points_per_part` best kept above `min_relevance` (the prompt's score-0 points), a sentence
   kept once. Asked with Ollama, the analysis is the paper's filter prompt (Figure 10) per part (`llm_analysis`,
   the backend task `rate_points`, `backend.concurrency` calls at a time): its points rated 0-100 are read as
   relevance 0-1 and back the part's chunks.
   Sentence vectors: a chunk's sentences are its statements (stored vectors). Offline descriptions and reports
   quote statements (behind "Name (TYPE): " / "A — p — B: " labels, or cut with "…"), so such a sentence is read
   as that statement, with its stored vector and its chunk. Other sentences are embedded (cached on the
   Resources; at most MAX_EMBEDDED new ones per question, the rest rated with their part's stored vector).
3. Sections: local = layer-0 entities and the chunks that mention them (<= `chunks_per_entity` each, most
   mentions first); bridge = R_0's relationships and, when there are two or more community layers, the layer-1
   communities; global = the communities of the higher layers (layer 1 too when it is the only one). Text = the
   kept points, score = the best one's relevance, level = the C-HNSW layer.
4. Sources: a kept point backs the chunk its sentence came from with its relevance; a point quoting no
   statement backs its part's chunks (entity: mentioning chunks; relationship: its chunks; community: those of
   its `community_members` members nearest the question), the relevance divided among them. A chunk scores its
   best point, not the sum (on hotpotqa summing let many middling points outrank the answer: recall@5 0.55 vs
   0.64); documents sum their chunks.
5. Path: per layer the nodes found (role "entry" on the top layer, "layer" below, label "layer i: title"), each
   descent from a layer's best node through its inter-layer link (kind "chnsw", role "layer"; the target added
   when not among the k), kept relationships ("bridge", subject / object edges), kept chunks ("chunk", mentions).

The C-HNSW, the statement table and the sentence cache live on the Resources (`res.__dict__["archrag_cache"]`),
the index reloaded when its file's mtime changes; there is no module-level state.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sqlmodel import select

from core.extract.text import split_sentences
from core.ingest import count_tokens
from core.models import Edge, Node
from core.retrieval.base import (
    ContextItem,
    PathEdge,
    PathStep,
    Resources,
    Retrieval,
    RetrievalLLM,
    Timer,
    llm_calls,
    register,
    sources_from_chunks,
)

CACHE_KEY = "archrag_cache"
SENTENCE_CACHE = 50_000  # cached sentence vectors per Resources before the cache is emptied
MAX_EMBEDDED = 64  # sentences embedded per question at most; the rest take their part's stored vector


@dataclass
class _Cache:
    path: Path
    mtime: float | None
    index: object | None  # CHNSW
    row: dict[str, int]  # C-HNSW node id -> global index
    sentence_vecs: dict[str, np.ndarray] = field(default_factory=dict)
    member_rows: dict[str, np.ndarray] = field(default_factory=dict)  # community -> layer-0 rows of its members
    statements: _Statements | None = None


@dataclass
class _Statements:
    """The workspace's statements: offline they are the chunks' sentences, and entity and relationship
    descriptions and extractive reports are made of them, so most sentences have a stored vector and a chunk."""

    by_text: dict[str, str]  # normalized text -> a statement id
    texts: list[str]  # sorted texts (prefix search)
    chunks_of: dict[str, list[str]]  # normalized text -> chunks it was taken from
    of_chunk: dict[str, list[tuple[str, str]]]  # chunk -> [(statement id, text)]


def chnsw_cache(res: Resources) -> _Cache:
    """The workspace's C-HNSW (None when the build made none), loaded once per Resources and index file."""
    from core.graph.attributed_stage import CHNSW_FILE
    from core.graph.chnsw import CHNSW

    path = res.settings.storage.vector_dir(res.ws.name) / CHNSW_FILE
    mtime = path.stat().st_mtime if path.exists() else None
    c = res.__dict__.get(CACHE_KEY)
    if c is None or c.path != path or c.mtime != mtime:
        index = CHNSW.load(path) if mtime is not None else None
        row = {str(i): g for g, i in enumerate(index.ids.tolist())} if index is not None else {}
        c = _Cache(path, mtime, index, row)
        res.__dict__[CACHE_KEY] = c
    return c


def hierarchical_search(cache: _Cache, q: np.ndarray, k: int, ef: int):
    """(found, descents): found[i] = the k nearest (id, similarity) of layer i, each layer entered through the
    inter-layer link of the nearest node of the layer above; descents = (layer, from id, to id) of those links."""
    index = cache.index
    found = index.search_layers(q, k, ef)
    descents = []
    for layer in range(index.top, 0, -1):
        if found[layer]:
            best = found[layer][0][0]
            to = int(index.inter[cache.row[best]])
            if to >= 0:
                descents.append((layer, best, str(index.ids[to])))
    return found, descents


@dataclass
class Part:
    """One retrieved element as the analysis reads it."""

    id: str
    kind: str  # entity, chunk, relationship, community
    title: str
    section: str
    layer: int | None
    sentences: list[str]
    vecs: np.ndarray | None = None
    backing: list[list[str]] = field(default_factory=list)  # per sentence: the chunks it was taken from
    chunks: list[str] = field(default_factory=list)  # chunks behind the part as a whole
    via: list[str] = field(default_factory=list)  # chunk parts: the retrieved entities that mention the chunk
    ends: tuple[str, str] | None = None  # relationship parts: (subject, object)


@dataclass
class Point:
    part: int
    text: str
    score: float
    chunks: list[str] = field(default_factory=list)  # the chunks the point's sentence was taken from


def extractive_analysis(parts: list[Part], q: np.ndarray, per_part: int, min_relevance: float) -> list[Point]:
    """Offline stand-in for the paper's filter prompt: the sentences of each part most similar to the question,
    each rated by that cosine similarity; points at or below `min_relevance` are dropped."""
    points: list[Point] = []
    for pi, p in enumerate(parts):
        if p.vecs is None or not len(p.sentences):
            continue
        sims = p.vecs @ q
        for j in np.argsort(-sims, kind="stable")[:per_part].tolist():
            if sims[j] > min_relevance:
                points.append(Point(pi, p.sentences[j], float(sims[j]), p.backing[j] if p.backing else []))
    return points


def llm_analysis(llm, question: str, parts: list[Part], per_part: int, workers: int) -> list[Point]:
    """The paper's filter prompt (Figure 10) per part, with a model: its key points rated 0-100, read as relevance
    0-1; score-0 points ("I don't know") dropped. A point backs its part's chunks (it paraphrases, so it cannot be
    traced to one sentence)."""

    def analyse(pi: int) -> list[Point]:
        p = parts[pi]
        material = f"{p.kind} {p.title}:\n" + "\n".join(p.sentences)
        rated = sorted(llm.rate_points(question, material), key=lambda x: -x.score)[:per_part]
        return [Point(pi, x.description, x.score / 100, []) for x in rated if x.score > 0]

    return [pt for pts in llm_calls(analyse, list(range(len(parts))), workers) for pt in pts]


def adaptive_filter(points: list[Point], max_tokens: int) -> tuple[list[Point], int]:
    """Sort the points by relevance and keep them until the next one would exceed `max_tokens` (Eq. 4's Sort and
    the text limit); a text already kept is skipped. Returns (kept points best first, tokens used)."""
    kept: list[Point] = []
    seen: set[str] = set()
    used = 0
    for p in sorted(points, key=lambda p: (-p.score, p.part, p.text)):
        if p.text in seen:
            continue
        n = count_tokens(p.text)
        if used + n > max_tokens:
            break
        kept.append(p)
        seen.add(p.text)
        used += n
    return kept, used


def _split(text: str) -> list[str]:
    """Sentences, also cut after a "…" that ends a truncated quote inside a sentence."""
    return [x for s in split_sentences(text or "") for x in re.split(r"(?<=…)\s+", s) if x]


def _sentences(text: str, cap: int) -> list[str]:
    return list(dict.fromkeys(_split(text)))[:cap]


def _report_sentences(c, cap: int) -> list[str]:
    rep = c.report or {}
    text = [c.summary or rep.get("summary", "")]
    for f in rep.get("findings", []) or []:
        text.append(f.get("explanation") or f.get("summary") or "")
    out: list[str] = []
    for t in text:
        out.extend(_split(t))
    return list(dict.fromkeys(out))[:cap] or [c.title or c.id]


def _embed(res: Resources, cache: _Cache, texts: list[str]) -> tuple[dict[str, np.ndarray], int]:
    """Vectors of `texts`, embedding only those not cached yet; returns (vectors, number embedded)."""
    missing = [t for t in dict.fromkeys(texts) if t not in cache.sentence_vecs]
    if missing:
        vecs = res.embedder.embed(missing)
        if len(cache.sentence_vecs) + len(missing) > SENTENCE_CACHE:
            cache.sentence_vecs.clear()
        cache.sentence_vecs.update(zip(missing, np.asarray(vecs, dtype=np.float32)))
    return {t: cache.sentence_vecs[t] for t in texts}, len(missing)


def _statements(res: Resources, cache: _Cache) -> _Statements:
    """The statements with the chunk each was taken from, loaded once per Resources."""
    if cache.statements is None:
        with res.store.session() as s:
            rows = s.exec(select(Node.id, Node.text, Edge.dst).join(Edge, Edge.src == Node.id).where(
                Node.workspace_id == res.ws.id, Node.kind == "statement", Edge.workspace_id == res.ws.id,
                Edge.kind == "derived_from").order_by(Node.id)).all()
        by_text: dict[str, str] = {}
        chunks_of: dict[str, list[str]] = {}
        of_chunk: dict[str, list[tuple[str, str]]] = {}
        for sid, text, cid in rows:
            key = " ".join((text or "").split())
            if key:
                by_text.setdefault(key, sid)
                chunks_of.setdefault(key, []).append(cid)
                of_chunk.setdefault(cid, []).append((sid, key))
        cache.statements = _Statements(by_text, sorted(by_text), chunks_of, of_chunk)
    return cache.statements


def _readings(sentence: str, title: str = "") -> list[str]:
    """The sentence, then without its "Name (TYPE): " / "A — p — B: " labels, a doubled leading name ("Denis
    Latin Denis Latin is ...") or the part's own title in front: how descriptions and reports quote a statement."""
    out = [" ".join(sentence.split())]
    if title and out[0].startswith(title + " "):
        out.append(out[0][len(title) + 1 :])
    cur = out[0]
    for _ in range(3):
        head, sep, body = cur.partition(": ")
        if not sep or len(head) > 150 or not body:
            break
        cur = body
        out.append(cur)
    for text in list(out):
        w = text.split(" ")
        for n in range(1, min(8, len(w) // 2) + 1):
            if w[:n] == w[n : 2 * n]:
                out.append(" ".join(w[n:]))
                break
    return out


def _find_statement(sentence: str, title: str, by_text: dict[str, str], texts: list[str]) -> str | None:
    """The text of the statement a sentence quotes: equal text, or for a text cut with "…" the one it starts."""
    for r in _readings(sentence, title):
        if r in by_text:
            return r
        if r.endswith("…") and len(r) > 20:
            prefix = r[:-1].rstrip()
            i = bisect_left(texts, prefix)
            if i < len(texts) and texts[i].startswith(prefix):
                return texts[i]
    return None


def _fill_vectors(res: Resources, cache: _Cache, parts: list[Part], cfg) -> tuple[int, int]:
    """Give every sentence of every part a vector and its backing chunks: a chunk's sentences are its
    statements; any other sentence quoting a statement is read as it (labels and "…" cuts gone, duplicates
    merged) and takes its stored vector and chunks; the rest are embedded. Returns (stored, embedded) counts."""
    st = _statements(res, cache)
    need_text = [p for p in parts if p.kind == "chunk" and p.id not in st.of_chunk]
    if need_text:  # chunks without statements: their own sentences
        nodes = res.store.nodes_by_id(res.ws.id, [p.id for p in need_text])
        for p in need_text:
            p.sentences = _sentences(nodes[p.id].text if p.id in nodes else "", cfg.max_part_sentences)
    for p in parts:
        if p.kind == "chunk" and p.id in st.of_chunk:
            p.sentences = list(dict.fromkeys(t for _, t in st.of_chunk[p.id]))[: cfg.max_part_sentences]
        else:
            p.sentences = list(dict.fromkeys(_find_statement(x, p.title, st.by_text, st.texts) or x
                                             for x in p.sentences))
        p.backing = [[p.id] if p.kind == "chunk" else st.chunks_of.get(x, []) for x in p.sentences]
    stored = res.index.vectors("statement", list(dict.fromkeys(
        st.by_text[x] for p in parts for x in p.sentences if x in st.by_text)))
    vec = {x: stored[st.by_text[x]] for p in parts for x in p.sentences if st.by_text.get(x) in stored}
    late = set(list(dict.fromkeys(x for p in parts for x in p.sentences if x not in vec and
                                  x not in cache.sentence_vecs))[MAX_EMBEDDED:])
    own: dict[str, np.ndarray] = {}
    if late:  # too many new sentences (a model-built workspace): the overflow takes its part's stored vector
        for kind in ("entity", "chunk", "community"):
            own.update(res.index.vectors(kind, [p.id for p in parts if p.kind == kind and late & set(p.sentences)]))
        for p in parts:
            keep = [x for x in p.sentences if x not in late or p.id in own]
            p.backing = [b for x, b in zip(p.sentences, p.backing) if x in keep]
            p.sentences = keep
    embedded_vecs, embedded = _embed(res, cache, [x for p in parts for x in p.sentences
                                                  if x not in vec and x not in late])
    vec.update(embedded_vecs)
    for p in parts:
        if p.sentences:
            p.vecs = np.vstack([own[p.id] if x in late else vec[x] for x in p.sentences])
    return sum(1 for p in parts for x in p.sentences if st.by_text.get(x) in stored), embedded


def _build_parts(res: Resources, view, found: list[list[tuple[str, float]]], top: int, cfg) -> list[Part]:
    parts: list[Part] = []
    entities = [e for e, _ in found[0] if e in view.entities] if found else []
    chunk_via: dict[str, list[str]] = {}
    for eid in entities:
        n = view.entities[eid]
        sents = _sentences(n.text, cfg.max_part_sentences) or [n.title]
        chunks = [c for c, _ in view.entity_chunks.get(eid, [])]
        parts.append(Part(eid, "entity", n.title, "local", 0, sents, chunks=chunks))
        ranked = sorted(view.entity_chunks.get(eid, []), key=lambda cw: (-cw[1], cw[0]))[: cfg.chunks_per_entity]
        for c, _ in ranked:
            chunk_via.setdefault(c, []).append(eid)
    for c, via in chunk_via.items():
        doc = view.chunk_doc.get(c)
        title = view.documents.get(doc, (None, c))[1] if doc else c
        parts.append(Part(c, "chunk", title, "local", None, [], chunks=[c], via=via))
    seen: set[str] = set()
    for i, a in enumerate(entities):  # R_0: the relationships between retrieved entities
        for b in entities[i + 1 :]:
            for rid in view.relationships_between(a, b):
                rel = view.relationships.get(rid)
                if rel is None or rid in seen:
                    continue
                seen.add(rid)
                src, dst = (rel.data or {}).get("source"), (rel.data or {}).get("target")
                ends = (src, dst) if {src, dst} == {a, b} else None
                parts.append(Part(rid, "relationship", rel.title, "bridge", None,
                                  _sentences(rel.text, cfg.max_part_sentences) or [rel.title],
                                  chunks=list(view.rel_chunks.get(rid, [])), ends=ends))
    for layer in range(1, len(found)):
        section = "bridge" if layer == 1 and top >= 2 else "global"
        for cid, _ in found[layer]:
            c = view.communities.get(cid)
            if c is not None:
                parts.append(Part(cid, "community", c.title or cid, section, layer,
                                  _report_sentences(c, cfg.max_part_sentences)))
    return parts


def _community_chunks(cache: _Cache, view, cid: str, sims0: np.ndarray, m: int) -> list[str]:
    """Chunks of the m members of community `cid` nearest the question."""
    rows = cache.member_rows.get(cid)
    if rows is None:
        rows = np.array([cache.row[e] for e in view.members.get(cid, []) if cache.row.get(e, len(sims0)) < len(sims0)],
                        dtype=np.int64)
        cache.member_rows[cid] = rows
    if not len(rows):
        return []
    top = rows[np.argsort(-sims0[rows], kind="stable")[:m]]
    ids = cache.index.ids
    return [c for g in top.tolist() for c, _ in view.entity_chunks.get(str(ids[g]), [])]




class ArchRAGStrategy:
    name = "archrag"
    label = "ArchRAG (C-HNSW + adaptive filtering)"
    description = (
        "local: the k entities nearest the question on C-HNSW layer 0 and the chunks that mention them; "
        "bridge: the relationships between those entities and the k nearest layer-1 attributed communities; "
        "global: reports of the k nearest attributed communities of every higher layer. "
        "Each part is cut to its sentences most relevant to the question, and the whole to the token budget."
    )

    def retrieve(self, res: Resources, question: str, llm: RetrievalLLM | None = None) -> Retrieval:
        cfg = res.settings.retrieval.archrag
        r = Retrieval(self.name, question)
        t = Timer(r.trace)
        cache = chnsw_cache(res)
        view = res.view
        t.lap("load_index")
        if cache.index is None or len(cache.index.ids) == 0:
            r.trace["note"] = "no C-HNSW index: build the workspace with ArchRAG attributed communities on"
            r.trace["counts"] = {"layers": 0, "parts": 0, "sources": 0}
            return r
        index = cache.index
        q = np.asarray(res.embed_query(question), dtype=np.float32)
        t.lap("embed_query")
        found, descents = hierarchical_search(cache, q, cfg.k_per_layer, cfg.ef)
        t.lap("hierarchical_search")
        parts = _build_parts(res, view, found, index.top, cfg)
        if llm is None:
            stored, embedded = _fill_vectors(res, cache, parts, cfg)
            t.lap("read_parts")
            points = extractive_analysis(parts, q, cfg.points_per_part, cfg.min_relevance)
        else:
            stored = embedded = 0
            t.lap("read_parts")
            points = llm_analysis(llm, question, parts, cfg.points_per_part, res.settings.backend.concurrency)
            r.trace["llm"] = {"model": llm.model, "filter_calls": len(parts)}
        kept, used = adaptive_filter(points, cfg.max_tokens)
        t.lap("adaptive_filter")

        by_part: dict[int, list[Point]] = {}
        for p in kept:
            by_part.setdefault(p.part, []).append(p)
        sims0 = None
        chunk_scores: dict[str, float] = {}
        kept_parts: list[Part] = []
        for pi, pts in by_part.items():
            part = parts[pi]
            backing: list[str] = []
            for x in pts:  # a kept point backs the chunks its sentence came from, else (spread) the part's own
                chunks, weight = [c for c in x.chunks if c in view.chunk_doc], x.score
                if not chunks:
                    if part.kind == "community" and not part.chunks:
                        if sims0 is None:
                            sims0 = index.vecs[: index.offsets[1]] @ q
                        part.chunks = _community_chunks(cache, view, part.id, sims0, cfg.community_members)
                    chunks = [c for c in dict.fromkeys(part.chunks) if c in view.chunk_doc]
                    weight = x.score / max(len(chunks), 1)
                for c in chunks:
                    chunk_scores[c] = max(chunk_scores.get(c, 0.0), weight)
                backing.extend(chunks)
            r.sections[part.section].append(ContextItem(part.id, part.kind, part.title,
                                                        " ".join(x.text for x in pts), round(pts[0].score, 4),
                                                        part.layer, view.documents_of(backing)))
            kept_parts.append(part)
        for sec in r.sections.values():
            sec.sort(key=lambda i: (-i.score, i.id))
        r.sources = sources_from_chunks(view, chunk_scores, res.settings.retrieval.max_sources)
        t.lap("rank_sources")
        _path(r, view, index, found, descents, kept_parts)
        r.trace["chnsw"] = {"layer_sizes": index.layer_sizes,
                            "found": [[[i, round(s, 4)] for i, s in layer] for layer in found]}
        r.trace["counts"] = {
            "layers": index.top + 1, "found": sum(len(x) for x in found), "parts": len(parts),
            "relationships": sum(p.kind == "relationship" for p in parts),
            "chunks": sum(p.kind == "chunk" for p in parts), "points": len(points), "points_kept": len(kept),
            "parts_kept": len(kept_parts), "context_tokens": used, "sentences_stored": stored,
            "sentences_embedded": embedded,
            "sources": len(r.sources),
        }
        return r


def _path(r: Retrieval, view, index, found, descents, kept: list[Part]) -> None:
    have: set[str] = set()

    def title(nid: str, layer: int) -> str | None:
        n = view.entities.get(nid) if layer == 0 else view.communities.get(nid)
        return None if n is None else (n.title or nid)

    def add(nid: str, kind: str, role: str, label: str) -> None:
        if nid not in have:
            have.add(nid)
            r.path_nodes.append(PathStep(nid, kind, role, label))

    top = len(found) - 1
    for layer in range(top, -1, -1):
        kind = "entity" if layer == 0 else "community"
        for nid, _ in found[layer]:
            name = title(nid, layer)
            if name is not None:
                add(nid, kind, "entry" if layer == top else "layer", f"layer {layer}: {name}")
    for layer, a, b in descents:
        name = title(b, layer - 1)
        if a in have and name is not None:
            add(b, "entity" if layer == 1 else "community", "layer", f"layer {layer - 1}: {name} (C-HNSW link)")
            r.path_edges.append(PathEdge(a, b, "chnsw", "layer"))
    for p in kept:
        if p.kind == "relationship" and p.ends and all(e in have for e in p.ends):
            add(p.id, "relationship", "bridge", p.title)
            r.path_edges.append(PathEdge(p.id, p.ends[0], "subject", "bridge"))
            r.path_edges.append(PathEdge(p.id, p.ends[1], "object", "bridge"))
        elif p.kind == "chunk":
            via = [e for e in p.via if e in have]
            if via:
                add(p.id, "chunk", "chunk", p.title)
                r.path_edges.extend(PathEdge(p.id, e, "mentions", "chunk") for e in via)


register(ArchRAGStrategy)
