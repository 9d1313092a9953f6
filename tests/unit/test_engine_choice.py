"""Which engine a build process takes (core/pipeline/engine.py `open_engine`), and the in-process engine's order."""

from __future__ import annotations

import threading
import time

from core.pipeline.engine import INLINE, MIN_TOKENS, open_engine


def test_a_small_workspace_builds_in_its_own_process_unless_workers_are_asked_for(monkeypatch):
    monkeypatch.delenv("STRATA_DASK_SCHEDULER", raising=False)
    monkeypatch.delenv("STRATA_DASK_WORKERS", raising=False)
    monkeypatch.delenv("STRATA_DASK_MIN_TOKENS", raising=False)
    small = open_engine(1, MIN_TOKENS - 1)
    assert not small.distributed and small.describe() == f"this process (under {MIN_TOKENS:,} tokens)"
    monkeypatch.setenv("STRATA_DASK_MIN_TOKENS", "10")
    assert open_engine(1, 9).describe() == "this process (under 10 tokens)"
    monkeypatch.setenv("STRATA_DASK_WORKERS", "0")
    assert open_engine(1, 10**9).describe() == "this process"


def test_units_in_this_process_come_back_in_order_and_wait_on_a_server_together():
    """Units that wait on a server run on `window` threads; their results come back in the order of the items."""
    seen: set[str] = set()

    def unit(i: int, pause: float) -> int:
        seen.add(threading.current_thread().name)
        time.sleep(pause * (5 - i % 5))  # later items finish first
        return i * i

    t0 = time.perf_counter()
    assert list(INLINE.map(unit, range(10), 0.02, window=5)) == [i * i for i in range(10)]
    assert time.perf_counter() - t0 < 0.02 * 5 * 10 / 2, "five at a time, not one after another"
    assert len(seen) == 5
    seen.clear()
    assert list(INLINE.map(unit, range(3), 0.0, cpu=True, window=5)) == [0, 1, 4]
    assert seen == {threading.current_thread().name}, "a cpu unit runs in the caller's thread"
