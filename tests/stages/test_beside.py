"""Vectors embedded on a second thread beside a stage (core/pipeline/beside.py): the chunks beside `extract`, the
community reports beside `augment`. The vectors must be exactly those the later stage (embed, index) would store, a
failing embedder must not fail the stage, and the thread must be gone when the stage is."""

from __future__ import annotations

import threading
import time

import numpy as np

from core.index.vectors import settle
from core.pipeline.beside import embedded_beside
from core.pipeline.factory import make_context
from core.pipeline.runner import create_run, run_build
from core.pipeline.stages.embed import chunk_rows, statements_so_far
from core.pipeline.stages.index import report_rows
from core.store import Store
from core.workspace import ingest_paths
from tests.conftest import SAMPLE_DIR


def _chunked(home, settings_factory, embedder, name="w"):
    settings = settings_factory(home)
    store = Store(settings.storage.db_url)
    ws = store.create_workspace(name)
    ingest_paths(store, ws, [SAMPLE_DIR], settings)
    ctx = make_context(store, ws, settings, embedder=embedder)
    list(run_build(ctx, create_run(store, ws, settings).id, only=["chunk"]))
    return store, ws, ctx


def _beside_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("embed-") and t.name.endswith("-beside")]


def test_vectors_embedded_beside_are_the_embed_stages(tmp_path, make_settings, embedder):
    store, ws, ctx = _chunked(tmp_path / "beside", make_settings, embedder)
    ids = [i for i, _, _ in chunk_rows(ctx)]
    assert len(ids) > 20
    with embedded_beside(ctx, ("chunk", chunk_rows)):  # the body waits for the thread to store every chunk
        deadline = time.monotonic() + 120
        while ctx.index.count("chunk") < len(ids) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert not _beside_threads()
    assert ctx.index.count("chunk") == len(ids)
    beside = ctx.index.vectors("chunk", ids)

    # the same corpus embedded by the embed stage alone (no extraction beside it)
    store2, ws2, ctx2 = _chunked(tmp_path / "stage", make_settings, embedder)
    list(run_build(ctx2, create_run(store2, ws2, ctx2.settings).id, only=["embed"]))
    alone = ctx2.index.vectors("chunk", ids)
    assert set(beside) == set(alone) == set(ids)
    assert all(np.array_equal(beside[i], alone[i]) for i in ids)  # bit for bit

    # and the embed stage of the first workspace finds every chunk stored: it writes no chunk vector again
    kinds: list[str] = []
    upsert = ctx.index.upsert
    ctx.index.upsert = lambda kind, *a, **k: (kinds.append(kind), upsert(kind, *a, **k))[1]  # type: ignore[method-assign]
    events = list(run_build(ctx, create_run(store, ws, ctx.settings).id, only=["embed"]))
    assert events[-1].status == "done"
    assert "chunk" not in kinds


def test_a_failing_embedder_beside_does_not_fail_the_extraction(tmp_path, make_settings, embedder, caplog):
    store, ws, ctx = _chunked(tmp_path / "w", make_settings, embedder)

    class Broken:
        name, dim = embedder.name, embedder.dim

        def embed(self, texts):
            raise RuntimeError("embedder down")

    ctx.embedder = Broken()  # type: ignore[assignment]
    events = list(run_build(ctx, create_run(store, ws, ctx.settings).id, only=["extract"]))
    assert events[-1].status == "done", events[-1]
    assert not _beside_threads()
    assert ctx.index.count("chunk") == 0
    assert "embedder down" in caplog.text  # logged, not raised
    ctx.embedder = embedder  # the embed stage then embeds every chunk
    list(run_build(ctx, create_run(store, ws, ctx.settings).id, only=["embed"]))
    assert ctx.index.count("chunk") == len(chunk_rows(ctx))


def test_the_thread_stops_after_the_part_in_hand_when_the_body_raises(tmp_path, make_settings, embedder):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for k in range(300):  # more chunks than one part of embed_missing (256 rows)
        (corpus / f"note-{k:03d}.txt").write_text(f"Note {k} says that station {k} reported rain at dawn.\n")
    settings = make_settings(tmp_path / "home")
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("w")
    ingest_paths(store, ws, [corpus], settings)
    ctx = make_context(store, ws, settings, embedder=embedder)
    list(run_build(ctx, create_run(store, ws, settings).id, only=["chunk"]))
    assert len(chunk_rows(ctx)) == 300
    started = threading.Event()

    class Slow:
        name, dim = embedder.name, embedder.dim

        def embed(self, texts):
            started.set()
            time.sleep(0.02)
            return embedder.embed(texts)

    ctx.embedder = Slow()  # type: ignore[assignment]
    try:
        with embedded_beside(ctx, ("chunk", chunk_rows)):
            assert started.wait(60)
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert not _beside_threads()
    assert ctx.index.count("chunk") == 256  # the part in hand, stored whole; then it stopped


def test_reports_embedded_beside_augment_are_the_index_stages(tmp_path, make_settings, embedder):
    store, ws, ctx = _chunked(tmp_path / "w", make_settings, embedder)
    stages = ["extract", "resolve", "embed", "merge", "layers", "communities", "attributed", "reports", "lexical"]
    list(run_build(ctx, create_run(store, ws, ctx.settings).id, only=stages))
    rows = report_rows(ctx)
    had = set(ctx.index.existing("community"))  # the attributed stage embeds its own levels' reports
    new = [(i, t) for i, t, _ in rows if i not in had]
    assert len(new) > 10
    events = list(run_build(ctx, create_run(store, ws, ctx.settings).id, only=["augment"]))
    assert events[-1].status == "done"
    assert not _beside_threads()
    assert ctx.index.count("community") == len(rows)  # fewer than one part (256 rows): the part in hand is all
    stored = ctx.index.vectors("community", [i for i, _ in new])
    direct = settle(embedder.embed([t for _, t in new]))  # as the store writes any vector (core/index/vectors.py)
    assert all(np.array_equal(stored[i], direct[k]) for k, (i, _) in enumerate(new))  # bit for bit
    kinds: list[str] = []
    upsert = ctx.index.upsert
    ctx.index.upsert = lambda kind, *a, **k: (kinds.append(kind), upsert(kind, *a, **k))[1]  # type: ignore[method-assign]
    events = list(run_build(ctx, create_run(store, ws, ctx.settings).id, only=["index"]))
    assert events[-1].status == "done" and "community" not in kinds
    assert ctx.index.count("community") == len(rows)


def test_paused_holds_the_thread_until_the_stage_lets_go(tmp_path, make_settings, embedder):
    _, _, ctx = _chunked(tmp_path / "w", make_settings, embedder)
    calls: list[int] = []

    class Counting:
        name, dim = embedder.name, embedder.dim

        def embed(self, texts):
            calls.append(len(texts))
            return embedder.embed(texts)

    ctx.embedder = Counting()  # type: ignore[assignment]
    n = len(chunk_rows(ctx))
    with embedded_beside(ctx, ("chunk", chunk_rows)) as beside:
        with beside.paused():
            time.sleep(0.5)  # a call already in flight finishes
            held = len(calls)
            time.sleep(1.0)
            assert len(calls) == held  # no call while the stage holds it
        deadline = time.monotonic() + 120
        while ctx.index.count("chunk") < n and time.monotonic() < deadline:
            time.sleep(0.05)
    assert ctx.index.count("chunk") == n and sum(calls) == n


def test_statements_follow_the_chunks_and_equal_the_embed_stages(tmp_path, make_settings, embedder):
    store, ws, ctx = _chunked(tmp_path / "beside", make_settings, embedder)
    list(run_build(ctx, create_run(store, ws, ctx.settings).id, only=["extract"]))
    for kind in ("chunk", "statement"):  # what the thread beside the extraction stored: made again below
        ctx.index.delete(kind, list(ctx.index.existing(kind)))
    rows = statements_so_far(ctx)
    assert len(rows) > 50 and ctx.index.count("statement") == 0
    ctx.should_stop = lambda: False  # the finished run's lease says stop
    with embedded_beside(ctx, ("chunk", chunk_rows), ("statement", statements_so_far)):
        deadline = time.monotonic() + 120
        while ctx.index.count("statement") < len(rows) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert ctx.index.count("chunk") == len(chunk_rows(ctx)) and ctx.index.count("statement") == len(rows)
    ids = [i for i, _, _ in rows]
    beside = ctx.index.vectors("statement", ids)

    store2, ws2, ctx2 = _chunked(tmp_path / "stage", make_settings, embedder)
    list(run_build(ctx2, create_run(store2, ws2, ctx2.settings).id, only=["extract", "embed"]))
    alone = ctx2.index.vectors("statement", ids)
    assert set(alone) == set(ids)
    assert all(np.array_equal(beside[i], alone[i]) for i in ids)  # bit for bit
