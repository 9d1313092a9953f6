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

Heartbeats compare the clocks of the hosts involved: keep them in sync (NTP) when workers run on several hosts.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from datetime import timedelta

from sqlalchemy import and_, case, exists, literal, or_, select, update
from sqlalchemy.orm import aliased

from core.build.context import Cancelled
from core.build.runs import lock_workspace
from core.models import STALE_AFTER_S, UNFINISHED, BuildRun, StageRun, utcnow
from core.store import Store

RUNS = BuildRun.__table__  # type: ignore[attr-defined]  # SQLModel tables: Core statements, no ORM session sync
STAGES = StageRun.__table__  # type: ignore[attr-defined]
LIVE = ("running", "cancelling")  # the statuses of a run its holder is working on


class LeaseLost(Cancelled):
    """The run's lease went to another worker (or a newer run superseded it): stop without writing anything."""


def new_token() -> str:
    """A lease holder's name: host, process and a nonce (one per claim, so a re-claim is a new holder)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def claimable(stale_after_s: float):
    """The SQL condition under which a run may be claimed (see the module doc)."""
    cutoff = utcnow() - timedelta(seconds=stale_after_s)
    newer = aliased(RUNS)
    return and_(RUNS.c.status.in_(UNFINISHED),
                or_(RUNS.c.worker.is_(None), RUNS.c.heartbeat.is_(None), RUNS.c.heartbeat < cutoff),
                ~exists().where(newer.c.workspace_id == RUNS.c.workspace_id, newer.c.id > RUNS.c.id))


class Lease:
    """One worker's hold on run `run_id`: `claim()` it, then write through `write`, `write_stage`, `finish`."""

    def __init__(self, store: Store, run_id: int, stale_after_s: float = STALE_AFTER_S, token: str | None = None):
        self.store, self.run_id, self.stale_after_s = store, run_id, float(stale_after_s)
        self.token = token or new_token()
        self.lost = threading.Event()
        self.beating = False  # a Heartbeat renews this lease now

    @property
    def beat_every_s(self) -> float:
        return max(0.1, min(5.0, self.stale_after_s / 3))

    def _owned(self):
        return and_(RUNS.c.id == self.run_id, RUNS.c.worker == self.token, RUNS.c.status.in_(LIVE))

    def claim(self) -> bool:
        """Take the run if it is claimable; True when this lease now holds it."""
        with self.store.engine.begin() as conn:
            ws_id = conn.execute(select(RUNS.c.workspace_id).where(RUNS.c.id == self.run_id)).scalar()
            if ws_id is None:
                return False
            lock_workspace(conn, ws_id)
            took_over = f"resumed by worker {self.token}: the previous worker stopped sending heartbeats"
            res = conn.execute(update(RUNS).where(RUNS.c.id == self.run_id, claimable(self.stale_after_s)).values(
                worker=self.token, pid=os.getpid(), heartbeat=utcnow(),
                status=case((RUNS.c.status == "queued", literal("running")), else_=RUNS.c.status),
                message=case((RUNS.c.worker.is_(None), RUNS.c.message), else_=literal(took_over))))
            return res.rowcount == 1

    def write(self, **fields) -> bool:
        """Update the run's row while holding it; False (and the lease marked lost) when it is held no more."""
        with self.store.engine.begin() as conn:
            ok = conn.execute(update(RUNS).where(self._owned()).values(**fields)).rowcount == 1
        if not ok:
            self.lost.set()
        return ok

    def renew(self) -> bool:
        return self.write(heartbeat=utcnow())

    def write_stage(self, stage: str, **fields) -> bool:
        """Update the run's StageRun row `stage`, only while holding the run."""
        held = exists().where(self._owned())
        with self.store.engine.begin() as conn:
            return conn.execute(update(STAGES).where(STAGES.c.run_id == self.run_id, STAGES.c.stage == stage, held)
                                .values(**fields)).rowcount == 1

    def finish(self, status: str, message: str, **fields) -> bool:
        """The final status, while holding the run. A "done" written after a stop request came in keeps the work (it
        finished) and says so in the message instead of dropping the request silently."""
        late = message + " (the stop request came after the last step)" if status == "done" else message
        msg = case((RUNS.c.status == "cancelling", literal(late)), else_=literal(message))
        return self.write(status=status, message=msg, finished_at=utcnow(), heartbeat=utcnow(), **fields)

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


def claim_next(store: Store, stale_after_s: float = STALE_AFTER_S) -> Lease | None:
    """Claim the oldest claimable run of any workspace (a queued one, or one whose worker went silent), or None."""
    with store.engine.connect() as conn:
        ids = list(conn.execute(select(RUNS.c.id).where(claimable(stale_after_s)).order_by(RUNS.c.id).limit(20))
                   .scalars())
    for run_id in ids:
        lease = Lease(store, run_id, stale_after_s)
        if lease.claim():
            return lease
    return None
