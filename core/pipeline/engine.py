"""Where a stage's units run: Dask distributed.

A stage hands its units to `Engine.map(fn, items, *args)`. `fn` is a top-level function of core/pipeline/tasks.py: it
takes text in and gives results back, and writes no graph row and no vector. The results come back in the order of
`items`, so the run's lease holder, its one writer, stores them in the same order whichever worker made them and
whenever: the graph does not depend on the cluster. At most `window` units are in flight, so a stop lands after a
few units and a killed worker costs only its own.

Three places to run, one interface:

* in this process (`INLINE`): CPU-bound units one after another in the caller's thread, units that wait on a model
  server on `window` threads. Stage tests and jobs use it, a workspace under STRATA_DASK_MIN_TOKENS builds on it,
  and it is the single-process build a distributed one is compared against;
* a `LocalCluster` of worker processes sized to the machine (`local_engine`): what `core worker` and `core build`
  start when no cluster is named (never inside the Streamlit process);
* a running cluster (`STRATA_DASK_SCHEDULER=tcp://host:8786`, `attach`): `dask scheduler` on one machine, `dask
  worker` on others with the same install (docs/DEPLOY.md).

CPU-bound units (offline extraction, embedding) ask for the resource `cpu`, which a local worker has one of, so
each core runs one at a time; units that wait on a model server run on every thread of a worker, bounded across the
whole cluster by one semaphore per model host (core/backends/hosts.py `cluster_slot`). The offline backend's quick
extractive reports and summaries go to a cluster many to a task (`batched`; core/pipeline/context.py `model_engine`),
but for HiRAG's summary entities, which it names with word readings counted over the clusters before (`summary_engine`).
Work a later stage will want can be sent `ahead` at a low priority, so the cluster's idle cores do it while the
lease holder runs a global step (core/pipeline/beside.py).
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)
SCHEDULER_ENV = "STRATA_DASK_SCHEDULER"
WORKERS_ENV = "STRATA_DASK_WORKERS"  # processes of the local cluster (default: the machine's cores)
MIN_TOKENS_ENV = "STRATA_DASK_MIN_TOKENS"
MIN_TOKENS = 100_000  # a smaller workspace builds in this process unless STRATA_DASK_WORKERS says otherwise
TASK_THREADS_ENV = "STRATA_TASK_THREADS"  # set in local workers: the embedder runs one forward at a time there
CPU = {"cpu": 1}
# a local worker keeps to one core: its embedder runs one forward at a time, and OpenMP and the BLAS libraries start
# one thread per calling thread (torch's own setting is per thread, and Dask runs a unit on a thread of its own)
ONE_CORE = {TASK_THREADS_ENV: "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
# Dask's nannies start their workers with MALLOC_TRIM_THRESHOLD_=65536 (distributed.nanny.pre-spawn-environ), which
# makes glibc hand memory back after almost every free: the embedder's forwards then took 42.2 s where the same texts
# take 24.6 s on one thread without it. The workers we start keep glibc's own threshold; the thread caps stay.
QUIET = {"distributed.nanny.pre-spawn-environ": {k: v for k, v in ONE_CORE.items() if k != TASK_THREADS_ENV},
         "distributed.worker.profile.enabled": False}


class Engine:
    """Runs a stage's units: in this process (`client` None) or on a Dask cluster."""

    def __init__(self, client: Any = None, cluster: Any = None, where: str = "this process", batch: int = 1):
        self.client, self.cluster, self.where = client, cluster, where
        self.batch = batch  # units per task on a cluster (`batched`)

    def batched(self, units: int) -> Engine:
        """This engine sending `units` units per task to a cluster (quick units, such as the offline backend's
        extractive summaries, whose sending would cost more than their work one by one); `window` is then the
        cluster's own (two tasks per thread). In this process nothing changes."""
        if self.client is None or units <= 1:
            return self
        return Engine(self.client, self.cluster, self.where, batch=units)  # a view: the build closes its engine

    @property
    def distributed(self) -> bool:
        return self.client is not None

    def workers(self) -> int:
        """How many workers run units now (1 in this process)."""
        if self.client is None:
            return 1
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def describe(self) -> str:
        """What the Build page and `core stats` say: "this process", "local cluster, 2 workers", "tcp://…, 3 workers"."""
        if self.client is None:
            return self.where
        n = self.workers()
        return f"{self.where}, {n} worker{'s' if n != 1 else ''}"

    def map(self, fn: Callable[..., Any], items: Iterable[Any], *args: Any, cpu: bool = False,
            window: int | None = None) -> Iterator[Any]:
        """fn(item, *args) for each item, yielded in the order of `items`. At most `window` units are in flight (on a
        cluster, default twice the workers' threads; in this process, units that wait on a server (not `cpu`) run on
        `window` threads, default one); `cpu`: the unit keeps a core busy (one per core at a time)."""
        if self.client is None:
            yield from _in_process(fn, items, args, 1 if cpu else (window or 1))
            return
        if self.batch > 1:
            groups = _groups(items, self.batch)
            for got in self._tasks(_each, groups, (fn, *args), cpu, None):
                yield from got
            return
        yield from self._tasks(fn, items, args, cpu, window)

    def _tasks(self, fn: Callable[..., Any], items: Iterable[Any], args: tuple, cpu: bool,
               window: int | None) -> Iterator[Any]:
        shared = self._shared(args)
        limit = window or max(2, 2 * self._threads())
        pending: deque = deque()
        extra = self._resources(cpu)
        try:
            for item in items:
                pending.append(self.client.submit(fn, item, *shared, pure=False, **extra))
                if len(pending) >= limit:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:  # a stop or an error: the units not taken back are not wanted any more
            for fut in pending:
                fut.cancel()

    def ahead(self, fn: Callable[..., Any], items: Iterable[Any], *args: Any, cpu: bool = False) -> Ahead:
        """fn(item, *args) for every item, all sent now at a priority below every `map`; `Ahead.results()` takes them
        back in order. Only on a cluster. They run on all workers but one (task i waits for task i - (workers - 1)):
        the lease holder keeps its core and a stage's own units find a free worker (HLG's topics sent ahead to both
        workers of a 2-core machine during HiRAG's layers made that stage 42 s longer, to one 20 s)."""
        assert self.client is not None, "ahead() needs a cluster"
        shared = self._shared(args)
        extra = self._resources(cpu)
        lanes = max(1, self.workers() - 1)
        futures: list = []
        for item in items:
            before = futures[-lanes] if len(futures) >= lanes else None
            futures.append(self.client.submit(_after, before, fn, item, *shared, pure=False, priority=-10, **extra))
        return Ahead(futures)

    def submit(self, fn: Callable[..., Any], *args: Any, cpu: bool = False) -> Pending:
        """fn(*args) as one task, a global step taken whole (a Leiden run, an HNSW graph): on a cluster sent now, so
        the caller goes on with other work while a worker runs it; in this process run when its result is asked."""
        if self.client is None:
            return Pending(lambda: fn(*args))
        fut = self.client.submit(fn, *args, pure=False, **self._resources(cpu))
        return Pending(fut.result, fut.cancel)

    def _shared(self, args: tuple) -> list:
        return [self.client.scatter(a, broadcast=True) if _large(a) else a for a in args]

    def _resources(self, cpu: bool) -> dict:
        return {"resources": CPU} if cpu and self.cluster is not None else {}

    def _threads(self) -> int:
        info = self.client.scheduler_info().get("workers", {}) if self.client is not None else {}
        return max(1, sum(int(w.get("nthreads", 1)) for w in info.values()))

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        self.client = self.cluster = None


INLINE = Engine()


class Pending:
    """The result of `Engine.submit`: `result()` waits for it (or computes it, in this process); `cancel()`."""

    def __init__(self, get: Callable[[], Any], cancel: Callable[[], Any] = lambda: None):
        self._get, self._cancel = get, cancel

    def result(self) -> Any:
        return self._get()

    def cancel(self) -> None:
        self._cancel()


class Ahead:
    """Tasks sent ahead of their use (`Engine.ahead`): their results in order, or all cancelled."""

    def __init__(self, futures: list):
        self.futures = futures

    def results(self) -> Iterator[Any]:
        while self.futures:
            yield self.futures.pop(0).result()

    def cancel(self) -> None:
        for fut in self.futures:
            fut.cancel()
        self.futures = []


def _after(before: Any, fn: Callable[..., Any], item: Any, *args: Any) -> Any:
    """fn(item, *args), run once the task whose result is `before` is done (`Engine.ahead`)."""
    return fn(item, *args)


def _each(items: list, fn: Callable[..., Any], *args: Any) -> list:
    """A batched task: fn(item, *args) for each item, in order."""
    return [fn(item, *args) for item in items]


def _groups(items: Iterable[Any], size: int) -> Iterator[list]:
    group: list = []
    for item in items:
        group.append(item)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group


def _in_process(fn: Callable[..., Any], items: Iterable[Any], args: tuple, threads: int) -> Iterator[Any]:
    """The units in this process, in order: one after another, or on `threads` threads (units that wait on a model
    server), at most `threads` ahead of the one yielded."""
    if threads <= 1:
        for item in items:
            yield fn(item, *args)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="unit") as pool:
        pending: deque = deque()
        try:
            for item in items:
                pending.append(pool.submit(fn, item, *args))
                if len(pending) >= threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for fut in pending:
                fut.cancel()


def _large(value: Any) -> bool:
    """An argument worth sending to every worker once rather than with every unit (a list or dict of many items)."""
    return isinstance(value, (list, dict)) and len(value) > 64


def local_engine(workers: int | None = None, threads: int = 1) -> Engine:
    """A LocalCluster of `workers` processes (default STRATA_DASK_WORKERS, else one per core) of `threads` threads
    each, without a dashboard; each worker has one `cpu` resource."""
    import dask
    from distributed import Client, LocalCluster

    dask.config.set(QUIET)  # read by the workers the cluster starts
    n = workers or int(os.environ.get(WORKERS_ENV) or 0) or _cores()
    cluster = LocalCluster(n_workers=n, threads_per_worker=max(1, threads), processes=True, dashboard_address=None,
                           resources=CPU, silence_logs=logging.WARNING, env=ONE_CORE)
    return Engine(Client(cluster), cluster, "local cluster")


def attach(address: str) -> Engine:
    """The running cluster whose scheduler listens at `address` (tcp://host:8786)."""
    from distributed import Client

    try:
        client = Client(address, timeout="20s")
    except OSError as exc:
        raise OSError(f"cannot reach the Dask scheduler at {address} ({exc}); start it with `dask scheduler` or unset "
                      f"{SCHEDULER_ENV} to build on a local cluster") from None
    return Engine(client, None, address)


def open_engine(calls: int = 1, tokens: int | None = None) -> Engine:
    """The engine of a build process (`core worker`, `core build`): the cluster STRATA_DASK_SCHEDULER names, else a
    local cluster of processes, one per core (STRATA_DASK_WORKERS=N: N of them; 0: the units run in this process).
    Unless N is set, a workspace of fewer than STRATA_DASK_MIN_TOKENS tokens (`tokens`, its documents' text at four
    characters a token) runs its units in this process: a local cluster's workers each load the extractor and the
    embedder first (about 10 s on two busy cores), which a small build never wins back (docs/BENCHMARKS.md).
    `calls`: the model calls the build may have in flight (settings.backend.parallel_calls), shared out as threads
    of the local workers (1 for an offline build)."""
    address = os.environ.get(SCHEDULER_ENV, "").strip()
    if address:
        return attach(address)
    want = os.environ.get(WORKERS_ENV, "").strip()
    if want == "0":
        return Engine(where="this process")
    least = int(os.environ.get(MIN_TOKENS_ENV, "").strip() or MIN_TOKENS)
    if not want.isdigit() and tokens is not None and tokens < least:
        return Engine(where=f"this process (under {least:,} tokens)")
    n = int(want) if want.isdigit() else _cores()
    return local_engine(n, threads=max(1, -(-calls // n)))


@contextmanager
def engine_for(settings: Any, store: Any, ws_id: int) -> Iterator[Engine]:
    """The engine of a build process for workspace `ws_id` (`open_engine`), closed (with the cluster it started, if
    any) when the body ends; core/pipeline/factory.py `make_context(..., engine=)` runs a build's units on it. A
    model-backed build shares its calls in flight out over the workers."""
    engine = open_engine(1 if settings.backend.kind == "offline" else settings.backend.parallel_calls,
                         store.text_chars(ws_id) // 4)
    try:
        yield engine
    finally:
        engine.close()


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)
