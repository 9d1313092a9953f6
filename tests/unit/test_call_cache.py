"""The language-call cache's in-process single flight (core/backends/cache.py `CallCache.flight`)."""

from __future__ import annotations


def test_one_call_per_key_in_flight(tmp_path):
    """Two threads asking the same key: the second waits for the first (then finds its reply cached); another key
    does not wait."""
    import threading
    import time

    from core.backends.cache import CallCache
    from core.store import Store

    cache = CallCache(Store(tmp_path / "c.db"))
    order: list[str] = []
    inside = threading.Event()

    def first() -> None:
        with cache.flight("k"):
            inside.set()
            time.sleep(0.3)
            order.append("first done")

    def second() -> None:
        inside.wait()
        with cache.flight("k"):
            order.append("second in")

    def other() -> None:
        inside.wait()
        with cache.flight("other"):
            order.append("other in")

    threads = [threading.Thread(target=f) for f in (first, second, other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert order.index("first done") < order.index("second in") and order[0] == "other in"
    assert not cache._flights  # noqa: SLF001 - nothing left behind
