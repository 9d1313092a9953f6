"""Each vector collection records the embedder, runtime and dimension that wrote it; a workspace is extended, merged
or re-embedded with the recorded runtime, or refused with one line (core/index/writer.py, core/pipeline/factory.py).

The workspace is built with a MiniLM runtime `auto` does not pick (ONNX; auto takes `exact`), so `auto` choosing the
recorded one is a real choice."""

from __future__ import annotations

import pytest

from core.backends.embedders import MiniLMEmbedder
from core.config import Settings
from core.index.writer import Writer, WriterMismatch
from core.pipeline.factory import make_context, open_index, workspace_embedder
from core.store import Store
from tests.conftest import build_workspace

OTHER = "onnx"  # what auto would not choose
MINE = "exact"
COLLECTIONS = ("chunk", "statement", "entity", "community")


@pytest.fixture(scope="module")
def other_embedder(tmp_path_factory) -> MiniLMEmbedder:
    e = MiniLMEmbedder(runtime=OTHER, cache_dir=tmp_path_factory.mktemp("models"))
    e.embed(["warm up"])
    return e


@pytest.fixture(scope="module")
def built(tmp_path_factory, other_embedder):
    import shutil

    from tests.conftest import TINY_DOCS

    root = tmp_path_factory.mktemp("writer")
    docs = root / "docs"
    docs.mkdir()
    for name, text in list(TINY_DOCS.items())[:3]:
        (docs / name).write_text(text, encoding="utf-8")
    b = build_workspace(root / "home", [docs], other_embedder, name="recorded")
    extra = root / "extra"
    extra.mkdir()
    (extra / "railway.txt").write_text(TINY_DOCS["railway.txt"], encoding="utf-8")
    yield b, extra
    shutil.rmtree(root, ignore_errors=True)


def _auto(settings: Settings) -> Settings:
    s = settings.model_copy(deep=True)
    s.embed.minilm_runtime = "auto"
    return s


def test_every_collection_records_its_writer(built):
    b, _ = built
    index = open_index(b.settings, "recorded", "minilm")
    assert index.recorded() == Writer("minilm", OTHER, 384)
    for kind in COLLECTIONS:
        assert Writer.from_meta(index.collection(kind).metadata) == Writer("minilm", OTHER, 384), kind


def test_auto_takes_the_recorded_runtime_when_the_workspace_grows(built, monkeypatch):
    """A host whose `auto` picks another runtime writes with the recorded one (extending, merging, re-embedding all
    get their embedder from make_context)."""
    from core.pipeline.runner import create_run, run_build
    from core.workspace import ingest_paths

    b, extra = built
    monkeypatch.delenv("STRATA_MINILM_RUNTIME", raising=False)
    settings = _auto(b.settings)
    assert MiniLMEmbedder(cache_dir=settings.storage.home / "models").load() == MINE  # auto's own choice here
    store = Store(settings.storage.db_url)
    ws = store.require_workspace("recorded")
    ctx = make_context(store, ws, settings)
    assert ctx.embedder.runtime == OTHER and ctx.index.writer == Writer("minilm", OTHER, 384)
    assert ingest_paths(store, ws, [extra], settings).added
    events = list(run_build(ctx, create_run(store, ws, settings).id))
    assert events[-1].status == "done", events[-1]
    assert open_index(settings, "recorded", "minilm").recorded() == Writer("minilm", OTHER, 384)
    # questions are embedded with the recorded runtime too
    assert workspace_embedder(settings, "recorded", strict=False).load() == OTHER


def test_another_runtime_is_refused_with_one_line(built, tmp_path):
    b, _ = built
    store = Store(b.settings.storage.db_url)
    ws = store.require_workspace("recorded")
    mine = MiniLMEmbedder(runtime=MINE, cache_dir=tmp_path)
    with pytest.raises(WriterMismatch) as exc:
        make_context(store, ws, b.settings, embedder=mine)
    msg = str(exc.value)
    assert "\n" not in msg and f"{OTHER} runtime" in msg and f"{MINE} runtime" in msg and "new workspace" in msg
    pinned = b.settings.model_copy(deep=True)
    pinned.embed.minilm_runtime = MINE  # as STRATA_MINILM_RUNTIME does
    with pytest.raises(WriterMismatch, match="STRATA_MINILM_RUNTIME"):
        make_context(store, ws, pinned)
    # and the vector store itself holds to it, whoever writes
    index = open_index(b.settings, "recorded", "minilm")
    index.writer = Writer("minilm", MINE, 384)
    with pytest.raises(WriterMismatch):
        index.upsert("chunk", ["x"], mine.embed(["x"]), [{"h": "x"}])
    assert "x" not in index.existing("chunk")


def test_a_recorded_runtime_that_cannot_load_here_is_refused(built, monkeypatch):
    monkeypatch.delenv("STRATA_MINILM_RUNTIME", raising=False)
    b, _ = built
    index = open_index(b.settings, "recorded", "minilm")

    def record(runtime: str) -> None:
        for c in index.client.list_collections():
            c.modify(metadata={k: v for k, v in (c.metadata or {}).items() if not k.startswith("hnsw:")}
                     | {"strata_runtime": runtime})

    try:
        record("tpu")
        with pytest.raises(WriterMismatch, match="cannot run on this host"):
            workspace_embedder(_auto(b.settings), "recorded")
        assert workspace_embedder(_auto(b.settings), "recorded", strict=False).load() == MINE  # a question still works
    finally:
        record(OTHER)


def test_a_collection_from_before_records_its_first_writer(tmp_path, other_embedder):
    from core.index.vectors import VectorIndex

    old = VectorIndex(tmp_path / "v", "minilm")
    old.upsert("chunk", ["a"], other_embedder.embed(["a"]), [{"h": "a"}])  # no writer known: nothing recorded
    assert old.recorded() is None
    again = VectorIndex(tmp_path / "v", "minilm")
    again.writer = Writer("minilm", OTHER, 384)
    again.upsert("chunk", ["b"], other_embedder.embed(["b"]), [{"h": "b"}])
    assert VectorIndex(tmp_path / "v", "minilm").recorded() == Writer("minilm", OTHER, 384)
    assert set(again.existing("chunk")) == {"a", "b"}
