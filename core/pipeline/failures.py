"""Units whose language call still failed after its retries: recorded, never stored as an empty result.

A stage hands each unit's call (a chunk's extraction, a community's report, a HiRAG cluster's summary entities, a
NodeRAG attribute, an HLG document's topics) to `UnitFailures.call`. A `BackendError` out of it (the model server
failed that call after the host pool's retries) is recorded as a `FailedUnit` row with its reason, the call returns
None, and the stage goes on with the other units and writes nothing for this one: no checkpoint, no empty report.
So the next build, or a resume, finds the unit still to do and makes it again; a unit that succeeds then has its row
removed, and once a stage has run to its end, the rows of its units that did not fail again are removed with it
(`settle`; such a unit is done, or gone with its document). The runner ends a run with failed units as "done", its
message saying "with N failed units" (`finished_message`); the CLI and the worker exit with `EXIT_FAILED_UNITS`.

A failure that is not a unit's still fails the run: any other exception (a database error, a bug), a stop request,
and a server that fails `STREAK` units in a row (`ServerFailing`: it is down, or lacks the model, and every unit
after would fail the same way after its retries).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

from sqlalchemy import ColumnElement, delete, func, or_, select
from sqlmodel import col
from sqlmodel import select as sm_select

from core.models import FailedUnit, sql_table, utcnow
from core.protocols import BackendError
from core.secrets import redact_text
from core.store import Store

T = TypeVar("T")
STREAK = 20  # units failed in a row, no success between them: the server is failing, not a unit
EXIT_FAILED_UNITS = 5  # exit status of `core build` / `core add` / `core worker --run` finished with failed units
TABLE = sql_table(FailedUnit)
_ATTEMPTS = re.compile(r"after (\d+) attempts?")


class ServerFailing(BackendError):
    """The model server failed `STREAK` units in a row: the run fails (the units failed so far stay recorded)."""


def attempts_of(exc: BaseException, default: int) -> int:
    """How many tries the failed call made: the error's `attempts` if it says, else the count its message names."""
    n = getattr(exc, "attempts", None)
    if isinstance(n, int) and n > 0:
        return n
    m = _ATTEMPTS.search(str(exc))
    return int(m.group(1)) if m else default


@dataclass
class Failed:
    """A unit's model call that failed after its retries: the server's reason and the tries it took."""

    reason: str
    attempts: int

    def error(self) -> BackendError:
        exc = BackendError(self.reason)
        exc.attempts = self.attempts  # type: ignore[attr-defined]
        return exc


def outcome(fn, *args) -> Any:
    """fn(*args), or a `Failed` when it raised a BackendError."""
    try:
        return fn(*args)
    except BackendError as exc:
        return Failed(str(exc) or type(exc).__name__, attempts_of(exc, 1))


class UnitFailures:
    """The failed units of one build context: `call` runs a unit's language call and records its failure; the
    runner sets `run_id` and calls `begin(stage)` / `settle(stage)` around each stage. Thread-safe: stages call from
    their thread pools."""

    def __init__(self, store: Store, ws_id: int, attempts: int = 1):
        self.store, self.ws_id, self.default_attempts = store, ws_id, attempts
        self.run_id: int | None = None
        self.stage = ""
        self.failed = 0  # units failed through this context
        self._streak = 0
        self._last = ""
        self._pending: set[str] = set()  # units of the current stage recorded as failed before it began
        self._lock = threading.Lock()

    def begin(self, stage: str) -> None:
        """A stage starts: the units it recorded as failed earlier are cleared as they succeed."""
        self.stage = stage
        with self.store.engine.connect() as conn:
            pending = set(conn.execute(select(TABLE.c.unit).where(TABLE.c.workspace_id == self.ws_id,
                                                                  TABLE.c.stage == stage)).scalars())
        with self._lock:
            self._pending = pending

    def call(self, unit: str, fn: Callable[[], T], label: str = "") -> T | None:
        """`fn()`, or None when it raised a BackendError (recorded: see the module doc)."""
        try:
            out = fn()
        except BackendError as exc:
            self.record(unit, exc, label)
            return None
        self.succeeded(unit)
        return out

    def take(self, unit: str, result: T | Failed, label: str = "") -> T | None:
        """A unit's result as an engine task gave it back (core/pipeline/tasks.py): a `Failed` is recorded as `call`
        records a raised BackendError, and gives None."""
        if isinstance(result, Failed):
            self.record(unit, result.error(), label)
            return None
        self.succeeded(unit)
        return result

    def succeeded(self, unit: str) -> None:
        """`unit` succeeded: its failure recorded by an earlier run goes."""
        with self._lock:  # (held while the row goes: a failure of the same unit in between is recorded after)
            self._streak = 0
            if unit in self._pending:
                self._pending.discard(unit)
                with self.store.engine.begin() as conn:
                    conn.execute(delete(TABLE).where(TABLE.c.workspace_id == self.ws_id, TABLE.c.stage == self.stage,
                                                     TABLE.c.unit == unit))

    def record(self, unit: str, exc: BaseException, label: str = "") -> None:
        """Record `unit` of the current stage as failed in this run (replacing an older record of it)."""
        reason = redact_text(str(exc) or type(exc).__name__)[:1000]  # a host's URL may hold a password
        row = {"workspace_id": self.ws_id, "run_id": self.run_id, "stage": self.stage, "unit": unit,
               "label": label[:300], "reason": reason, "attempts": attempts_of(exc, self.default_attempts),
               "failed_at": utcnow()}
        with self._lock:
            self._streak += 1
            self.failed += 1
            self._pending.discard(unit)
            self._last = reason
            streak = self._streak
            with self.store.engine.begin() as conn:
                conn.execute(delete(TABLE).where(TABLE.c.workspace_id == self.ws_id, TABLE.c.stage == self.stage,
                                                 TABLE.c.unit == unit))
                conn.execute(TABLE.insert().values(**row))
        if streak >= STREAK:
            raise ServerFailing(f"the model server failed {streak} units in a row in stage {self.stage!r}, so the "
                                f"build stopped (the next build retries them); the last: {reason}")

    def settle(self, stage: str) -> int:
        """`stage` ran to its end: drop the records of its units that did not fail in this run. Returns how many
        units of the stage failed in this run."""
        mine: ColumnElement[bool]
        older: ColumnElement[bool]
        if self.run_id is None:  # a stage run outside the runner (tests, scripts)
            mine, older = TABLE.c.run_id.is_(None), TABLE.c.run_id.is_not(None)
        else:
            mine, older = TABLE.c.run_id == self.run_id, or_(TABLE.c.run_id.is_(None), TABLE.c.run_id != self.run_id)
        with self.store.engine.begin() as conn:
            conn.execute(delete(TABLE).where(TABLE.c.workspace_id == self.ws_id, TABLE.c.stage == stage, older))
            n = conn.execute(select(func.count()).select_from(TABLE).where(
                TABLE.c.workspace_id == self.ws_id, TABLE.c.stage == stage, mine)).scalar()
        with self._lock:
            self._pending = set()
        return int(n or 0)


def failed_units(store: Store, ws_id: int, run_id: int | None = None) -> list[FailedUnit]:
    """The workspace's outstanding failed units (those of run `run_id` only, if given), by stage and unit."""
    q = sm_select(FailedUnit).where(FailedUnit.workspace_id == ws_id)
    if run_id is not None:
        q = q.where(FailedUnit.run_id == run_id)
    with store.session() as s:
        return list(s.exec(q.order_by(col(FailedUnit.failed_at), col(FailedUnit.stage), col(FailedUnit.unit))))


def count_failed(store: Store, ws_id: int, run_id: int | None = None) -> int:
    q = select(func.count()).select_from(TABLE).where(TABLE.c.workspace_id == ws_id)
    if run_id is not None:
        q = q.where(TABLE.c.run_id == run_id)
    with store.engine.connect() as conn:
        return int(conn.execute(q).scalar() or 0)


def plural(n: int) -> str:
    return f"{n} failed unit{'s' if n != 1 else ''}"


def finished_message(message: str, n: int) -> str:
    """A run's final message with its failed units: "Build finished with 2 failed units"."""
    return f"{message} with {plural(n)}" if n else message


def print_failed(store: Store, ws_id: int, run_id: int | None, out: TextIO) -> int:
    """Print run `run_id`'s failed units to `out` (a header, then one line each, as the CLI shows them); how many."""
    units = failed_units(store, ws_id, run_id)
    if units:
        print(f"finished with {plural(len(units))} (the next build retries them):", file=out)
        print("\n".join(["stage\tunit\twhat\tattempts\treason", *describe(units)]), file=out)
    return len(units)


def describe(units: list[FailedUnit]) -> list[str]:
    """One line per failed unit, as the CLI prints them: stage, unit, what it is, attempts, reason."""
    return [f"{u.stage}\t{u.unit}\t{u.label or '-'}\t{u.attempts} attempt{'s' if u.attempts != 1 else ''}\t"
            f"{u.reason}" for u in units]
