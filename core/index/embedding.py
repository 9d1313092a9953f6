"""The public embedding API: what text a node is embedded as, and embedding the rows a collection still lacks.

Build stages (embed, index, attributed, lexical, augment), entity merges (core/resolution/merge.py re-embeds a kept
entity) and retrieval (BM25 over chunks as they are embedded, core/retrieval/base.py) all use these, so a node's
text is the same wherever it is embedded or matched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
from sqlmodel import col, select

from core.index.vectors import VectorIndex
from core.models import Document, Edge, Node
from core.protocols import Embedder
from core.store import content_id, json_field


def node_text_for_embedding(kind: str, title: str, text: str, doc_title: str = "") -> str:
    """What a node is embedded as: chunks with their document title (statements too, when `statement_rows` gives
    them one), entities as 'name: description'."""
    if kind in ("chunk", "statement"):
        return f"{doc_title}\n{text}" if doc_title and not text.startswith(doc_title) else text
    if kind == "community":
        return f"{title}\n{text}"
    return f"{title}: {text}" if text and text != title else title


TOPIC_CHARS = 4000  # cap on the text a topic is embedded as


def topic_text(title: str, summary: str, statements: list[str]) -> str:
    """What an HLG topic is embedded as: its title, summary and statements in document order (§3.2, 2: "topic
    embeddings incorporate associated statements"), at most TOPIC_CHARS characters."""
    return "\n".join([title, summary, " ".join(statements)])[:TOPIC_CHARS]


def statement_rows(store, ws_id: int, ids: list[str] | None = None, titled: bool = True
                   ) -> list[tuple[str, str, dict]]:
    """(id, text embedded, meta) of the workspace's statements (only `ids` when given), in id order; `titled` off
    (settings.embed.title_prefix, the title ablation) embeds every statement alone.

    Offline a statement is one sentence of its chunk; the HLG paper's statements are standalone propositions, a
    propositionizer writing into each the name of what "it" or "the economy" refers to. Where a document is about
    one entity (the extract stage marked its subject: a row titled by a name, core/pipeline/stages/extract.py
    `document_subjects`), that referent is the document's title, so its statements are embedded with it, as its
    chunks are; a headline, a file name or no title names no referent, and those statements are embedded alone
    (on multihoprag_small, news statements embedded with their headline lost 8 points of HLG recall@5). The stored
    statement text stays the sentence."""
    with store.session() as s:
        titles: dict[str | None, str] = dict(s.exec(select(Document.id, Document.title)
                                                    .where(Document.workspace_id == ws_id)).all())
        about = set(s.exec(select(Node.document_id).join(Edge, col(Edge.src) == col(Node.id)).where(
            Edge.workspace_id == ws_id, Edge.kind == "mentions", Node.kind == "chunk",
            json_field(s, Edge.data, "subject", as_text=True).is_not(None)).distinct()).all())
        q = select(Node.id, Node.text, Node.document_id).where(Node.workspace_id == ws_id, Node.kind == "statement")
        rows = []
        for off in range(0, len(ids), 500) if ids is not None else [0]:
            part = q.where(col(Node.id).in_(ids[off: off + 500])) if ids is not None else q
            rows += list(s.exec(part).all())
    return [(i, node_text_for_embedding("statement", "", x, titles.get(d, "") if titled and d in about else ""),
             {"document_id": d or ""}) for i, x, d in sorted(rows)]


def embed_missing(index: VectorIndex, embedder: Embedder, kind: str, rows: list[tuple[str, str, dict]],
                  batch_size: int, should_stop: Callable[[], bool] = lambda: False) -> Iterator[tuple[int, int]]:
    """Embed (id, text, meta) rows whose text is not in the collection of `kind` yet; yields (done, total).

    Rows go to the embedder sorted by length, so each batch pads to about its own length, and a text that occurs
    more than once (the same sentence in two overlapping chunks) is embedded once. `batch_size` is the embedder's
    batch (settings.embed.batch_size): rows are embedded and stored max(16 batches, 256 rows) at a time, and
    `should_stop` is asked after each such part."""
    todo = missing_parts(index, kind, rows, batch_size)
    yield from store_parts(index, kind, todo, embedded_parts(embedder, todo.asks), should_stop)


class Missing:
    """The rows a collection lacks, in the parts `embed_missing` stores (`parts`), and the texts each part asks
    the embedder for (`asks`: not those the part before asked, so a run of equal texts is embedded once)."""

    def __init__(self, parts: list[list[tuple[str, str, dict]]], asks: list[list[str]]):
        self.parts, self.asks = parts, asks

    @property
    def rows(self) -> int:
        return sum(len(p) for p in self.parts)


def missing_parts(index: VectorIndex, kind: str, rows: list[tuple[str, str, dict]], batch_size: int) -> Missing:
    """The rows of `rows` whose text the collection of `kind` lacks, cut as `embed_missing` embeds them."""
    have = index.existing(kind)
    todo = []
    for i, text, meta in rows:
        h = content_id(text)
        if have.get(i) != h:
            todo.append((i, text, meta | {"h": h}))
    todo.sort(key=lambda r: (len(r[1]), r[1]))  # equal texts end up next to each other
    step = max(batch_size * 16, 256)
    parts = [todo[off : off + step] for off in range(0, len(todo), step)]
    asks: list[list[str]] = []
    for part in parts:
        before = set(asks[-1]) if asks else set()
        asks.append(list(dict.fromkeys(t for _, t, _ in part if t not in before)))
    return Missing(parts, asks)


def store_parts(index: VectorIndex, kind: str, todo: Missing, vectors: Iterator[np.ndarray],
                should_stop: Callable[[], bool] = lambda: False) -> Iterator[tuple[int, int]]:
    """Store each part of `todo` with the vectors of its asks (one array per part, in order); yields (done, total)."""
    last: dict[str, np.ndarray] = {}
    done = 0
    for part, texts, got_vecs in zip(todo.parts, todo.asks, vectors):
        got = dict(zip(texts, got_vecs))
        vecs = np.vstack([got[t] if t in got else last[t] for _, t, _ in part])
        index.upsert(kind, [i for i, _, _ in part], vecs, [m for _, _, m in part])
        last = got
        done += len(part)
        yield done, todo.rows
        if should_stop():
            return


def embedded_parts(embedder: Embedder, asks: list[list[str]]) -> Iterator[np.ndarray]:
    """The vectors of each list of texts, in order: one `embed` call after another, or, for an embedder that runs
    its batches elsewhere (`embed_parts`: a Dask cluster's workers), the next parts embedded while this one is
    stored."""
    many = getattr(embedder, "embed_parts", None)
    if many is not None:
        yield from many(asks)
        return
    for texts in asks:
        yield embedder.embed(texts) if texts else np.zeros((0, embedder.dim), dtype=np.float32)
