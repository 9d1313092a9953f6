"""The `attributed` stage on a built workspace: ArchRAG's attributed communities (levels that partition the layer
below, summaries, in_community edges, vectors), the saved C-HNSW index, and resuming without new report calls."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from sqlmodel import select

from core.algorithms.chnsw import CHNSW, CHNSW_ARTIFACT, CHNSW_FILE
from core.models import Community, Edge, Node, StageRun
from core.pipeline.community_rows import write_communities
from core.pipeline.factory import make_context
from core.pipeline.stages.attributed import attributed_stage
from tests.conftest import TINY_DOCS, build_workspace


class CountingBackend:
    """The real backend, counting `report` calls; raises after `fail_after` calls (a build killed mid-stage)."""

    def __init__(self, inner, fail_after: int | None = None):
        self.inner, self.fail_after, self.calls = inner, fail_after, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def report(self, title_hint, material):
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError("killed")
        self.calls += 1
        return self.inner.report(title_hint, material)


@pytest.fixture(scope="module")
def tiny_built(tmp_path_factory, embedder):
    home = tmp_path_factory.mktemp("attributed")
    docs = home / "docs"
    docs.mkdir()
    for name, text in TINY_DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    from core.config import Settings

    settings = Settings()
    settings.storage.home = home
    settings.archrag.min_clusters = 2  # so the four short documents give more than one level
    return build_workspace(home, [docs], embedder, name="attr", settings=settings)


def _snapshot(store, ws_id) -> dict[str, tuple]:
    with store.session() as s:
        rows = s.exec(select(Community).where(Community.workspace_id == ws_id, Community.method == "attributed")).all()
        edges = s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws_id, Edge.kind == "in_community")).all()
    members = defaultdict(set)
    for src, dst in edges:
        members[dst].add(src)
    return {c.id: (c.level, c.parent_id, c.size, c.title, c.summary, c.report, c.data, frozenset(members[c.id]))
            for c in rows}


def _rerun(built, backend_wrapper):
    ctx = make_context(built.store, built.ws, built.settings, embedder=built.embedder)
    ctx.backend = backend_wrapper(ctx.backend)
    return ctx, list(attributed_stage(ctx))


def test_levels_partition_the_layer_below_and_are_summarized_and_indexed(tiny_built):
    settings, store, ws, embedder = tiny_built
    with store.session() as s:
        entities = set(s.exec(select(Node.id).where(Node.workspace_id == ws.id, Node.kind == "entity",
                                                    Node.layer == 0)))
        comms = {c.id: c for c in s.exec(select(Community).where(Community.workspace_id == ws.id,
                                                                  Community.method == "attributed"))}
        stage = s.exec(select(StageRun).where(StageRun.workspace_id == ws.id, StageRun.stage == "attributed")).first()
    snap = _snapshot(store, ws.id)
    n_levels = max(c.data["layer"] for c in comms.values())
    assert n_levels >= 2, "min_clusters 2 gives the tiny corpus at least two levels"
    by_layer = defaultdict(list)
    for c in comms.values():
        by_layer[c.data["layer"]].append(c)
        assert c.level == n_levels - c.data["layer"], "level 0 is the coarsest"
        assert c.title and c.summary.strip() and c.report.get("summary"), "every community is summarized"
        assert c.size == len(snap[c.id][-1]) and snap[c.id][-1] <= entities, "in_community edges from its entities"
    assert sorted(by_layer) == list(range(1, n_levels + 1))
    for layer, layer_comms in by_layer.items():
        seen = [e for c in layer_comms for e in snap[c.id][-1]]
        assert len(seen) == len(set(seen)) and set(seen) == entities, f"layer {layer} partitions the entities"
        for c in layer_comms:
            if layer == n_levels:
                assert c.parent_id is None
            else:
                parent = comms[c.parent_id]
                assert parent.data["layer"] == layer + 1 and snap[c.id][-1] <= snap[parent.id][-1]
        if layer > 1:
            children = defaultdict(int)
            for c in by_layer[layer - 1]:
                children[c.parent_id] += 1
            assert all(children[c.id] == c.data["children"] >= 1 for c in layer_comms)
    assert len(by_layer[2]) < len(by_layer[1]) < len(entities)

    counts = stage.counts
    sizes = [len(entities)] + [len(by_layer[i]) for i in range(1, n_levels + 1)]
    assert counts["levels"] == n_levels and counts["layer_sizes"] == sizes
    assert counts["communities_per_level"] == {str(n_levels - i): len(by_layer[i]) for i in by_layer}
    assert counts["knn_edges"] > 0 and counts["chnsw_nodes"] == sum(sizes) and counts["chnsw_links"] > 0

    stored = store.artifact(ws.id, CHNSW_ARTIFACT)
    assert stored is not None, "the index is stored in the database, where every host sharing it reads it"
    assert not (settings.storage.vector_dir(ws.name) / CHNSW_FILE).exists(), "and nowhere else"
    index = CHNSW.from_bytes(stored[1])
    assert index.layer_sizes == sizes
    lo = index.offsets
    assert set(index.ids[lo[0] : lo[1]].tolist()) == entities
    for layer in range(1, n_levels + 1):
        assert set(index.ids[lo[layer] : lo[layer + 1]].tolist()) == {c.id for c in by_layer[layer]}
    q = embedder.embed(["Who designed the Tidewater Bridge?"])[0]
    hits = index.search_layers(q, 3)
    assert len(hits) == n_levels + 1 and all(hits)

    ctx = make_context(store, ws, settings, embedder=embedder)
    got = ctx.index.collection("community").get(ids=list(comms), include=["metadatas"])
    metas = dict(zip(got["ids"], got["metadatas"]))
    assert set(metas) == set(comms), "every attributed community is embedded"
    assert all(metas[i]["method"] == "attributed" and metas[i]["level"] == c.level for i, c in comms.items())


def test_rerun_keeps_ids_and_makes_no_report_calls(tiny_built):
    before = _snapshot(tiny_built.store, tiny_built.ws.id)
    ctx, events = _rerun(tiny_built, CountingBackend)
    assert ctx.backend.calls == 0, "stored summaries are reused"
    assert _snapshot(tiny_built.store, tiny_built.ws.id) == before
    assert events[-1].counts["levels"] >= 2


def test_a_killed_build_resumes_without_redoing_finished_summaries(tiny_built):
    store, ws = tiny_built.store, tiny_built.ws
    before = _snapshot(store, ws.id)
    by_layer = defaultdict(list)
    for row in before.values():
        by_layer[row[6]["layer"]].append(row)
    first = sum(1 for r in by_layer[1] if r[2] > 1)  # multi-member communities of layer 1 get a model report
    total = first + sum(1 for la, rows in by_layer.items() if la > 1 for r in rows if r[6]["children"] > 1)
    assert total > first > 0

    write_communities(store, ws.id, [], {}, ("attributed",))  # start from nothing
    with pytest.raises(RuntimeError, match="killed"):
        _rerun(tiny_built, lambda b: CountingBackend(b, fail_after=first))  # dies at the first layer-2 report
    partial = _snapshot(store, ws.id)
    layer1 = {c for c, r in before.items() if r[6]["layer"] == 1}
    assert {c for c, r in partial.items() if r[6]["layer"] == 1} == layer1
    assert all(r[4] for r in partial.values()), "what was stored is summarized"

    ctx, _ = _rerun(tiny_built, CountingBackend)
    assert ctx.backend.calls == total - first, "layer 1 summaries are not made again"
    assert _snapshot(store, ws.id) == before, "the resumed build ends with the same rows"
    stored = store.artifact(ws.id, CHNSW_ARTIFACT)
    assert stored is not None and np.isfinite(CHNSW.from_bytes(stored[1]).vecs).all()
