"""ArchRAG adaptive filtering-based generation (archrag.txt §3.2.2, Eq. 3-4, the filter prompt of Figure 10).

"We first prompt the LLM to extract and generate an analysis report from the retrieved information, identifying
the parts that are most relevant to answering the query and assigning relevance scores to these reports. Then,
all analysis reports are integrated and sorted, ensuring that the most relevant content is used to summarize the
final response to the query, with any content exceeding the text limit being truncated."

    A_i = LLM(P_filter || R_i)        (Eq. 3: one analysis per layer i)
    Output = LLM(P_merge || Sort({A_0, ..., A_n}))        (Eq. 4: core/answer.py merges)

* With a model (`llm_layer`): one call per layer, the backend task `rate_points` (Figure 10's filter prompt:
  key points rated 0-100, "I don't know" = 0) over R_i written as a data table, one numbered row per item. A
  point's score is read as relevance 0-1. It belongs to the rows it cites ("[Data: ... (2, 5)]", the form the
  paper's prompt asks for) or else to the rows sharing the most content words with it; a point sharing none
  belongs to the whole layer.
* Offline (`extractive_layer`), deterministically: every sentence of R_i is a point rated by the cosine of its
  embedding to the question; a sentence that several items of the layer contain is one point of them all.
  Sentence vectors: descriptions and reports quote statements (behind "Name (TYPE): " / "A — p — B: " labels, or
  cut with "…"), so such a sentence is read as that statement, with its stored vector and its chunk. Other
  sentences are embedded (cached on the Resources; at most MAX_EMBEDDED new ones per question, the rest rated
  with their item's stored vector).
* `adaptive_filter`: points rated 0 are dropped (the published code keeps score > 0), the rest sorted by score
  and kept until the next would pass the token budget (the published code's reduce step).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field

import numpy as np
from sqlmodel import col, select

from core.algorithms.similarity import dots
from core.ingest import count_tokens
from core.models import Edge, Node
from core.retrieval.archrag.search import ChnswCache, Item
from core.retrieval.base import Resources
from core.text import content_words

SENTENCE_CACHE = 50_000  # cached sentence vectors per Resources before the cache is emptied
MAX_EMBEDDED = 64  # sentences embedded per question at most; the rest take their item's stored vector
_CITE = re.compile(r"\[Data:[^\]]*\]", re.I)


@dataclass
class Point:
    """One rated key point of a layer's analysis A_i."""

    layer: int
    items: list[int]  # indices into R_layer of the items it comes from (its text is shown with the first)
    text: str
    score: float  # relevance 0-1
    chunks: list[str] = field(default_factory=list)  # offline: the chunks the sentence was taken from


@dataclass
class Statements:
    """The workspace's statements: offline, entity and relationship descriptions and extractive reports are made
    of them, so most sentences have a stored vector and a chunk."""

    by_text: dict[str, str]  # normalized text -> a statement id
    texts: list[str]  # sorted texts (prefix search)
    chunks_of: dict[str, list[str]]  # normalized text -> chunks it was taken from


def load_statements(res: Resources, cache: ChnswCache) -> Statements:
    """The statements with the chunk each was taken from, loaded once per Resources."""
    with cache.lock:
        if cache.statements is not None:
            return cache.statements
        with res.store.session() as s:
            rows = s.exec(select(Node.id, Node.text, Edge.dst).join(Edge, col(Edge.src) == Node.id).where(
                Node.workspace_id == res.ws.id, Node.kind == "statement", Edge.workspace_id == res.ws.id,
                Edge.kind == "derived_from").order_by(Node.id)).all()
        by_text: dict[str, str] = {}
        chunks_of: dict[str, list[str]] = {}
        for sid, text, cid in rows:
            key = " ".join((text or "").split())
            if key:
                by_text.setdefault(key, sid)
                chunks_of.setdefault(key, []).append(cid)
        cache.statements = st = Statements(by_text, sorted(by_text), chunks_of)
        return st


def readings(sentence: str, title: str = "") -> list[str]:
    """The sentence, then without its "Name (TYPE): " / "A — p — B: " labels, a doubled leading name ("Denis
    Latin Denis Latin is ...") or the item's own title in front: how descriptions and reports quote a statement."""
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


def find_statement(sentence: str, title: str, st: Statements) -> str | None:
    """The text of the statement a sentence quotes: equal text, or for a text cut with "…" the one it starts."""
    for r in readings(sentence, title):
        if r in st.by_text:
            return r
        if r.endswith("…") and len(r) > 20:
            prefix = r[:-1].rstrip()
            i = bisect_left(st.texts, prefix)
            if i < len(st.texts) and st.texts[i].startswith(prefix):
                return st.texts[i]
    return None


def _embed(res: Resources, cache: ChnswCache, texts: list[str]) -> tuple[dict[str, np.ndarray], int]:
    """Vectors of `texts`, embedding only those not cached yet; returns (vectors, number embedded). The cache is
    shared by the sessions that ask at once: read and written under its lock, the model called outside it."""
    with cache.lock:
        have = {t: cache.sentence_vecs[t] for t in texts if t in cache.sentence_vecs}
    missing = [t for t in dict.fromkeys(texts) if t not in have]
    if missing:
        new = dict(zip(missing, np.asarray(res.embedder.embed(missing), dtype=np.float32)))
        with cache.lock:
            if len(cache.sentence_vecs) + len(missing) > SENTENCE_CACHE:
                cache.sentence_vecs.clear()
            cache.sentence_vecs.update(new)
        have.update(new)
    return {t: have[t] for t in texts}, len(missing)


def fill_vectors(res: Resources, cache: ChnswCache, items: list[Item]) -> tuple[int, int]:
    """Give every sentence of every item a vector and its backing chunks: a sentence quoting a statement is read
    as it (labels and "…" cuts gone, duplicates merged) and takes its stored vector and chunks; the rest are
    embedded, at most MAX_EMBEDDED new ones (the overflow takes its item's stored vector, or is dropped when the
    item has none). Returns (sentences with a stored vector, sentences embedded)."""
    st = load_statements(res, cache)
    for it in items:
        it.sentences = list(dict.fromkeys(find_statement(x, it.title, st) or x for x in it.sentences))
        it.backing = [st.chunks_of.get(x, []) for x in it.sentences]
    stored = res.index.vectors("statement", list(dict.fromkeys(
        st.by_text[x] for it in items for x in it.sentences if x in st.by_text)))
    vec = {x: stored[st.by_text[x]] for it in items for x in it.sentences if st.by_text.get(x) in stored}
    late = set(list(dict.fromkeys(x for it in items for x in it.sentences if x not in vec and
                                  x not in cache.sentence_vecs))[MAX_EMBEDDED:])
    own: dict[str, np.ndarray] = {}
    if late:  # too many new sentences (a model-built workspace): the overflow takes its item's stored vector
        for kind in ("entity", "community"):
            own.update(res.index.vectors(kind, [it.id for it in items if it.kind == kind and late & set(it.sentences)]))
        for it in items:
            keep = [x not in late or it.id in own for x in it.sentences]
            it.backing = [b for b, k in zip(it.backing, keep) if k]
            it.sentences = [x for x, k in zip(it.sentences, keep) if k]
    embedded_vecs, embedded = _embed(res, cache, [x for it in items for x in it.sentences
                                                  if x not in vec and x not in late])
    vec.update(embedded_vecs)
    for it in items:
        if it.sentences:
            it.vecs = np.vstack([own[it.id] if x in late else vec[x] for x in it.sentences])
    return sum(1 for it in items for x in it.sentences if st.by_text.get(x) in stored), embedded


def extractive_layer(layer: int, items: list[Item], q: np.ndarray) -> list[Point]:
    """Offline stand-in for Eq. 3 on R_layer: each distinct sentence of the layer, rated by its cosine to the
    question, from every item that holds it (backed by the chunks it was quoted from)."""
    by_text: dict[str, Point] = {}
    for i, it in enumerate(items):
        if it.vecs is None:
            continue
        sims = dots(it.vecs, q).tolist()
        for j, (x, sim) in enumerate(zip(it.sentences, sims)):
            chunks = it.backing[j] if it.backing else []
            p = by_text.get(x)
            if p is None:
                by_text[x] = Point(layer, [i], x, float(sim), list(chunks))
            elif i not in p.items:
                p.items.append(i)
                p.chunks.extend(c for c in chunks if c not in p.chunks)
    return list(by_text.values())


def layer_material(items: list[Item]) -> str:
    """R_i as the filter prompt's data table: one numbered row per item."""
    rows = ["id|kind|title|content"]
    rows += [f"{n}|{it.kind}|{it.title}|{it.content()}" for n, it in enumerate(items, start=1)]
    return "\n".join(rows)


def attribute(text: str, items: list[Item]) -> list[int]:
    """The rows a model's point comes from: those it cites ("[Data: Entities (2, 5)]"), else those sharing the
    most content words with it, else (sharing none) every row of the layer."""
    cited = [int(n) - 1 for m in _CITE.findall(text) for n in re.findall(r"\d+", m)]
    cited = [i for i in dict.fromkeys(cited) if 0 <= i < len(items)]
    if cited:
        return cited
    words = set(content_words(text))
    shared = [len(words & set(content_words(f"{it.title} {it.content()}"))) for it in items]
    best = max(shared, default=0)
    return [i for i, n in enumerate(shared) if n == best] if best else list(range(len(items)))


def llm_layer(llm, question: str, layer: int, items: list[Item]) -> list[Point]:
    """Eq. 3 with a model: the filter prompt (`rate_points`) over R_layer in one call; scores 0-100 -> 0-1."""
    if not items:
        return []
    return [Point(layer, attribute(p.description, items), p.description, p.score / 100)
            for p in llm.rate_points(question, layer_material(items))]


def adaptive_filter(points: list[Point], max_tokens: int) -> tuple[list[Point], int]:
    """Eq. 4's Sort and text limit: points rated 0 dropped, the rest sorted by relevance and kept until the next
    would pass `max_tokens` (count_tokens); a text already kept is skipped. Returns (kept best first, tokens)."""
    kept: list[Point] = []
    seen: set[str] = set()
    used = 0
    for p in sorted((p for p in points if p.score > 0), key=lambda p: (-p.score, p.layer, p.items, p.text)):
        if p.text in seen:
            continue
        n = count_tokens(p.text)
        if used + n > max_tokens:
            break
        kept.append(p)
        seen.add(p.text)
        used += n
    return kept, used
