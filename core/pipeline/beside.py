"""Vectors embedded while a stage whose own work keeps one core runs: in the build's own process on a second thread,
on a Dask cluster (core/pipeline/engine.py) by the workers, sent `ahead` below the stage's own tasks (no thread).

The extract stage's offline parser and most of the augment stage (HNSW, Leiden, SQL writes) run on one thread; on
a two-core machine the other core would idle. `embedded_beside` fills it with an embedding job a later stage would
run anyway: the chunks, then the statements written so far, beside `extract` (for `embed`), the community reports
beside `augment` (for `index`). A statement whose embedded text changes later (its document's subject mark comes with
a later chunk, or a merge moves it) is embedded again by the later stage, as any row whose text is not the stored one.

A vector is the same whichever thread or batch embeds it (core/backends/minilm_runtime.py: each text padded to its
own width, every forward of a width of one fixed shape), and `embed_missing` skips what is stored with the same text,
so the later stage finds these rows done and the build's vectors are bit for bit those it would have made alone. What the thread did not store (the stage ended
first, a stop, a failure: logged, not raised) the later stage embeds and reports.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from core.index.embedding import embed_missing, missing_parts, store_parts
from core.pipeline.context import BuildContext
from core.pipeline.tasks import EngineEmbedder
from core.protocols import Embedder

log = logging.getLogger(__name__)
# texts per embedder call, so the stage can take the thread back soon: a few forwards (a forward holds 512 tokens on
# torch, 256 on onnxruntime: 16 statements of about 32 tokens, 2 chunks of 256), half a second at most
ROWS_PER_CALL = 32

Rows = list[tuple[str, str, dict]]  # (id, text embedded, meta), as embed_missing takes them


class Beside:
    """The thread of `embedded_beside`: `paused()` holds it while the stage embeds on every core itself."""

    def __init__(self) -> None:
        self._go = threading.Event()
        self._go.set()
        self.done = threading.Event()

    @contextmanager
    def paused(self) -> Iterator[None]:
        self._go.clear()
        try:
            yield
        finally:
            self._go.set()

    def wait_turn(self) -> None:
        while not self._go.wait(0.1) and not self.done.is_set():
            pass

    def stop(self) -> None:
        """The stage ended: finish the part in hand, then stop (a held thread is let go to see it)."""
        self.done.set()
        self._go.set()


class _OneForward:
    """An embedder fed a few texts per call, so its runtime runs one forward at a time (one core); each call
    first waits while the stage holds the thread (`Beside.paused`)."""

    def __init__(self, inner: Embedder, turn: Beside):
        self.inner, self.turn = inner, turn
        self.name, self.dim = inner.name, inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        parts = []
        for i in range(0, len(texts), ROWS_PER_CALL):
            self.turn.wait_turn()
            parts.append(self.inner.embed(texts[i : i + ROWS_PER_CALL]))
        return np.vstack(parts) if parts else np.zeros((0, self.dim), dtype=np.float32)


def thread_name(kind: str) -> str:
    return f"embed-{kind}-beside"


@contextmanager
def embedded_beside(ctx: BuildContext, *jobs: tuple[str, Callable[[BuildContext], Rows]],
                    ahead: bool = True) -> Iterator[Beside]:
    """While the body runs, a second thread embeds, job after job, the `rows(ctx)` (read when the job starts) the
    collection `kind` lacks. When the body ends (or raises), the part in hand (at most 256 rows) is finished and
    stored, then the thread stops and is joined. On a cluster the rows are sent `ahead` instead (False: not at all,
    where the stage's own units keep every worker busy)."""
    turn = Beside()
    if ctx.engine.distributed:  # `ahead` False: the stage's own units keep the cluster's cores busy
        with _sent_ahead(ctx, jobs if ahead else ()):
            yield turn
        return

    def run() -> None:
        for kind, rows in jobs:
            try:
                for _ in embed_missing(ctx.index, _OneForward(ctx.embedder, turn), kind, rows(ctx), 1,
                                       lambda: turn.done.is_set() or ctx.should_stop()):
                    pass
            except Exception as exc:  # noqa: BLE001 - the later stage embeds these rows again and reports the error
                log.warning("embedding %s vectors beside the stage stopped: %s: %s", kind, type(exc).__name__, exc)
                return
            if turn.done.is_set() or ctx.should_stop():
                return

    worker = threading.Thread(target=run, name=thread_name(jobs[0][0]), daemon=True)
    worker.start()
    try:
        yield turn
    finally:
        turn.stop()
        worker.join()


class EmbedAhead:
    """Rows whose vectors a later step stores, sent now to a cluster's workers below the stages' own tasks
    (`send`), so cores a stage leaves idle embed them; `store()` stores what came back, `cancel()` drops the rest.
    In the build's own process nothing is sent: the later step embeds the rows itself."""

    def __init__(self, ctx: BuildContext):
        self.ctx = ctx
        self.sent: list = []

    def send(self, kind: str, rows: Rows) -> None:
        embedder = self.ctx.embedder
        if isinstance(embedder, EngineEmbedder) and rows:
            todo = missing_parts(self.ctx.index, kind, rows, self.ctx.settings.embed.batch_size)
            self.sent.append((kind, todo, embedder.ahead(todo.asks)))

    def store(self) -> None:
        """Store every part that came back (a stop stores nothing more); errors are logged, not raised: the later
        step embeds those rows again and reports them."""
        while self.sent:
            kind, todo, vectors = self.sent.pop(0)
            if self.ctx.should_stop():
                vectors.cancel()
                continue
            try:
                for _ in store_parts(self.ctx.index, kind, todo, vectors.vectors, self.ctx.should_stop):
                    pass
            except Exception as exc:  # noqa: BLE001 - see the docstring
                log.warning("embedding %s vectors ahead stopped: %s: %s", kind, type(exc).__name__, exc)
            vectors.cancel()

    def cancel(self) -> None:
        for _, _, vectors in self.sent:
            vectors.cancel()
        self.sent = []


@contextmanager
def _sent_ahead(ctx: BuildContext, jobs: tuple[tuple[str, Callable[[BuildContext], Rows]], ...]) -> Iterator[None]:
    """On a cluster: each job's missing rows (read now) sent ahead (`EmbedAhead`), stored when the body ends; a stop
    or an error in the body cancels them (the later stage embeds them then)."""
    ahead = EmbedAhead(ctx)
    for kind, rows in jobs:
        ahead.send(kind, rows(ctx))
    try:
        yield
    except BaseException:
        ahead.cancel()
        raise
    ahead.store()
