"""The per-Resources cache of derived structures (core/retrieval/cache.py): one build per key under concurrency,
different keys built side by side, a failed build retried, a stale value rebuilt."""

from __future__ import annotations

import threading
import time

import pytest

from core.retrieval.cache import BuildCache, CacheKey

A: CacheKey[object] = CacheKey("a")
B: CacheKey[object] = CacheKey("b")


def test_threads_asking_at_once_build_once_and_share_the_object():
    cache = BuildCache()
    calls = []
    inside = threading.Event()

    def build():
        calls.append(1)
        inside.set()
        time.sleep(0.2)  # the others arrive while this build runs
        return object()

    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(cache.get(A, build))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert inside.is_set() and len(calls) == 1
    assert len(got) == 8 and all(g is got[0] for g in got)
    assert cache.get(A, build) is got[0] and len(calls) == 1


def test_different_keys_build_side_by_side():
    cache = BuildCache()
    a_started, b_started = threading.Event(), threading.Event()

    def build_a():
        a_started.set()
        assert b_started.wait(5), "b's build waited for a's: keys are serialised"
        return "a"

    def build_b():
        b_started.set()
        assert a_started.wait(5), "a's build waited for b's: keys are serialised"
        return "b"

    out: dict[str, object] = {}
    ta = threading.Thread(target=lambda: out.update(a=cache.get(A, build_a)))
    tb = threading.Thread(target=lambda: out.update(b=cache.get(B, build_b)))
    ta.start()
    tb.start()
    ta.join(10)
    tb.join(10)
    assert out == {"a": "a", "b": "b"}


def test_variants_are_separate_and_keys_compare_by_identity():
    cache = BuildCache()
    assert cache.get(A, lambda: 1, variant=("x", 1)) == 1
    assert cache.get(A, lambda: 2, variant=("x", 2)) == 2
    assert cache.get(A, lambda: 3, variant=("x", 1)) == 1
    same_name: CacheKey[object] = CacheKey("a")
    assert cache.get(same_name, lambda: 4) == 4  # another key of the same name does not read A's values
    assert cache.peek(A, ("x", 2)) == 2 and cache.peek(B) is None and len(cache) == 3


def test_a_failed_build_stores_nothing_and_the_next_caller_builds():
    cache = BuildCache()

    def boom():
        raise RuntimeError("store locked")

    with pytest.raises(RuntimeError):
        cache.get(A, boom)
    assert cache.peek(A) is None
    assert cache.get(A, lambda: "ok") == "ok"


def test_a_stale_value_is_rebuilt_in_place():
    cache = BuildCache()
    assert cache.get(A, lambda: {"mtime": 1}, valid=lambda v: v["mtime"] == 1) == {"mtime": 1}
    assert cache.get(A, lambda: {"mtime": 2}, valid=lambda v: v["mtime"] == 2) == {"mtime": 2}
    assert cache.get(A, lambda: {"mtime": 3}) == {"mtime": 2}  # no `valid`: whatever is stored
    assert len(cache) == 1

