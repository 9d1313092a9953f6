"""What a build stage receives and yields: the leaf of the build layer (it imports no stage and no runner).

A stage is a plain function `stage(ctx: BuildContext) -> Iterator[Progress]` (the `Stage` protocol). It is
re-runnable: each one skips the units a previous run finished (checkpoints, existing vectors, existing reports), so
a stopped or killed build resumes at the first unfinished unit. `core/pipeline/runner.py` runs the stages in order and
records every `Progress` in the database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from core.config import Settings
from core.ids import IdScope, scope_of
from core.index.vectors import VectorIndex
from core.models import Workspace
from core.pipeline.engine import INLINE, Engine
from core.pipeline.failures import UnitFailures
from core.pipeline.tasks import EngineEmbedder, EngineTagger, Parts, extractor_line
from core.protocols import Embedder, LanguageBackend
from core.store import Store

OFFLINE_UNITS_PER_TASK = 64  # the offline backend's units sent to a cluster in one task (`model_engine`)


@dataclass
class Progress:
    """One update of a running stage: `done` of `total` units, what it is doing, and its counts so far."""

    done: int
    total: int
    message: str = ""
    counts: dict = field(default_factory=dict)


@dataclass
class BuildContext:
    """Everything a stage works with: the store and workspace, the settings, the language backend, the embedder and
    the workspace's vector index; `should_stop` turns true when the user cancels the run; `failures` records the
    units whose language call failed after its retries (core/pipeline/failures.py)."""

    store: Store
    ws: Workspace
    settings: Settings
    backend: LanguageBackend
    embedder: Embedder
    index: VectorIndex
    should_stop: Callable[[], bool] = lambda: False
    engine: Engine = INLINE  # where the stages' units run (core/pipeline/engine.py): this process, or a Dask cluster
    failures: UnitFailures = field(init=False)

    def __post_init__(self) -> None:
        self._parts: Parts | None = None
        self.failures = UnitFailures(self.store, self.ws_id, self.settings.backend.retries + 1)

    @property
    def ws_id(self) -> int:
        """The workspace's row id (a stage works on a stored workspace, which always has one)."""
        assert self.ws.id is not None
        return self.ws.id

    @property
    def parts(self) -> Parts:
        """The backend and embedder as the engine's tasks reach them (core/pipeline/tasks.py)."""
        if self._parts is None:
            runtime = self.index.writer.runtime if self.index.writer is not None else ""
            self._parts = Parts(self.settings, self.backend, self.embedder, runtime)
        return self._parts

    @property
    def model_engine(self) -> Engine:
        """Where a unit that asks the language backend runs: the build's engine, a unit per task for a model (the
        calls wait on a server), 64 per task for the offline backend's extractive reports, summaries and topics,
        which take less than sending them one by one (on a 2-worker cluster the 1M-token build's offline reports,
        one per task, took 86 s for a third of them, in this process 17 s for all)."""
        return self.engine if self.backend.name != "offline" else self.engine.batched(OFFLINE_UNITS_PER_TASK)

    @property
    def summary_engine(self) -> Engine:
        """Where HiRAG's summary entities are made: on the engine with a model; offline in this process, in order,
        since the offline backend names each cluster with word readings it counts over the clusters before it
        (core/extract/nouns.py `NounReader`): on two workers each would count only its own (a 250k-token build on a
        cluster then had 4 summary layers where the same build in one process had 5)."""
        return self.engine if self.backend.name != "offline" else INLINE

    def use_engine(self, engine: Engine) -> None:
        """Run the stages' units on `engine`; on a cluster the embedder's batches run there too, and the offline
        backend's spaCy work (the extractor's line, the part-of-speech readings of HiRAG's summary entities)."""
        parts = self.parts  # made first: it holds the build's own embedder, which the workers' copy loads as
        self.engine = engine
        if engine.distributed and not isinstance(self.embedder, EngineEmbedder):
            self.embedder = EngineEmbedder(engine, parts, self.embedder)
        elsewhere = getattr(self.backend, "parse_elsewhere", None)
        if engine.distributed and elsewhere is not None:
            elsewhere(engine.submit(extractor_line, parts).result(), EngineTagger(engine))

    @property
    def ids(self) -> IdScope:
        """Makes the workspace's ids (core/ids.py)."""
        return scope_of(self.ws)


class Stage(Protocol):
    """A build stage: yields Progress while it works, resumable after a stop (see the module docstring)."""

    def __call__(self, ctx: BuildContext) -> Iterator[Progress]: ...


@dataclass
class JobPlan:
    """A job's steps (promote, what-if run, merge decision; planned in core/quality, run by core/worker.py)."""

    steps: list[tuple[str, str, Stage]]  # (name, label, stage) in order, as runner.stages()
    changes: frozenset[str] = frozenset()  # steps that change the graph (see the module doc)
    label: str = ""  # what the page says is running, e.g. "Promote variant 'res-2'"
    done_message: str = "Job finished"


class Cancelled(Exception):
    """Raised by the runner when the user stopped the run."""


@dataclass
class Event:
    """What the runner yields per update of a run (the CLI prints these; the app reads the rows instead)."""

    run_id: int
    stage: str
    status: str  # running, done, failed, cancelled
    done: int
    total: int
    message: str
    counts: dict
