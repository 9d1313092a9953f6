"""HiRAG HiIndex layering (core/algorithms/layers.py): cluster sparsity (Eq. 17), RAPTOR's global-then-local GMM + BIC,
soft membership, the paper's stop rule (§5.4), summary entities (offline, and the model reply's cleaning).
Real computation on seeded synthetic embeddings."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from core.algorithms.layers import (
    LayerClustering,
    change_rate,
    cluster_layer,
    cluster_sparsity,
    collapse_reason,
    is_plateau,
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
    # after a layer that was one cluster (CS 0) there is no rate: 0 -> 0 is no plateau, 0 -> x no change "rate"
    assert change_rate(0.0, 0.0) is None
    assert change_rate(0.5, 0.0) is None


# ----------------------------------------------------------------------------------------------------- clustering


def test_bic_picks_three_on_three_separated_blobs():
    x, labels = blobs(300, 384, 3, seed=1)
    c = cluster_layer(x, LayerSettings(), layer=0, previous_sparsity=None)
    assert c.n_components == 3
    assert min(c.bic, key=lambda kb: kb[1])[0] == 3
    ks = [k for k, _ in c.bic]
    assert ks == list(range(1, len(ks) + 1)) and max(ks) <= 49  # k = 1, 2, ... up to min(n, 50) - 1 (HiRAG's code)
    truth = {frozenset(np.flatnonzero(labels == j).tolist()) for j in range(3)}
    assert as_partition(c.clusters) == truth
    # sparsity of three equal clusters of 100 over 300: 1 - 3*100*99 / (300*299)
    assert c.sparsity == pytest.approx(1 - 3 * 100 * 99 / (300 * 299))
    assert c.change_rate is None and c.layer == 0 and c.n == 300


def test_bic_scan_stops_when_bic_changes_by_less_than_a_thousandth():
    from core.algorithms.layer_gmm import REL_TOL, best_k

    rng = np.random.default_rng(0)
    # one wide Gaussian: |BIC| is large (about 8e4) and each further component changes it by far less than 0.1 %
    z = rng.normal(size=(3000, 2)) * 1000.0
    best, tried, _ = best_k(z, 50, seed=0)
    ks = sorted(tried)
    assert ks[-1] < 49, "the scan stopped early"
    last, before = tried[ks[-1]], tried[ks[-2]]
    assert abs(before - last) < REL_TOL * abs(before)
    assert all(abs(tried[a] - tried[b]) >= REL_TOL * abs(tried[a]) for a, b in zip(ks[:-2], ks[1:-1]))
    assert best == min(tried, key=lambda k: (tried[k], k))


def test_no_bound_of_n_over_dims_on_small_layers():
    # the old bound k <= n // (dims + 1) allowed one component for 12 rows; HiRAG's code tries k up to n - 1
    x, _ = blobs(12, 64, 3, seed=1)
    c = cluster_layer(x, LayerSettings(), 0, None)
    assert max(k for k, _ in c.bic) > 12 // (LayerSettings().reduce_dim + 1) and c.n_components > 1
    assert max(k for k, _ in c.bic) <= 11


def test_change_rate_is_reported_against_previous_sparsity():
    x, _ = blobs(300, 384, 3, seed=1)
    c = cluster_layer(x, LayerSettings(), layer=1, previous_sparsity=0.5)
    assert c.change_rate == pytest.approx(abs(c.sparsity - 0.5) / 0.5)


def test_soft_membership_joins_every_component_at_the_threshold():
    from core.algorithms.layer_gmm import gmm_soft_clusters

    x, _ = blobs(400, 64, 4, spread=6.0, seed=2)  # blobs that touch: some rows lie between two components
    soft = gmm_soft_clusters(x, dims=2, max_components=50, threshold=0.1, seed=42)
    hard = gmm_soft_clusters(x, dims=2, max_components=50, threshold=0.999, seed=42)
    assert soft.k == hard.k
    # a threshold near 1 leaves only the argmax: exactly one cluster per row, never none
    assert sorted(i for c in hard.clusters for i in c) == list(range(400))
    assert sum(map(len, soft.clusters)) >= 400


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
    assert empty.clusters == [] and empty.change_rate is None
    three = cluster_layer(np.random.default_rng(0).normal(size=(3, 384)), LayerSettings(), 0, None)
    assert 1 <= three.n_components <= 2 and set().union(*map(set, three.clusters)) == {0, 1, 2}
    with pytest.raises(ValueError):
        cluster_layer(np.full((4, 3), np.nan), LayerSettings(), 0, None)


def test_exact_knn_matches_float_cosine_and_breaks_ties_by_index():
    from core.algorithms.layer_reduce import exact_knn

    x, _ = blobs(200, 384, 4, seed=3)
    idx, dist = exact_knn(x, 10)
    assert (idx[:, 0] == np.arange(200)).all() and (dist[:, 0] == 0).all()
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    cos = xn @ xn.T
    for i in range(0, 200, 17):  # the neighbours found are the true nearest up to the rounding of the vectors
        true = np.sort(1 - cos[i])[:10]
        assert np.allclose(np.sort(dist[i]), true, atol=0.01)
    dup = np.vstack([x[:1]] * 4 + [x[1:6]])  # four identical rows: each lists itself, then the lower indices
    idx, dist = exact_knn(dup, 4)
    assert idx[:4].tolist() == [[0, 1, 2, 3], [1, 0, 2, 3], [2, 0, 1, 3], [3, 0, 1, 2]]


def test_twenty_thousand_rows_of_384_dims_cluster(capsys):
    x, _ = blobs(20_000, 384, 12, spread=1.0, seed=9)
    t = time.perf_counter()
    c = cluster_layer(x, LayerSettings(), 0, None)
    dt = time.perf_counter() - t
    with capsys.disabled():
        print(f"\n20,000 x 384: {dt:.2f} s, k = {c.n_components}, {len(c.clusters)} clusters, CS = {c.sparsity:.4f}")
    assert c.n_components >= 2
    assert set().union(*map(set, c.clusters)) == set(range(20_000))
    assert 0.0 < c.sparsity < 1.0


# ------------------------------------------------------------------------------------------------------ stop rules


def _clustering(clusters: list[list[int]], n: int, previous: float | None, layer: int = 0) -> LayerClustering:
    cs = cluster_sparsity(clusters, n)
    return LayerClustering(layer=layer, clusters=clusters, n_components=len(clusters), bic=[], sparsity=cs,
                           change_rate=change_rate(cs, previous), n=n, previous_sparsity=previous)


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
    at = LayerClustering(0, [], 1, [], 0.625, change_rate(0.625, 0.5), 4, previous_sparsity=0.5)
    assert at.change_rate == 0.25
    assert stop_reason(at, LayerSettings(change_rate_stop=0.25)) is not None
    assert stop_reason(at, LayerSettings(change_rate_stop=0.2499)) is None
    # a very sparse clustering is not a reason by itself (HiRAG's code had CS >= 0.98; the paper does not)
    sparse = LayerClustering(0, [], 1, [], 0.995, change_rate(0.995, 0.5), 4, previous_sparsity=0.5)
    assert stop_reason(sparse, LayerSettings()) is None
    first = LayerClustering(0, [], 1, [], 0.995, None, 4)
    assert stop_reason(first, LayerSettings()) is None


def test_the_rule_never_fires_on_cs_zero_to_zero_or_on_an_empty_layer():
    """Issue 37: the ε rule fired on CS 0 -> 0 (a layer collapsed into one cluster, then its summaries into one
    again) and so reported a "plateau" that was a collapse. It must fire only on a real plateau."""
    cfg = LayerSettings()
    zero = _clustering([[0, 1, 2, 3, 4, 5]], 6, 0.0, layer=4)  # one cluster of all, after one cluster of all
    assert zero.sparsity == 0.0 and zero.change_rate is None
    assert stop_reason(zero, cfg) is None and not is_plateau(0.0, 0.0, 6, cfg)
    assert collapse_reason(zero) == "layer 4 is one cluster of its 6 entities (CS 0): its summary entities are the top layer"
    empty = LayerClustering(3, [], 0, [], 1.0, change_rate(1.0, 0.99), 0, previous_sparsity=0.99)
    assert empty.change_rate is not None and empty.change_rate <= cfg.change_rate_stop
    assert stop_reason(empty, cfg) is None and not is_plateau(1.0, 0.99, 0, cfg)
    assert not is_plateau(0.0, 0.9, 6, cfg) and not is_plateau(0.9, 0.0, 6, cfg)
    assert is_plateau(0.91, 0.9, 6, cfg)  # a real plateau: both above 0, a non-empty layer, changing <= ε
    assert collapse_reason(_clustering([[0, 1], [2, 3]], 4, None)) is None


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


def _term_groups_by_scan(member_titles, member_texts):
    """term_groups' group choice as first written: every shared term scanned for each group (the reference)."""
    from core.algorithms import layers as L

    n = max(len(member_titles), len(member_texts))
    terms = [set(L._terms(f"{member_titles[i]}. {L._MEMBER_LIST.sub('', member_texts[i])}")) for i in range(n)]
    holders: dict[str, set[int]] = {}
    for i, ts in enumerate(terms):
        for t in ts:
            holders.setdefault(t, set()).add(i)
    shared = {t: h for t, h in holders.items() if len(h) >= 2}
    groups, left = [], set(range(n))
    order = sorted(shared, key=lambda t: (-len(shared[t]), -len(t.split()), t))
    while left:
        best = max(order, key=lambda t: len(shared[t] & left), default=None)
        if best is None or len(shared[best] & left) < 2:
            break
        groups.append((best, set(shared[best])))
        left -= shared[best]
    if not groups:
        return [list(range(n))]
    vocab = [set().union(*(terms[j] for j in h)) for _, h in groups]
    for i in sorted(left):
        k = max(range(len(groups)), key=lambda g: len(terms[i] & vocab[g]))
        groups[k][1].add(i)
    return [sorted(h) for _, h in groups]


def test_term_groups_choose_as_a_scan_of_every_term_would():
    """The lazy greedy choice of term_groups gives the groups a scan of every shared term per group gives, on random
    clusters with many ties (a small vocabulary), the same graph as before it."""
    import random

    rng = random.Random(7)
    vocab = ["river", "bridge", "harbour", "gate", "tower", "canal", "market", "station", "castle", "garden",
             "north bank", "old town", "iron works", "salt road"]
    for _ in range(300):
        n = rng.randint(1, 40)
        titles = [f"{rng.choice(['Amara', 'Port', 'Lake', 'Saint'])} {rng.choice(vocab).title()}" for _ in range(n)]
        texts = [" ".join(rng.sample(vocab, rng.randint(0, 5))) + "." for _ in range(n)]
        assert term_groups(titles, texts) == _term_groups_by_scan(titles, texts)


def _exact_knn_reference(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """exact_knn as it was before its float32 candidate filter: every column ranked by the exact cosine."""
    n, d = x.shape
    qmax = math.isqrt(((1 << 24) - 1) // d)  # every d-term dot product of such integers is exact in float32
    x = np.asarray(x, dtype=np.float64)
    peak = np.abs(x).max(axis=1, keepdims=True)
    q = np.rint(x / np.where(peak == 0, 1.0, peak) * qmax).astype(np.float32)
    norms = np.sqrt((q.astype(np.float64) ** 2).sum(axis=1))
    norms[norms == 0] = 1.0
    cos = (q @ q.T).astype(np.float64) / (norms[:, None] * norms[None, :])
    cos[np.arange(n), np.arange(n)] = np.inf
    order = np.lexsort((np.broadcast_to(np.arange(n), (n, n)), -cos), axis=1)[:, :k]  # by cosine, ties by index
    dd = np.maximum(0.0, 1.0 - np.take_along_axis(cos, order, 1))
    dd[:, 0] = 0.0
    return order, dd.astype(np.float32)


@pytest.mark.parametrize("n,d,k,seed", [(200, 384, 10, 3), (700, 384, 15, 12), (60, 8, 5, 1), (27, 4, 27, 2)])
def test_exact_knn_filter_keeps_every_true_neighbour(n, d, k, seed):
    from core.algorithms.layer_reduce import exact_knn

    x, _ = blobs(n, d, 4, seed=seed)
    # exact duplicates, zero rows and coarsely rounded copies: many ties at the k-th cosine
    x = np.vstack([x, x[:5], np.zeros((2, d)), np.round(x[5:20], 1)])[:max(k, n)]
    got, want = exact_knn(x, k), _exact_knn_reference(x, k)
    assert (got[0] == want[0]).all() and (got[1] == want[1]).all()
