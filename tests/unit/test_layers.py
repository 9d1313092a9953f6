"""HiRAG HiIndex layering (core/algorithms/layers.py): cluster sparsity (Eq. 17), RAPTOR's global-then-local GMM + BIC,
soft membership, the paper's stop rule (§5.4), summary entities (offline, and the model reply's cleaning).
Real computation on seeded synthetic embeddings."""

from __future__ import annotations

import time

import numpy as np
import pytest

from core.algorithms.layers import (
    LayerClustering,
    change_rate,
    cluster_layer,
    cluster_sparsity,
    meta_summary_concepts,
    stop_reason,
    summary_entity_offline,
    term_groups,
    too_few_reason,
)
from core.backends.replies import MalformedReply
from core.backends.summary_replies import clean_summary_entities, offline_summary_entities
from core.config import LayerSettings
from core.protocols import SummaryEntities, SummaryEntity, SummaryRelation


def blobs(n: int, d: int, k: int, *, spread: float = 0.5, sep: float = 24.0, seed: int = 0):
    """n rows around k random centres in d dims (centre distances ~ sep, within-blob std `spread`)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d)) * sep / np.sqrt(2 * d)
    labels = np.arange(n) % k
    rng.shuffle(labels)
    return (centres[labels] + rng.normal(size=(n, d)) * spread).astype(np.float32), labels


def as_partition(clusters: list[list[int]]) -> set[frozenset[int]]:
    return {frozenset(c) for c in clusters}


# ------------------------------------------------------------------------------------------------ cluster sparsity


def test_sparsity_all_singletons_is_one():
    assert cluster_sparsity([[i] for i in range(7)], 7) == 1.0


def test_sparsity_one_cluster_of_all_is_zero():
    assert cluster_sparsity([list(range(7))], 7) == 0.0


def test_sparsity_mixed_case_by_hand():
    # sizes 3, 2, 1 over n = 6: 1 - (3*2 + 2*1 + 0) / (6*5) = 1 - 8/30
    assert cluster_sparsity([[0, 1, 2], [3, 4], [5]], 6) == pytest.approx(1 - 8 / 30)
    # 4 pairs of 2 over n = 8: 1 - 4*2/56 = 1 - 1/7
    assert cluster_sparsity([[0, 1], [2, 3], [4, 5], [6, 7]], 8) == pytest.approx(6 / 7)


def test_sparsity_overlapping_clusters_count_as_the_formula_sums():
    # soft clusters overlap (Eq. 8 allows it); Eq. 17 sums |S|(|S|-1) over clusters: 1 - (6 + 2) / 12
    assert cluster_sparsity([[0, 1, 2], [2, 3]], 4) == pytest.approx(1 / 3)


def test_sparsity_degenerate_sizes():
    assert cluster_sparsity([[0]], 1) == 1.0
    assert cluster_sparsity([], 0) == 1.0


def test_change_rate_formula():
    assert change_rate(0.9, None) is None
    assert change_rate(0.9, 0.8) == pytest.approx(0.1 / 0.8)
    assert change_rate(0.76, 0.8) == pytest.approx(0.04 / 0.8)  # relative, absolute value
    assert change_rate(0.0, 0.0) == 0.0
    assert change_rate(0.5, 0.0) == float("inf")


# ----------------------------------------------------------------------------------------------------- clustering


def test_bic_picks_three_on_three_separated_blobs():
    x, labels = blobs(300, 384, 3, seed=1)
    c = cluster_layer(x, LayerSettings(), layer=0, previous_sparsity=None)
    assert c.n_components == 3
    assert min(c.bic, key=lambda kb: kb[1])[0] == 3
    assert [k for k, _ in c.bic] == sorted(k for k, _ in c.bic)
    # the scan stops after 4 candidates in a row without a better BIC than k = 3, below the bound 300 // (10 + 1)
    assert [k for k, _ in c.bic] == [1, 2, 3, 4, 5, 6, 7]
    truth = {frozenset(np.flatnonzero(labels == j).tolist()) for j in range(3)}
    assert as_partition(c.clusters) == truth
    # sparsity of three equal clusters of 100 over 300: 1 - 3*100*99 / (300*299)
    assert c.sparsity == pytest.approx(1 - 3 * 100 * 99 / (300 * 299))
    assert c.change_rate is None and c.layer == 0 and c.n == 300


def test_bic_without_pca_on_low_dimensional_input():
    x, _ = blobs(240, 2, 3, sep=30.0, seed=3)
    c = cluster_layer(x, LayerSettings(), layer=1, previous_sparsity=None)
    assert c.n_components == 3


def test_change_rate_is_reported_against_previous_sparsity():
    x, _ = blobs(300, 384, 3, seed=1)
    c = cluster_layer(x, LayerSettings(), layer=1, previous_sparsity=0.5)
    assert c.change_rate == pytest.approx(abs(c.sparsity - 0.5) / 0.5)


def test_soft_membership_puts_a_midway_point_in_both_clusters():
    rng = np.random.default_rng(7)
    left = rng.normal(size=(100, 2)) + [-4.0, 0.0]
    right = -left  # mirrored through the origin, so the fitted mixture is symmetric and (0, 0) is truly midway
    mid = np.array([[0.0, 0.0]])
    x = np.vstack([left, right, mid])
    m = len(x) - 1
    soft = cluster_layer(x, LayerSettings(membership_threshold=0.1), 0, None)
    assert soft.n_components == 2
    holding = [c for c in soft.clusters if m in c]
    assert len(holding) == 2
    # ordinary points stay in one cluster
    assert sum(1 for c in soft.clusters if 0 in c) == 1
    # a threshold above 0.5 leaves only the argmax: exactly one cluster, never none
    hard = cluster_layer(x, LayerSettings(membership_threshold=0.9), 0, None)
    assert sum(1 for c in hard.clusters if m in c) == 1
    assert sorted(i for c in hard.clusters for i in c) == list(range(len(x)))


def test_every_row_belongs_to_some_cluster_and_no_cluster_is_empty():
    x, _ = blobs(500, 64, 6, spread=3.0, seed=4)  # overlapping blobs
    c = cluster_layer(x, LayerSettings(), 0, None)
    covered = set().union(*map(set, c.clusters))
    assert covered == set(range(500))
    assert all(c.clusters)


def test_deterministic_with_the_seed():
    x, _ = blobs(800, 128, 5, spread=2.0, seed=5)
    a = cluster_layer(x, LayerSettings(seed=11), 0, None)
    b = cluster_layer(x.copy(), LayerSettings(seed=11), 0, None)
    assert a.clusters == b.clusters
    assert a.bic == b.bic
    assert a.sparsity == b.sparsity


def test_tiny_and_degenerate_layers():
    one = cluster_layer(np.ones((1, 8)), LayerSettings(), 0, None)
    assert one.clusters == [[0]] and one.sparsity == 1.0
    same = cluster_layer(np.ones((5, 8)), LayerSettings(), 0, None)
    assert same.clusters == [[0, 1, 2, 3, 4]] and same.sparsity == 0.0
    empty = cluster_layer(np.zeros((0, 8)), LayerSettings(), 0, None)
    assert empty.clusters == []
    four = cluster_layer(np.random.default_rng(0).normal(size=(4, 384)), LayerSettings(), 0, None)
    assert four.n_components <= 2
    with pytest.raises(ValueError):
        cluster_layer(np.full((4, 3), np.nan), LayerSettings(), 0, None)


def test_twenty_thousand_rows_of_384_dims_cluster(capsys):
    x, _ = blobs(20_000, 384, 12, spread=1.0, seed=9)
    t = time.perf_counter()
    c = cluster_layer(x, LayerSettings(), 0, None)
    dt = time.perf_counter() - t
    with capsys.disabled():
        print(f"\n20,000 x 384: {dt:.2f} s, k = {c.n_components}, {len(c.clusters)} clusters, CS = {c.sparsity:.4f}")
    assert c.n_components == 12
    assert set().union(*map(set, c.clusters)) == set(range(20_000))
    assert 0.0 < c.sparsity < 1.0


# ------------------------------------------------------------------------------------------ global then local


def nested_blobs(n_super: int, n_sub: int, per: int, d: int, *, super_sep: float, sub_sep: float, seed: int):
    """Blobs inside blobs: n_super far-apart groups, each of n_sub close blobs of `per` rows (std 0.5)."""
    rng = np.random.default_rng(seed)
    supers = rng.normal(size=(n_super, d)) * super_sep / np.sqrt(2 * d)
    rows, labels = [], []
    for i in range(n_super):
        subs = supers[i] + rng.normal(size=(n_sub, d)) * sub_sep / np.sqrt(2 * d)
        for j in range(n_sub):
            rows.append(subs[j] + rng.normal(size=(per, d)) * 0.5)
            labels += [i * n_sub + j] * per
    return np.vstack(rows), np.array(labels)


def test_blobs_inside_blobs_global_clusters_then_local_clusters():
    # 15 groups far apart (their spread fills the global PCA's 10 dimensions), each of 4 close blobs: the global
    # BIC sees the 15 groups; reducing again inside each group shows its 4 blobs, which the local BIC finds
    x, labels = nested_blobs(15, 4, 24, 64, super_sep=300.0, sub_sep=10.0, seed=4)
    c = cluster_layer(x, LayerSettings(), 0, None)
    assert c.n_components == 15
    assert c.local_components == [4] * 15
    assert len(c.clusters) == 60 > c.n_components
    truth = {frozenset(np.flatnonzero(labels == j).tolist()) for j in range(60)}
    assert as_partition(c.clusters) == truth
    assert c.sparsity == pytest.approx(1 - 60 * 24 * 23 / (1440 * 1439))


def test_no_cap_at_fifty_clusters():
    # 80 separated blobs: one BIC search is bounded at 50 (RAPTOR's bound), the local searches split the global
    # clusters that hold several blobs, so all 80 are found
    x, labels = blobs(2000, 64, 80, seed=3)
    c = cluster_layer(x, LayerSettings(), 0, None)
    assert c.n_components == 50 and max(k for k, _ in c.bic) == 50
    assert len(c.clusters) == 80
    assert as_partition(c.clusters) == {frozenset(np.flatnonzero(labels == j).tolist()) for j in range(80)}


def test_small_global_cluster_is_not_clustered_locally():
    # RAPTOR keeps a global cluster of <= reduce_dim + 1 members whole: 3 blobs of 11 rows stay 3 clusters
    x, _ = blobs(33, 64, 3, seed=6)
    c = cluster_layer(x, LayerSettings(), 0, None)
    assert c.local_components == [1, 1, 1] and len(c.clusters) == 3


# ------------------------------------------------------------------------------------------------------ stop rules


def _clustering(clusters: list[list[int]], n: int, previous: float | None, layer: int = 0) -> LayerClustering:
    cs = cluster_sparsity(clusters, n)
    return LayerClustering(layer=layer, clusters=clusters, n_components=len(clusters), bic=[], sparsity=cs,
                           change_rate=change_rate(cs, previous), n=n)


def test_stop_rule_follows_algorithm_1_on_hand_computed_sparsity():
    cfg = LayerSettings()
    # layer 0: sizes 3, 2, 1 over 6 -> CS_1 = 1 - 8/30 = 0.7333; no previous CS: never stops on the first layer
    c0 = _clustering([[0, 1, 2], [3, 4], [5]], 6, None)
    assert c0.sparsity == pytest.approx(22 / 30) and stop_reason(c0, cfg) is None
    # layer 1: 4 pairs over 8 -> CS_2 = 6/7 = 0.8571; change |6/7 - 22/30| / (22/30) = 16.9 % > 5 %: go on
    c1 = _clustering([[0, 1], [2, 3], [4, 5], [6, 7]], 8, c0.sparsity, layer=1)
    assert c1.change_rate == pytest.approx((6 / 7 - 22 / 30) / (22 / 30)) and stop_reason(c1, cfg) is None
    # layer 2: 5 pairs over 10 -> CS_3 = 1 - 10/90 = 0.8889; change 3.7 % <= 5 %: stop, layer 3 is not built
    c2 = _clustering([[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]], 10, c1.sparsity, layer=2)
    assert c2.change_rate == pytest.approx((8 / 9 - 6 / 7) / (6 / 7))
    assert stop_reason(c2, cfg) == ("cluster sparsity change rate 3.7% <= ε 5% (CS 0.8889; hirag.txt §5.4, "
                                    "Algorithm 1 line 9)")


def test_stop_rule_is_inclusive_and_ignores_the_sparsity_level():
    # line 9 tests "<= ε": 0.5 -> 0.625 changes by exactly 25 %, which stops at ε = 25 % (exact in binary)
    at = LayerClustering(0, [], 1, [], 0.625, change_rate(0.625, 0.5), 4)
    assert at.change_rate == 0.25
    assert stop_reason(at, LayerSettings(change_rate_stop=0.25)) is not None
    assert stop_reason(at, LayerSettings(change_rate_stop=0.2499)) is None
    # a very sparse clustering is not a reason by itself (HiRAG's code had CS >= 0.98; the paper does not)
    sparse = LayerClustering(0, [], 1, [], 0.995, change_rate(0.995, 0.5), 4)
    assert stop_reason(sparse, LayerSettings()) is None
    first = LayerClustering(0, [], 1, [], 0.995, None, 4)
    assert stop_reason(first, LayerSettings()) is None


def test_too_few_entities_and_the_safety_cap():
    cfg = LayerSettings()
    assert too_few_reason(2, 2, cfg) == "layer 2 has 2 entities: too few to cluster (< 3)"
    assert too_few_reason(1, 1, cfg) == "layer 1 has 1 entity: too few to cluster (< 3)"
    assert too_few_reason(2, 3, cfg) is None
    assert too_few_reason(1, 100, LayerSettings(max_layers=1)) == "reached the safety cap max_layers 1"


# ----------------------------------------------------------------------------------------- meta summary and titles

ASTRO = [
    ("Orion Nebula", "The Orion Nebula is a star forming region. Astronomers observe the nebula with a space telescope."),
    ("Hubble Space Telescope", "The Hubble Space Telescope observes distant galaxies. The space telescope orbits Earth."),
    ("Andromeda Galaxy", "The Andromeda Galaxy is the nearest large galaxy. Astronomers measured it with a space telescope."),
]
COOK = [
    ("Sourdough Bread", "Sourdough bread is baked from a fermented dough. Bakers feed the starter with flour and water."),
    ("Croissant", "A croissant is a pastry baked from laminated dough with butter. Bakers fold the dough many times."),
    ("Baguette", "The baguette is a long French bread. Its dough is baked in a hot oven by bakers."),
]


def test_meta_summary_concepts_are_shared_terms():
    texts = [t for _, t in ASTRO + COOK]
    concepts = meta_summary_concepts(texts, k=6)
    assert 1 <= len(concepts) <= 6
    assert concepts == meta_summary_concepts(texts, k=6)
    for c in concepts:  # each concept occurs in at least two of the texts
        assert sum(c in t.lower() for t in texts) >= 2
    assert any(c in ("space telescope", "dough", "bakers", "baked") for c in concepts)
    assert meta_summary_concepts([]) == []


def test_summary_entity_offline_names_differ_across_groups():
    concepts = meta_summary_concepts([t for _, t in ASTRO + COOK])
    name_a, desc_a = summary_entity_offline([t for t, _ in ASTRO], [x for _, x in ASTRO], concepts)
    name_b, _ = summary_entity_offline([t for t, _ in COOK], [x for _, x in COOK], concepts)
    assert name_a.strip() and name_b.strip()
    assert name_a != name_b
    assert "telescope" in name_a.lower() or "astronomers" in name_a.lower() or "galaxy" in name_a.lower()
    assert any(w in name_b.lower() for w in ("dough", "bakers", "baked", "bread"))
    # extractive: the description is made of member sentences, and it is deterministic
    assert any(s in desc_a for _, x in ASTRO for s in x.split(". "))
    assert (name_a, desc_a) == summary_entity_offline([t for t, _ in ASTRO], [x for _, x in ASTRO], concepts)


def test_summary_entity_offline_without_concepts_or_text():
    name, desc = summary_entity_offline(["Alpha Corp", "Beta Corp"], ["", ""], [])
    assert name.strip()
    assert "Alpha Corp" in desc


SINGERS = [("Ana Reyes", "Ana Reyes is a singer known for her first album. She was born in Lima and said the album "
                         "was new."),
           ("Bo Lind", "Bo Lind is a singer known for his first album. He was born in Oslo and said the album was new."),
           ("Cai Wen", "Cai Wen is a singer known for her first album. She was born in Xi'an and said the album was "
                       "new.")]


def test_summary_entity_is_named_by_nouns_when_spacy_reads_them():
    """Concepts and keywords that every member shares but that are no concept ("known", "born", "said", "new"):
    without a reading of parts of speech the most shared one names the cluster; with spaCy's (the offline backend's
    `NounReader`) only nouns do, and the words it read are counted."""
    from core.extract.nouns import NounReader

    titles, texts = [t for t, _ in SINGERS], [x for _, x in SINGERS]
    plain, _ = summary_entity_offline(titles, texts, ["known", "born", "said"])
    assert plain.split(" — ")[0].lower() in {"known", "born", "said"}
    reader = NounReader()
    named, desc = summary_entity_offline(titles, texts, ["known", "born", "said"], reader.nouns)
    head, disamb = named.lower().split(" — ")
    assert head.split()[-1] == "album" and disamb == "singer", named  # "first album": a phrase ending in a noun
    assert not set(named.lower().split()) & {"known", "born", "said", "new"}, named
    assert reader.counts["known"][0] == 0 < reader.counts["known"][1]  # read, and never as a noun
    assert reader.counts["album"][0] == reader.counts["album"][1] > 0
    # the description does not depend on the reading
    assert desc == summary_entity_offline(titles, texts, ["known", "born", "said"])[1]
    # the offline backend reads nouns when spaCy runs, and its summary entity is the one named that way
    from core.backends.offline import OfflineBackend

    backend = OfflineBackend(extractor="spacy")
    assert backend.uses_spacy
    assert backend.summary_entities(SINGERS, ["known", "born", "said"]).entities[0].name == named


# ------------------------------------------------------------------------------------ summary entities (Appendix I.3)


def test_offline_summary_entities_of_one_topic_are_one_entity_related_to_every_member():
    rep = offline_summary_entities(ASTRO, meta_summary_concepts([t for _, t in ASTRO + COOK]))
    assert len(rep.entities) == 1
    name = rep.entities[0].name
    assert (name, rep.entities[0].description) == summary_entity_offline([t for t, _ in ASTRO],
                                                                         [x for _, x in ASTRO],
                                                                         meta_summary_concepts([t for _, t in
                                                                                                ASTRO + COOK]))
    assert [(r.source, r.target) for r in rep.relationships] == [(t, name) for t, _ in ASTRO]


def test_offline_summary_entities_are_a_set_each_related_to_its_members():
    """HiRAG's model makes a SET of summary entities from a cluster, each related to the members clearly related to
    it (hirag.txt §4.1, Appendix I.3); offline, one per group of members sharing a term: a cluster holding two
    topics gives two summary entities, each summarizing its own topic's members only."""
    mixed = [ASTRO[0], COOK[0], ASTRO[1], COOK[1], ASTRO[2], COOK[2]]
    rep = offline_summary_entities(mixed, meta_summary_concepts([t for _, t in mixed]))
    assert len(rep.entities) == 2
    related: dict[str, set[str]] = {}
    for r in rep.relationships:
        related.setdefault(r.target, set()).add(r.source)
    assert sorted(map(frozenset, related.values()), key=sorted) == sorted(
        [frozenset(t for t, _ in ASTRO), frozenset(t for t, _ in COOK)], key=sorted)


def test_term_groups_cover_every_member_and_leftovers_join_the_closest_group():
    titles = ["Alpha", "Beta", "Gamma", "Delta", "Epsilon"]
    texts = ["red apple orchard", "red apple harvest", "green pear orchard", "green pear tree", "blue sky"]
    # phrases held by two come first (alphabetical on a tie); "orchard" would join only one more member; "blue sky"
    # shares nothing and joins the first group
    assert term_groups(titles, texts) == [[2, 3, 4], [0, 1]]
    assert term_groups(["A", "B"], ["one thing", "another matter"]) == [[0, 1]]  # nothing shared: one group
    assert term_groups([], []) == []


def test_model_reply_is_cleaned_to_members_and_summary_entities():
    rep = SummaryEntities(
        entities=[SummaryEntity(name=" Meta ", type="company", description="A conglomerate."),
                  SummaryEntity(name="meta", type="company", description="again"),
                  SummaryEntity(name="", type="x", description="nameless")],
        relationships=[SummaryRelation(source="instagram", target="META", description="made by", weight=42),
                       SummaryRelation(source="Instagram", target="Meta", description="twice", weight=3),
                       SummaryRelation(source="Nobody", target="Meta", description="not a member"),
                       SummaryRelation(source="WhatsApp", target="Google", description="not a summary entity")])
    out = clean_summary_entities(rep, ["Instagram", "WhatsApp"])
    assert [(e.name, e.type) for e in out.entities] == [("Meta", "company")]
    assert [(r.source, r.target, r.weight) for r in out.relationships] == [("Instagram", "Meta", 10.0)]
    with pytest.raises(MalformedReply):
        clean_summary_entities(SummaryEntities(entities=[SummaryEntity(name=" ", type="", description="")]), [])
