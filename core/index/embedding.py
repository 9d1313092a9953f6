"""The public embedding API: what text a node is embedded as, and embedding the rows a collection still lacks.

Build stages (embed, index, attributed, lexical, augment), entity merges (core/resolution/merge.py re-embeds a kept
entity) and retrieval (BM25 over chunks as they are embedded, core/retrieval/base.py) all use these two, so a node's
text is the same wherever it is embedded or matched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from core.index.vectors import VectorIndex
from core.protocols import Embedder
from core.store import content_id


def node_text_for_embedding(kind: str, title: str, text: str, doc_title: str = "") -> str:
    """What a node is embedded as: chunks with their document title, entities as 'name: description'."""
    if kind == "chunk":
        return f"{doc_title}\n{text}" if doc_title and not text.startswith(doc_title) else text
    if kind == "community":
        return f"{title}\n{text}"
    return f"{title}: {text}" if text and text != title else title


def embed_missing(index: VectorIndex, embedder: Embedder, kind: str, rows: list[tuple[str, str, dict]],
                  batch_size: int, should_stop: Callable[[], bool] = lambda: False) -> Iterator[tuple[int, int]]:
    """Embed (id, text, meta) rows whose text is not in the collection of `kind` yet; yields (done, total).

    Rows go to the embedder sorted by length, so each batch pads to about its own length, and a text that occurs
    more than once (the same sentence in two overlapping chunks) is embedded once. `batch_size` is the embedder's
    batch (settings.embed.batch_size): rows are embedded and stored max(16 batches, 256 rows) at a time, and
    `should_stop` is asked after each such part."""
    have = index.existing(kind)
    todo = []
    for i, text, meta in rows:
        h = content_id(text)
        if have.get(i) != h:
            todo.append((i, text, meta | {"h": h}))
    todo.sort(key=lambda r: (len(r[1]), r[1]))  # equal texts end up next to each other
    step = max(batch_size * 16, 256)
    last: dict[str, np.ndarray] = {}  # vectors of the previous part, for a run of equal texts cut by a boundary
    for off in range(0, len(todo), step):
        part = todo[off : off + step]
        texts = list(dict.fromkeys(t for _, t, _ in part if t not in last))
        got = dict(zip(texts, embedder.embed(texts))) if texts else {}
        vecs = np.vstack([got[t] if t in got else last[t] for _, t, _ in part])
        index.upsert(kind, [i for i, _, _ in part], vecs, [m for _, _, m in part])
        last = got
        yield off + len(part), len(todo)
        if should_stop():
            return
