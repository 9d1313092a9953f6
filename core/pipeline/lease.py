"""Who runs a build or job when several workers (and app users) share one database: claims and leases.

A worker *claims* a run with one conditional UPDATE and holds it while its *lease* lasts:

* claim: `UPDATE buildrun SET worker=:token, pid, heartbeat=now, status='running' (a queued run) WHERE id=:id AND
  <claimable>`, the claim held only when exactly one row changed. A run is claimable when it is unfinished
  (queued, running, cancelling), nobody holds it or its holder's heartbeat is older than the lease (`lease_s`,
  the threshold `runs.active_run` uses too), and it is its workspace's newest run (an older unfinished run was
  superseded by a newer one, see `runs.insert_run`). Claims and inserts of one workspace first take a write lock
  on its `workspace` row, so they are serialized on SQLite and on PostgreSQL alike.
* lease: the holder renews the heartbeat every min(5 s, lease/3) from a thread, `WHERE id AND worker=:token` and the
  run still unfinished. No row changed: the lease is lost (another worker took the run over after a stall, or a
  newer run superseded it); `should_stop` turns true, the runner stops at the next unit and writes nothing more.
* every write of the holder (progress, stage rows, the final status) carries the same condition, so a worker
  that lost its lease never overwrites its successor's rows; the final status never overwrites a stop request
  made in between (`finish`).
* every data write of the run (nodes, edges, communities, reports, checkpoints, artifacts: any transaction its
  stages commit) is conditional on the lease in the same transaction: while `guard()` is on, a commit on the
  store's engine from the run's context first checks that the lease is still held (PostgreSQL: `SELECT … FOR
  UPDATE` of the run's row, so a claim waits for the commit; SQLite: the committing transaction holds the database's
  write lock already) and rolls back with `LeaseLost` when it is not. Vector writes happen inside `holding()`, the
  same check in a transaction that stays open around the write. A worker stopped (SIGSTOP) past its lease and
  resumed after another finished its run changes no row.

Times are the database's clock (`Store.now`, `store.db_now`), each run's lease is its own row's `lease_s`, and a
holder whose process is gone on this host is dead at once (core/liveness.py), whatever its last heartbeat.
"""

from __future__ import annotations

import contextvars
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import and_, case, event, exists, func, literal, or_, select, update
from sqlalchemy.orm import aliased

from core.liveness import holder_gone, holder_token
from core.models import LEASE_S, UNFINISHED, BuildRun, StageRun
from core.pipeline.context import Cancelled
from core.pipeline.runs import lock_workspace
from core.secrets import redact_text
from core.store import Store, db_now, is_sqlite

RUNS = BuildRun.__table__  # type: ignore[attr-defined]  # SQLModel tables: Core statements, no ORM session sync
STAGES = StageRun.__table__  # type: ignore[attr-defined]
LIVE = ("running", "cancelling")  # the statuses of a run its holder is working on
OWN = "strata_lease_own"  # execution option of the lease's own writes, which carry their own condition
_GUARDED: contextvars.ContextVar[Lease | None] = contextvars.ContextVar("strata_guarded_lease", default=None)
_ENGINE_LEASES: dict[int, list[Lease]] = {}  # id(engine) -> the leases guarding it in this process
_ENGINE_LOCK = threading.Lock()


class LeaseLost(Cancelled):
    """The run's lease went to another worker (or a newer run superseded it): stop without writing anything."""


def new_token() -> str:
    """A lease holder's name: host, process (with its start time) and a nonce, one per claim, so a re-claim is a new
    holder (core/liveness.py reads it back)."""
    return holder_token(uuid.uuid4().hex[:8])


def stale(conn):
    """SQL: the run's holder went silent longer than the run's own `lease_s`, by the database's clock."""
    now = db_now(conn)
    if is_sqlite(conn):
        silent = (func.julianday(now.strftime("%Y-%m-%d %H:%M:%S.%f")) - func.julianday(RUNS.c.heartbeat)) * 86400.0
    else:
        silent = func.extract("epoch", now - RUNS.c.heartbeat)
    return silent > func.coalesce(RUNS.c.lease_s, LEASE_S)


def claimable(conn, dead: Sequence[str] = ()):
    """The SQL condition under which a run may be claimed (see the module doc); `dead`: holders known gone."""
    newer = aliased(RUNS)
    return and_(RUNS.c.status.in_(UNFINISHED),
                or_(RUNS.c.worker.is_(None), RUNS.c.heartbeat.is_(None), stale(conn), RUNS.c.worker.in_(list(dead))),
                ~exists().where(newer.c.workspace_id == RUNS.c.workspace_id, newer.c.id > RUNS.c.id))


def _dead_holders(conn, run_ids: Sequence[int] | None = None) -> list[str]:
    """The holders of unfinished runs (of `run_ids`, else all) whose process is gone from this host."""
    q = select(RUNS.c.worker).where(RUNS.c.status.in_(UNFINISHED), RUNS.c.worker.is_not(None))
    if run_ids is not None:
        q = q.where(RUNS.c.id.in_(list(run_ids)))
    return [w for w in conn.execute(q).scalars() if holder_gone(w)]


class Lease:
    """One worker's hold on run `run_id`: `claim()` it, then write through `write`, `write_stage`, `finish`; while
    `guard()` is on, the run's other writes are conditional on it too. `lease_s`: this holder's lease (its
    `worker.lease_s`), recorded on the run's row when it claims."""

    def __init__(self, store: Store, run_id: int, lease_s: float = LEASE_S, token: str | None = None):
        self.store, self.run_id, self.lease_s = store, run_id, float(lease_s)
        self.token = token or new_token()
        self.lost = threading.Event()
        self.beating = False  # a Heartbeat renews this lease now

    @property
    def beat_every_s(self) -> float:
        return max(0.1, min(5.0, self.lease_s / 3))

    def _owned(self):
        return and_(RUNS.c.id == self.run_id, RUNS.c.worker == self.token, RUNS.c.status.in_(LIVE))

    @contextmanager
    def _own(self) -> Iterator:
        """A transaction for the lease's own writes (each carries its own condition, so the guard skips it)."""
        with self.store.engine.begin() as conn:
            conn.execution_options(**{OWN: True})
            yield conn

    def claim(self) -> bool:
        """Take the run if it is claimable; True when this lease now holds it."""
        with self._own() as conn:
            ws_id = conn.execute(select(RUNS.c.workspace_id).where(RUNS.c.id == self.run_id)).scalar()
            if ws_id is None:
                return False
            lock_workspace(conn, ws_id)
            dead = _dead_holders(conn, [self.run_id])
            took_over = (f"resumed by worker {self.token}: the previous worker's process is gone" if dead else
                         f"resumed by worker {self.token}: the previous worker stopped sending heartbeats")
            pid = os.getpid()
            res = conn.execute(update(RUNS).where(RUNS.c.id == self.run_id, claimable(conn, dead)).values(
                worker=self.token, pid=pid, heartbeat=db_now(conn), lease_s=self.lease_s,
                status=case((RUNS.c.status == "queued", literal("running")), else_=RUNS.c.status),
                message=case((RUNS.c.worker.is_(None), RUNS.c.message), else_=literal(took_over))))
            return res.rowcount == 1

    def write(self, **fields) -> bool:
        """Update the run's row while holding it; False (and the lease marked lost) when it is held no more."""
        with self._own() as conn:
            values = {k: (db_now(conn) if v is NOW else redact_text(v) if isinstance(v, str) else v)
                      for k, v in fields.items()}  # a message or error never holds a secret (core/secrets.py)
            ok = conn.execute(update(RUNS).where(self._owned()).values(**values)).rowcount == 1
        if not ok:
            self.lost.set()
        return ok

    def renew(self) -> bool:
        return self.write(heartbeat=NOW)

    def write_stage(self, stage: str, **fields) -> bool:
        """Update the run's StageRun row `stage`, only while holding the run."""
        held = exists().where(self._owned())
        with self._own() as conn:
            values = {k: redact_text(v) if isinstance(v, str) else v for k, v in fields.items()}
            return conn.execute(update(STAGES).where(STAGES.c.run_id == self.run_id, STAGES.c.stage == stage, held)
                                .values(**values)).rowcount == 1

    def finish(self, status: str, message: str, **fields) -> bool:
        """The final status, while holding the run. A "done" written after a stop request came in keeps the work (it
        finished) and says so in the message instead of dropping the request silently."""
        message = redact_text(message)
        late = message + " (the stop request came after the last step)" if status == "done" else message
        msg = case((RUNS.c.status == "cancelling", literal(late)), else_=literal(message))
        return self.write(status=status, message=msg, finished_at=NOW, heartbeat=NOW, **fields)

    def state(self) -> str:
        """'held', 'cancelling' (held, the user asked to stop) or 'lost'; marks the lease lost when it is."""
        if self.lost.is_set():
            return "lost"
        with self.store.engine.connect() as conn:
            row = conn.execute(select(RUNS.c.status, RUNS.c.worker).where(RUNS.c.id == self.run_id)).first()
        if row is None or row.worker != self.token or row.status not in LIVE:
            self.lost.set()
            return "lost"
        return "cancelling" if row.status == "cancelling" else "held"

    def should_stop(self) -> bool:
        """For `BuildContext.should_stop`: the user asked to stop, or the lease is lost."""
        return self.state() != "held"

    def stop_error(self) -> Cancelled:
        """What the runner raises once `should_stop` is true."""
        return LeaseLost() if self.lost.is_set() else Cancelled()

    def heartbeat(self) -> "Heartbeat":
        return Heartbeat(self)

    # -- the run's other writes ---------------------------------------------------------------------------------
    def check(self, conn) -> None:
        """Raise LeaseLost unless this lease still holds the run, as seen by transaction `conn` (PostgreSQL: the run's
        row locked until the transaction ends, so no claim slips in before its commit)."""
        q = select(RUNS.c.id).where(self._owned())
        if not is_sqlite(conn):
            q = q.with_for_update()
        if conn.execute(q).first() is None:
            self.lost.set()
            raise LeaseLost()

    @contextmanager
    def guard(self) -> Iterator[None]:
        """While on (in this context: the runner's thread), every commit on the store's engine but the lease's own
        first runs `check` in the same transaction: a commit after the lease was lost rolls back with LeaseLost."""
        engine = self.store.engine
        if not event.contains(engine, "commit", _check_commit):
            event.listen(engine, "commit", _check_commit)
        token = _GUARDED.set(self)
        with _ENGINE_LOCK:
            _ENGINE_LEASES.setdefault(id(engine), []).append(self)
        try:
            yield
        finally:
            with _ENGINE_LOCK:
                _ENGINE_LEASES[id(engine)].remove(self)
            try:
                _GUARDED.reset(token)
            except ValueError:  # a generator closed from another context (garbage collection)
                _GUARDED.set(None)

    @contextmanager
    def holding(self) -> Iterator[None]:
        """A transaction that checks the lease and stays open around a write elsewhere (the vector store's): no
        claim commits in between on PostgreSQL; a lost lease raises LeaseLost before anything is written."""
        with self._own() as conn:
            self.check(conn)
            yield


class _Now:
    """`Lease.write(heartbeat=NOW)`: the database's clock, in the statement's own transaction."""


NOW = _Now()


def _check_commit(conn) -> None:
    """The commit hook of `Lease.guard`: the lease of this context, else the one lease guarding the engine in this
    process (a stage's worker threads: the extract stage's model calls and their cache rows), is checked."""
    if conn.get_execution_options().get(OWN):
        return
    lease = _GUARDED.get()
    if lease is None:
        with _ENGINE_LOCK:
            held = _ENGINE_LEASES.get(id(conn.engine), [])
            lease = held[0] if len(held) == 1 else None
    if lease is not None:
        try:
            lease.check(conn)
        except LeaseLost:
            # undo the refused writes on the database connection itself: SQLAlchemy sees a failed commit as ended,
            # so the pool would hand this connection, its writes still pending, to the next user, whose commit (a
            # heartbeat's, which the guard skips) would then commit them too
            dbapi = conn.connection.dbapi_connection
            if dbapi is not None:
                dbapi.rollback()
            raise


class Heartbeat:
    """Renews the lease from a thread, so a long unit (loading a model, one slow model call) never looks like a dead
    worker; a renewal that changes no row marks the lease lost (the runner stops at its next check)."""

    def __init__(self, lease: Lease):
        self.lease = lease
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name=f"heartbeat-{lease.run_id}")

    def _beat(self) -> None:
        while not self._stop.wait(self.lease.beat_every_s):
            try:
                if not self.lease.renew():
                    return
            except Exception:  # noqa: BLE001 - a missed beat (database busy, server restarting) is retried
                pass

    def __enter__(self) -> "Heartbeat":
        self._mine = not self.lease.beating  # nested (the worker's around the runner's): the outer one beats
        if self._mine:
            self.lease.beating = True
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._mine:
            self._stop.set()
            self._thread.join(timeout=self.lease.beat_every_s + 1)
            self.lease.beating = False


def claim_next(store: Store, lease_s: float = LEASE_S) -> Lease | None:
    """Claim the oldest claimable run of any workspace (a queued one, one whose worker went silent, or one whose
    worker's process is gone from this host), or None."""
    with store.engine.connect() as conn:
        dead = _dead_holders(conn)
        ids = list(conn.execute(select(RUNS.c.id).where(claimable(conn, dead)).order_by(RUNS.c.id).limit(20))
                   .scalars())
    for run_id in ids:
        lease = Lease(store, run_id, lease_s)
        if lease.claim():
            return lease
    return None
