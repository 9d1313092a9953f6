"""What-if community detection on a real built workspace (core/quality/variants.py): a default variant reproduces
the stored partition, a higher resolution splits the coarsest level further, variants persist, names and settings
are checked, and promoting swaps the Leiden partition (reports, vectors, build version) and back again.

The workspace is the sample corpus built for this module alone (promoting changes it, so the session's shared
`sample_built` is left alone)."""

from __future__ import annotations

import numpy as np
import pytest
from sqlmodel import select

from core.access import LOCAL
from core.models import Community, CommunityVariant
from core.pipeline.factory import open_index
from core.quality import compare as C
from core.quality import promote as P
from core.quality import variants as V
from core.quality.data import load_base, stored_groups
from core.store import Store
from tests.conftest import SAMPLE_DIR, build_workspace


@pytest.fixture(scope="module")
def built(tmp_path_factory, embedder):
    return build_workspace(tmp_path_factory.mktemp("variants"), [SAMPLE_DIR], embedder, name="sample")


@pytest.fixture(scope="module")
def index(built):
    return open_index(built.settings, built.ws.name, built.ws.embedder)


def _ws(built):
    return built.store.require_workspace(built.ws.name)


def _run(built, index, name: str, vs: V.VariantSettings) -> dict:
    events = list(V.run_variant(built.store, index, _ws(built), name, vs, built.settings))
    assert events[-1].counts["variant"] == name
    return events[-1].counts


def _leiden(store, ws_id: int) -> dict[str, tuple[int, frozenset[str]]]:
    """id -> (level, member ids) of the stored Leiden communities."""
    with store.session() as s:
        rows = s.exec(select(Community.id, Community.level).where(Community.workspace_id == ws_id,
                                                                  Community.method == "leiden")).all()
    base_ids = load_base_ids(store, ws_id)
    groups = stored_groups(store, ws_id, "leiden", {e: i for i, e in enumerate(base_ids)})
    members = {g.id: frozenset(base_ids[i] for i in g.members.tolist()) for g in groups}
    return {cid: (lv, members[cid]) for cid, lv in rows}


def load_base_ids(store, ws_id: int) -> list[str]:
    """The vertices `leiden` clusters: the layer-0 entities of the extracted graph, in id order."""
    from core.graph.entity_graph import load_entity_graph

    return load_entity_graph(store, ws_id).extracted().ids


def _variant_sets(built, index, name: str) -> set[tuple[int, frozenset[str]]]:
    base = load_base(built.store, index, built.ws.id)
    v = V.get_variant(built.store, _ws(built), name)
    return {(g.level, frozenset(base.ids[i] for i in g.members.tolist())) for g in V.variant_groups(base, v)}


def test_default_variant_reproduces_the_stored_partition(built, index):
    vs = V.defaults(built.store, built.ws.id, built.settings)
    assert (vs.resolution, vs.max_cluster_size, vs.seed, vs.knn) == (1.0, 10, 42, False)
    _run(built, index, "same", vs)
    stored = set(_leiden(built.store, built.ws.id).values())
    assert _variant_sets(built, index, "same") == stored  # the very same communities, level by level
    rows = C.compare(built.store, index, _ws(built), ["same"], built.settings)
    mine = [r for r in rows if r["partition"] == "same"]
    assert mine and all(r["nmi"] == pytest.approx(1.0) and r["ari"] == pytest.approx(1.0) for r in mine)
    cur = {r["level"]: r for r in rows if r["partition"] == V.CURRENT}
    for r in mine:  # same partition, same graph: the same figures
        assert r["modularity"] == pytest.approx(cur[r["level"]]["modularity"])
        assert r["own_modularity"] == pytest.approx(r["modularity"])  # default settings cluster the build's graph


def test_higher_resolution_gives_more_communities(built, index):
    vs = V.defaults(built.store, built.ws.id, built.settings)
    counts = _run(built, index, "res-2", V.VariantSettings(**{**vs.__dict__, "resolution": 2.0}))
    stored = _leiden(built.store, built.ws.id)
    coarse_now = sum(1 for lv, _ in stored.values() if lv == 0)
    # Leiden at resolution 2 splits the coarsest level (level 0, the first Leiden pass over each component) into
    # more communities. The total over all levels need not grow: the recursive split only re-clusters communities
    # larger than max_cluster_size, and a finer level 0 leaves fewer of those.
    assert counts["communities_per_level"]["0"] > coarse_now
    rows = C.compare(built.store, index, _ws(built), ["res-2"], built.settings)
    level0 = next(r for r in rows if r["partition"] == "res-2" and r["level"] == 0)
    assert level0["nmi"] < 1.0 and level0["ari"] < 1.0


def test_variant_persists_and_reloads(built, index):
    vs = V.VariantSettings(resolution=1.5, use_weights=False, max_cluster_size=6, max_levels=3, seed=7)
    _run(built, index, "persisted", vs)
    fresh = Store(built.settings.storage.db_url)  # a new engine: only what is on disk
    v = V.get_variant(fresh, fresh.require_workspace("sample"), "persisted")
    assert V.VariantSettings.from_dict(v.settings) == vs
    assert set(v.metrics) == {str(lv) for lv, *_ in v.partition["clusters"]}
    assert all(k in v.metrics["0"] for k in ("modularity", "coverage", "cluster_sparsity", "own_modularity"))
    assert v.partition["entities"] == load_base_ids(fresh, v.workspace_id)
    assert max(lv for lv, *_ in v.partition["clusters"]) <= 2  # max_levels 3 -> levels 0..2
    assert "persisted" in [x.name for x in V.list_variants(fresh, fresh.require_workspace("sample"))]
    # the same settings and seed again give the same partition (deterministic)
    _run(built, index, "persisted-again", vs)
    assert _variant_sets(built, index, "persisted") == _variant_sets(built, index, "persisted-again")
    V.delete_variant(fresh, LOCAL, fresh.require_workspace("sample"), "persisted-again")
    with pytest.raises(V.VariantError, match="no variant named"):
        V.get_variant(fresh, fresh.require_workspace("sample"), "persisted-again")


def test_names_and_settings_are_checked(built, index):
    ws = _ws(built)
    for bad, said in [("", "give the variant a name"), ("   ", "give the variant a name"),
                      ("a/b", "invalid name"), ("-x", "invalid name"), ("x" * 49, "invalid name"),
                      ("Current", "is the stored partition"), ("same", "already exists")]:
        if said == "already exists" and "same" not in [v.name for v in V.list_variants(built.store, ws)]:
            _run(built, index, "same", V.defaults(built.store, ws.id, built.settings))
        with pytest.raises(V.VariantError, match=said):
            V.check_name(built.store, ws, bad)
    assert V.check_name(built.store, ws, "  my variant_1.b-2 ") == "my variant_1.b-2"
    for d, said in [({"resolution": 0}, "resolution must be above 0"), ({"resolution": "abc"}, "resolution must be a number"),
                    ({"max_cluster_size": 1}, "max cluster size must be at least 2"),
                    ({"max_levels": 0}, "levels must be between 1 and 10"), ({"seed": -1}, "seed must be"),
                    ({"knn_k": 0}, "KNN neighbours"), ({"min_similarity": 2}, "KNN minimum similarity"),
                    ({"max_levels": 2.5}, "max levels must be a whole number")]:
        with pytest.raises(V.VariantError, match=said):
            V.VariantSettings.from_dict(d)
    with pytest.raises(V.VariantError):  # nothing is stored on a bad run
        list(V.run_variant(built.store, index, ws, "ok-name", V.VariantSettings(resolution=-1), built.settings))
    assert "ok-name" not in [v.name for v in V.list_variants(built.store, ws)]


def test_variants_cluster_the_extracted_graph_the_stage_clustered(built, index):
    from core.graph.entity_graph import load_entity_graph

    full = load_base(built.store, index, built.ws.id)
    base = full.extracted()
    assert (full.layer > 0).any(), "the sample has HiRAG summary entities"
    assert base.ids == load_base_ids(built.store, built.ws.id) and (base.layer == 0).all()
    gen = V.variant_graph(base, V.VariantSettings())
    with pytest.raises(StopIteration) as stop:
        next(gen)
    g = stop.value.value
    stage_g = load_entity_graph(built.store, built.ws.id).extracted().to_igraph()
    assert g.vcount() == stage_g.vcount() and g.get_edgelist() == stage_g.get_edgelist()
    assert g.es["weight"] == pytest.approx(stage_g.es["weight"])


def test_knn_augmentation_adds_links_and_changes_the_partition(built, index):
    base = load_base(built.store, index, built.ws.id).extracted()
    plain = V.VariantSettings()
    gen = V.variant_graph(base, plain)
    with pytest.raises(StopIteration) as stop:
        next(gen)
    g_plain = stop.value.value
    g_knn = None
    gen = V.variant_graph(base, V.VariantSettings(knn=True, knn_k=5, min_similarity=0.3))
    try:
        while True:
            next(gen)
    except StopIteration as done:
        g_knn = done.value
    assert g_knn.ecount() > g_plain.ecount()
    assert g_plain.vcount() == g_knn.vcount() == len(base.ids)
    w = np.array(g_knn.es["weight"])
    assert (w > 0).all()
    counts = _run(built, index, "knn", V.VariantSettings(knn=True, knn_k=5, min_similarity=0.3))
    assert counts["communities_per_level"]
    row = next(r for r in C.compare(built.store, index, _ws(built), ["knn"], built.settings)
               if r["partition"] == "knn" and r["level"] == 0)
    assert row["nmi"] < 1.0
    assert row["own_modularity"] != pytest.approx(row["modularity"])  # its own graph is not the build's


def test_promote_swaps_the_partition_and_back(built, index, embedder):
    store = built.store
    ws = _ws(built)
    if "res-2" not in [v.name for v in V.list_variants(store, ws)]:
        vs = V.defaults(store, ws.id, built.settings)
        _run(built, index, "res-2", V.VariantSettings(**{**vs.__dict__, "resolution": 2.0}))
    before = _leiden(store, ws.id)
    with store.session() as s:
        reports = {c.id: (c.title, c.summary) for c in s.exec(select(Community).where(
            Community.workspace_id == ws.id, Community.method == "leiden"))}
    target = _variant_sets(built, index, "res-2")
    assert target != set(before.values())

    ctx = P.promote_context(store, ws, built.settings, embedder)
    events = list(P.promote(ctx, "res-2"))
    snap = events[-1].counts["snapshot"]
    assert snap.startswith("before-")
    after = _leiden(store, ws.id)
    assert set(after.values()) == target  # the variant's communities are now the leiden ones
    assert _ws(built).build_version == ws.build_version + 1
    with store.session() as s:
        rows = s.exec(select(Community).where(Community.workspace_id == ws.id, Community.method == "leiden")).all()
        all_ids = set(s.exec(select(Community.id).where(Community.workspace_id == ws.id)))
    assert rows and all(r.summary and r.title for r in rows)  # reports generated for the new communities
    assert all(r.data.get("variant") == "res-2" for r in rows)
    parents = {r.id for r in rows}
    assert all(r.parent_id in parents for r in rows if r.parent_id)
    vec_ids = set(index.existing("community"))
    assert set(after) <= vec_ids  # new communities embedded
    assert not (set(before) - set(after)) & vec_ids  # old leiden vectors gone
    assert vec_ids <= all_ids
    # the snapshot holds the old partition and its reports
    snap_row = V.get_variant(store, _ws(built), snap)
    assert snap_row.settings.get("snapshot") is True
    assert set(snap_row.partition["reports"]) == {cid for cid, (_, summ) in reports.items() if summ}

    events = list(P.promote(P.promote_context(store, _ws(built), built.settings, embedder), snap))
    restored = _leiden(store, ws.id)
    assert restored == before  # same ids, levels and members
    with store.session() as s:
        again = {c.id: (c.title, c.summary) for c in s.exec(select(Community).where(
            Community.workspace_id == ws.id, Community.method == "leiden"))}
    assert again == reports  # the very reports, restored rather than regenerated
    assert set(before) <= set(index.existing("community"))
    assert _ws(built).build_version == ws.build_version + 2
    assert events[-1].counts["snapshot"] != snap  # promoting back saved the variant's partition in turn
    with store.session() as s:
        n = len(s.exec(select(CommunityVariant.id).where(CommunityVariant.workspace_id == ws.id)).all())
    assert n >= 3


def test_promoting_an_unknown_variant_says_so(built, embedder):
    ws = _ws(built)
    with pytest.raises(V.VariantError, match="no variant named"):
        list(P.promote(P.promote_context(built.store, ws, built.settings, embedder), "nope"))


def test_communities_left_empty_are_dropped_and_their_children_rehung():
    g = [V.Group("", "", 0, np.array([0, 1, 2])), V.Group("", "", 1, np.array([], dtype=np.int64), 0),
         V.Group("", "", 2, np.array([1]), 1), V.Group("", "", 1, np.array([2]), 0)]
    kept = P._non_empty(g)
    # group 1 lost its members: its child (group 2) hangs from group 0, group 3 is now index 2
    assert [(k.level, k.members.tolist(), k.parent) for k in kept] == [(0, [0, 1, 2], -1), (2, [1], 0), (1, [2], 0)]
    assert P._non_empty(kept) is kept


def test_deleting_a_workspace_deletes_its_variants(tmp_path):
    store = Store(tmp_path / "strata.db")
    ws = store.create_workspace("gone")
    with store.session() as s:
        s.add(CommunityVariant(workspace_id=ws.id, name="v", partition={"entities": [], "clusters": []}))
        s.commit()
    assert [v.name for v in V.list_variants(store, ws)] == ["v"]
    store.delete_workspace(ws)
    with store.session() as s:
        assert s.exec(select(CommunityVariant)).all() == []
