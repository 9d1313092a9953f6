"""HiRAG's HiIndex layering (hirag.txt §4.1, Eq. 7-11, Eq. 17, Algorithm 1): pure computation, no database.

One round of Algorithm 1 over layer L_{i-1} (here `layer` = i-1, 0 = the extracted entities):

1. Z_{i-1}: the entities' embeddings (Eq. 7), passed in as `vectors` (one row per entity).
2. C_{i-1} = GMM(L_{i-1}, Z_{i-1}) (Eq. 8, "following RAPTOR"): reduce the embeddings (PCA here, RAPTOR uses UMAP),
   choose the number of Gaussian components by minimum BIC, then soft membership: a row joins every component whose
   posterior is >= `membership_threshold` (RAPTOR's 0.1), and always its most likely one, so clusters may overlap
   (Eq. 8 allows |S_x ∩ S_y| >= 0) and cover the layer (∪ S_x = L_{i-1}).
3. CS_i from C_{i-1} (Eq. 17 / Algorithm 1 line 8), and its change rate against the previous round (line 9).
4. The caller makes one summary entity per cluster (line 17, guided by the meta-summary concepts X) and decides
   with `stop_reason` whether to cluster the new layer too.

GMM choices: covariance_type="diag" (RAPTOR leaves sklearn's "full"). Measured on seeded blobs after PCA to 10 dims,
"full" (10 + 55 + 1 = 66 parameters per component against 21 for diag) made BIC under-split (50 true clusters in
2,000 rows -> 21, 20 in 300 -> 12) and, with sklearn's absolute reg_covar of 1e-6, collapsed components onto pairs
of points on small layers (3 blobs in 60 rows -> 12); diag found 50 and 20/21, 3 of 3, and is 5-10x faster. PCA has
already decorrelated the dimensions globally, which is what makes the diagonal model a reasonable fit.
reg_covar = 1e-3 x the mean per-dimension variance of the reduced data, so the floor is scale-free. The fit is seeded
(random_state=seed) and deterministic. Large layers are fitted on a seeded sample (`_FIT_SAMPLE` rows; PCA too) and
predict_proba then runs on every row; BIC is computed on that sample. The candidate k set is 1..k_max
(k_max = min(max_components, n // 2)): every k up to 12, a geometric grid (x1.3) above, refined around the best.
"""

from __future__ import annotations

import math
import re
import warnings
from collections import Counter
from dataclasses import dataclass

import numpy as np

from core.config import LayerSettings
from core.extract.text import (
    STOPWORDS,
    central_sentences,
    content_words,
    idf_table,
    split_sentences,
)

_FIT_SAMPLE = 20000  # rows used to fit PCA and the GMMs (all rows are still assigned)
_DENSE_K = 12  # try every k up to this; above, a stepped grid refined around the best
_MAX_ITER = 200
_REG = 1e-3  # covariance floor, relative to the data's mean per-dimension variance


@dataclass
class LayerClustering:
    layer: int  # the layer being clustered (0 = extracted entities)
    clusters: list[list[int]]  # member row indices per cluster (soft: a row may be in several)
    n_components: int  # chosen by BIC
    bic: list[tuple[int, float]]  # (k, BIC) tried, ascending k
    sparsity: float  # CS of this clustering (Eq. 17; the paper's CS_{layer+1} in Algorithm 1's numbering)
    change_rate: float | None  # relative change of CS vs the previous layer (None for the first)
    n: int = 0  # rows (entities) clustered


# --------------------------------------------------------------------------------------------- cluster sparsity


def cluster_sparsity(clusters: list[list[int]], n: int) -> float:
    """Cluster sparsity, hirag.txt Eq. (17) (also Algorithm 1, line 8):

        CS_i = 1 - Σ_{S ∈ C_i} |S| (|S| - 1)  /  ( |L_i| (|L_i| - 1) )

    The numerator counts the ordered pairs of distinct entities that share a cluster, the denominator all ordered
    pairs of the layer's |L_i| = n entities, so CS_i is the share of entity pairs NOT grouped together, "inspired by
    graph sparsity" (1 - density of the co-cluster graph). All singletons give 1 (the paper's worst case, nothing
    groups any more), one cluster of everything gives 0. Clusters are taken as given (soft clusters may overlap, as
    Eq. 8 allows; a pair co-clustered twice counts twice, exactly as the formula sums over clusters, so with heavy
    overlap CS can go below 0). Duplicate indices inside one cluster are counted once. With n < 2 there are no
    pairs and CS is 1.
    """
    if n < 2:
        return 1.0
    together = 0
    for c in clusters:
        s = len(set(c))
        together += s * (s - 1)
    return 1.0 - together / (n * (n - 1))


def change_rate(current: float, previous: float | None) -> float | None:
    """Relative change of cluster sparsity, |CS_i - CS_{i-1}| / CS_{i-1} (Algorithm 1, line 9; §5, ε = 5 %)."""
    if previous is None:
        return None
    if previous == 0:
        return 0.0 if current == 0 else math.inf
    return abs(current - previous) / abs(previous)


def stop_reason(c: LayerClustering, next_layer_size: int, cfg: LayerSettings) -> str | None:
    """Whether to stop after clustering layer `c.layer` into a summary layer c.layer + 1 of `next_layer_size`
    entities, i.e. not cluster that new layer again. None = go on; else why, first rule that fires:

    * CS >= sparsity_stop: most clusters hold only a few entities, nothing groups any more (§5);
    * change rate <= change_rate_stop (ε = 5 %, Algorithm 1 line 9): cluster quality no longer changes;
    * the new layer has fewer than min_entities entities: too few to cluster;
    * the new layer is summary layer max_layers: the hard cap.
    """
    if c.sparsity >= cfg.sparsity_stop:
        return f"cluster sparsity {c.sparsity:.3f} >= {cfg.sparsity_stop:g}"
    if c.change_rate is not None and c.change_rate <= cfg.change_rate_stop:
        return f"sparsity change rate {100 * c.change_rate:.1f}% <= {100 * cfg.change_rate_stop:g}%"
    if next_layer_size < cfg.min_entities:
        return f"layer {c.layer + 1} has {next_layer_size} entities (< {cfg.min_entities})"
    if c.layer + 1 >= cfg.max_layers:
        return f"reached max_layers {cfg.max_layers}"
    return None


# --------------------------------------------------------------------------------------------------- clustering


def _reduce(x: np.ndarray, dims: int, sample: np.ndarray, seed: int) -> np.ndarray:
    """PCA to `dims` dimensions, fitted on the sample rows; unchanged when already small or too few rows."""
    d = x.shape[1]
    if d <= dims or len(sample) <= dims + 1:
        return x
    from sklearn.decomposition import PCA

    solver = "randomized" if d > 4 * dims else "full"
    pca = PCA(n_components=dims, svd_solver=solver, random_state=seed)
    pca.fit(x[sample])
    return pca.transform(x)


def _candidates(k_max: int) -> list[int]:
    if k_max <= _DENSE_K:
        return list(range(1, k_max + 1))
    ks = list(range(1, _DENSE_K + 1))
    k = _DENSE_K
    while k < k_max:
        k = min(k_max, math.ceil(k * 1.3))
        ks.append(k)
    return ks


def _fit(z: np.ndarray, k: int, seed: int):
    from sklearn.mixture import GaussianMixture

    floor = float(z.var(axis=0).mean()) or 1.0
    gm = GaussianMixture(n_components=k, covariance_type="diag", random_state=seed, max_iter=_MAX_ITER,
                         reg_covar=_REG * floor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning on tiny or degenerate layers
        gm.fit(z)
    return gm


def cluster_layer(vectors: np.ndarray, cfg: LayerSettings, layer: int, previous_sparsity: float | None
                  ) -> LayerClustering:
    """GMM clustering of one layer's embeddings (hirag.txt Eq. 8, Algorithm 1 lines 6-9); see the module doc."""
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"vectors must be 2-D, got shape {x.shape}")
    n = x.shape[0]
    if n == 0:
        return LayerClustering(layer, [], 0, [], 1.0, change_rate(1.0, previous_sparsity), 0)
    if not np.isfinite(x).all():
        raise ValueError("vectors contain NaN or infinite values")
    if n < 2 or np.ptp(x, axis=0).max() == 0:
        clusters = [list(range(n))]  # one point, or all rows identical: one cluster, nothing to fit
        cs = cluster_sparsity(clusters, n)
        return LayerClustering(layer, clusters, 1, [(1, 0.0)], cs, change_rate(cs, previous_sparsity), n)

    rng = np.random.default_rng(cfg.seed)
    sample = np.sort(rng.choice(n, _FIT_SAMPLE, replace=False)) if n > _FIT_SAMPLE else np.arange(n)
    z = _reduce(x, cfg.reduce_dim, sample, cfg.seed)
    zs = z[sample]

    k_max = max(1, min(cfg.max_components, n // 2))
    tried: dict[int, float] = {}
    models: dict[int, object] = {}

    def bic_of(k: int) -> float:
        if k not in tried:
            gm = _fit(zs, k, cfg.seed)
            tried[k] = float(gm.bic(zs))
            models[k] = gm
        return tried[k]

    ks = _candidates(k_max)
    for k in ks:
        bic_of(k)
    best = min(tried, key=lambda k: (tried[k], k))
    if best > _DENSE_K:  # refine between the neighbouring coarse candidates
        i = ks.index(best)
        lo, hi = ks[i - 1], ks[min(i + 1, len(ks) - 1)]
        step = max(1, (hi - lo) // 6)
        for k in range(lo + 1, hi, step):
            bic_of(k)
        best = min(tried, key=lambda k: (tried[k], k))
    gm = models[best]

    probs = gm.predict_proba(z)  # every row, not just the sample
    member = probs >= cfg.membership_threshold
    member[np.arange(n), probs.argmax(axis=1)] = True  # every row belongs at least to its argmax
    clusters = [np.flatnonzero(member[:, j]).tolist() for j in range(member.shape[1])]
    clusters = [c for c in clusters if c]
    cs = cluster_sparsity(clusters, n)
    return LayerClustering(
        layer=layer,
        clusters=clusters,
        n_components=best,
        bic=sorted(tried.items()),
        sparsity=cs,
        change_rate=change_rate(cs, previous_sparsity),
        n=n,
    )


# ------------------------------------------------------------------------------------- meta-summary and titles

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")


def _terms(text: str) -> list[str]:
    """Content unigrams plus bigrams of adjacent content words (no stopword between): noun-ish phrases."""
    toks = [w.lower() for w in _WORD.findall(text)]
    out: list[str] = []
    prev: str | None = None
    for w in toks:
        ok = w not in STOPWORDS and len(w) > 1 and not w.isdigit()
        if ok:
            out.append(w)
            if prev is not None:
                out.append(f"{prev} {w}")
            prev = w
        else:
            prev = None
    return out


def meta_summary_concepts(texts: list[str], k: int = 8) -> list[str]:
    """A small set of guiding concepts for a layer's summary entities: the paper's meta-summary entities X (§4.1,
    Algorithm 1 line 17), which an LLM would produce ("organization", "technology", ...). Offline: the top terms
    (content words and two-word phrases, a phrase weighted double) by summed TF-IDF over the layer's texts, counting only terms found in at
    least two texts when there are several, a phrase replacing the single words it contains. Deterministic."""
    docs = [_terms(t or "") for t in texts]
    docs = [d for d in docs if d]
    if not docs:
        return []
    idf = idf_table(docs)
    df: Counter[str] = Counter()
    score: Counter[str] = Counter()
    for d in docs:
        tf = Counter(d)
        norm = math.sqrt(sum(c * c for c in tf.values())) or 1.0
        df.update(tf.keys())
        for w, c in tf.items():
            score[w] += c / norm * idf[w] * (2.0 if " " in w else 1.0)  # phrases over their words
    min_df = 2 if len(docs) >= 3 else 1
    ranked = sorted((w for w in score if df[w] >= min_df), key=lambda w: (-score[w], w))
    if not ranked:
        ranked = sorted(score, key=lambda w: (-score[w], w))
    out: list[str] = []
    for w in ranked:
        if any(w in o.split(" ") or o in w.split(" ") for o in out if " " in o or " " in w):
            continue  # "data" after "data mining", or "data mining" after "data": keep one
        out.append(w)
        if len(out) >= k:
            break
    return out


def summary_entity_offline(member_titles: list[str], member_texts: list[str], concepts: list[str]
                           ) -> tuple[str, str]:
    """A summary entity for one cluster without a model: (name, description), deterministic and extractive.

    Name: the head term is the layer concept (meta summary) shared by the most members, else the keyword shared by
    the most members (ties: a phrase, then the higher count in the cluster, then alphabetical); the disambiguator is the next most
    shared keyword (or the most central member title), e.g. "Data Mining — recommendation". Description: the most
    central member sentences (TF-IDF centroid, `central_sentences`) in their original order, then the members."""
    n = max(len(member_titles), len(member_texts))
    titles = [(member_titles[i] if i < len(member_titles) else "") or "" for i in range(n)]
    texts = [(member_texts[i] if i < len(member_texts) else "") or "" for i in range(n)]
    df: Counter[str] = Counter()
    tf: Counter[str] = Counter()
    for t, x in zip(titles, texts):
        terms = _terms(f"{t}. {x}")
        df.update(set(terms))
        tf.update(terms)

    def rank(ws) -> list[str]:
        return sorted(ws, key=lambda w: (-df[w], -len(w.split()), -tf[w], w))

    head = None
    shared_concepts = [c for c in concepts if df[c.lower()] >= max(1, min(2, n))]
    if shared_concepts:
        head = rank([c.lower() for c in shared_concepts])[0]
    keywords = rank(df)
    if head is None and keywords:
        head = keywords[0]
    if head is None:
        first = next((t for t in titles if t.strip()), "")
        return (f"Group of {first}" if first else "Summary", "")
    head_parts = set(head.split())
    disamb = next((w for w in keywords if w != head and not (set(w.split()) & head_parts)), None)
    if disamb is None:
        cw = set(content_words(" ".join(titles)))
        disamb = next((t for t in sorted(titles, key=lambda t: (-len(cw & set(content_words(t))), t))
                       if t.strip() and t.lower() != head), None)
    name = head.title() + (f" — {disamb}" if disamb else "")

    sentences: list[str] = []
    for x in texts:
        sentences.extend(split_sentences(x))
    seen: set[str] = set()
    sentences = [s for s in sentences if not (s in seen or seen.add(s))]
    picked = sorted(i for i, _ in central_sentences(sentences, 3)) if sentences else []
    body = " ".join(sentences[i] for i in picked)
    shown = [t for t in titles if t.strip()]
    members = ", ".join(shown[:12]) + (f" and {len(shown) - 12} more" if len(shown) > 12 else "")
    desc = (body + " " if body else "") + (f"Groups {len(shown)} entities: {members}." if shown else "")
    return name, desc.strip()
