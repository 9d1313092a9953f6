"""HiRAG's HiIndex layering (hirag.txt §4.1, Eq. 7-11, §5.4 Eq. 17, Algorithm 1): pure computation, no database.

One round of Algorithm 1 over layer L_{i-1} (here `layer` = i-1, 0 = the extracted entities):

1. Z_{i-1}: the entities' embeddings (Eq. 7), passed in as `vectors` (one row per entity).
2. C_{i-1} = GMM(L_{i-1}, Z_{i-1}) (Eq. 8) as HiRAG's code clusters a layer (hhy-huang/HiRAG
   hirag/_cluster_utils.py `perform_clustering`): UMAP, then one Gaussian mixture over the whole layer whose number
   of components is chosen by BIC, soft membership (posterior >= 0.1), so an entity may join several clusters
   (`core.algorithms.layer_gmm`). HiRAG's code has RAPTOR's global step only: its loop over the global clusters
   collects their members and re-clusters none of them.
3. CS_i from C_{i-1} (Eq. 17 / Algorithm 1 line 8), and its change rate against CS_{i-1} (line 9).
4. The caller stops when the change rate is <= ε (line 9-11, `stop_reason`), else makes the summary entities of
   each cluster of two or more (line 17, guided by the meta-summary concepts X), carries each single-member
   cluster's entity up as it is (HiRAG's code: `if len(cluster_nodes) == 1: node_clusters += cluster_nodes`), and
   clusters the new layer in turn.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from core.algorithms.layer_gmm import gmm_soft_clusters
from core.config import LayerSettings
from core.text import (
    STOPWORDS,
    central_sentences,
    content_words,
    idf_table,
    split_sentences,
    unspaced,
    words,
)


@dataclass
class LayerClustering:
    layer: int  # the layer being clustered (0 = extracted entities)
    clusters: list[list[int]]  # member row indices per (local) cluster (soft: a row may be in several)
    n_components: int  # global components, chosen by BIC
    bic: list[tuple[int, float]]  # (k, BIC) tried by the global search, ascending k
    sparsity: float  # CS of this clustering (Eq. 17; the paper's CS_{layer+1} in Algorithm 1's numbering)
    change_rate: float | None  # relative change of CS vs the previous layer (None for the first)
    n: int = 0  # rows (entities) clustered
    local_components: list[int] = field(default_factory=list)  # unused since issue 37 (HiRAG's code: global only)
    previous_sparsity: float | None = None  # CS of the layer below's clustering (None for the first)


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
    """Relative change of cluster sparsity, |CS_i - CS_{i-1}| / CS_{i-1} (Algorithm 1, line 9; §5.4 "the change
    rate from CS_i to CS_{i+1}"; HiRAG's code divides by the previous value the same way). None for the first
    clustering, which has no previous CS, and after a CS of 0 (a layer that was one cluster), where no rate exists."""
    if previous is None or previous == 0:
        return None
    return abs(current - previous) / abs(previous)


def is_plateau(current: float, previous: float | None, n: int, cfg: LayerSettings) -> bool:
    """A real plateau of the CS curve, the only place the ε rule may fire: two clusterings of non-empty layers
    (n >= `min_entities`), both with a CS above 0 (CS 0 is one cluster of everything: nothing was told apart, so
    0 -> 0 is a collapse, not cluster quality that stopped improving), changing by at most ε."""
    rate = change_rate(current, previous)
    return (rate is not None and rate <= cfg.change_rate_stop and n >= cfg.min_entities and current > 0
            and previous is not None and previous > 0)


def stop_reason(c: LayerClustering, cfg: LayerSettings) -> str | None:
    """HiRAG's rule for the number of layers (§5.4; Algorithm 1 lines 9-11): after clustering L_{i-1} and computing
    CS_i, "stop constructing another layer when the change rate of cluster sparsity is lower than ε" (ε = 5 %;
    line 9 tests <=, so a change of exactly ε stops too); L_i is then not built (i <- i-1). It fires only on a real
    plateau (`is_plateau`): never on the first clustering, an empty layer, or CS 0 -> 0. None = build layer i."""
    if is_plateau(c.sparsity, c.previous_sparsity, c.n, cfg):
        return (f"cluster sparsity change rate {100 * (c.change_rate or 0.0):.1f}% <= ε {100 * cfg.change_rate_stop:g}% "
                f"(CS {c.sparsity:.4f}; hirag.txt §5.4, Algorithm 1 line 9)")
    return None


def too_few_reason(layer: int, n: int, cfg: LayerSettings) -> str | None:
    """Not a rule of the paper: a layer too small to cluster (fewer than `min_entities`; HiRAG's code stops when a
    new layer holds <= 2 entities) or the safety cap `max_layers` ends the build. None = cluster this layer."""
    if n < cfg.min_entities:
        return f"layer {layer} has {n} entit{'y' if n == 1 else 'ies'}: too few to cluster (< {cfg.min_entities})"
    if layer >= cfg.max_layers:
        return f"reached the safety cap max_layers {cfg.max_layers}"
    return None


def collapse_reason(c: LayerClustering) -> str | None:
    """A layer clustered into one cluster of every entity (CS 0): its summary entities are the top of the hierarchy,
    since a layer above would be clustered from one cluster's summaries (not the paper's rule: the build ends there
    after summarizing it, instead of a CS 0 -> 0 "plateau"). None = not collapsed."""
    if c.n >= 2 and len(c.clusters) == 1 and len(c.clusters[0]) == c.n:
        return (f"layer {c.layer} is one cluster of its {c.n} entities (CS 0): its summary entities are the top "
                "layer")
    return None


# --------------------------------------------------------------------------------------------------- clustering


def cluster_layer(vectors: np.ndarray, cfg: LayerSettings, layer: int, previous_sparsity: float | None
                  ) -> LayerClustering:
    """HiRAG's clustering of one layer's embeddings (hirag.txt Eq. 8, Algorithm 1 lines 6-9; module doc): UMAP, a
    GMM chosen by BIC, soft membership. Identical member sets are one cluster. Deterministic for a seed, and the
    same on every CPU (core.algorithms.layer_reduce)."""
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"vectors must be 2-D, got shape {x.shape}")
    n = x.shape[0]
    if n == 0:
        return LayerClustering(layer, [], 0, [], 1.0, None, 0, previous_sparsity=previous_sparsity)
    if not np.isfinite(x).all():
        raise ValueError("vectors contain NaN or infinite values")
    from threadpoolctl import threadpool_limits

    # one BLAS/OpenMP thread: these fits are small (<= 20k x 2), so threads only add start-up and, on a busy
    # machine, oversubscription (measured 10-20x slower k-means inits with the default pool under load)
    with threadpool_limits(limits=1):
        soft = gmm_soft_clusters(x, dims=cfg.reduce_dim, max_components=cfg.max_components,
                                 threshold=cfg.membership_threshold, seed=cfg.seed)
    clusters = sorted({tuple(sorted(c)) for c in soft.clusters})
    cs = cluster_sparsity([list(c) for c in clusters], n)
    return LayerClustering(layer=layer, clusters=[list(c) for c in clusters], n_components=soft.k, bic=soft.bic,
                           sparsity=cs, change_rate=change_rate(cs, previous_sparsity), n=n,
                           previous_sparsity=previous_sparsity)


# ------------------------------------------------------------------------------------- meta-summary and titles

NounTest = Callable[[dict[str, list[str]]], set[str]]  # (word -> sentences holding it) -> the words read as nouns
NAME_CANDIDATES = 12  # the best keywords of a cluster a name is looked for in, when nouns are read
_MEMBER_LIST = re.compile(r"\s*Groups \d+ entities: .*$", re.S)  # the tail summary_entity_offline writes


@lru_cache(maxsize=1 << 16)  # a member's text comes back in every cluster that holds it (soft clusters)
def _terms(text: str) -> tuple[str, ...]:
    """Content unigrams plus bigrams of adjacent content words (no stopword between): noun-ish phrases. Words of any
    script, lower-cased but not folded (they may name a summary entity); a script written without spaces gives its
    character bigrams (core.text.words), which make no phrases."""
    out: list[str] = []
    prev: str | None = None
    for w in words(text, folded=False):
        cjk = unspaced(w)
        ok = w not in STOPWORDS and (len(w) > 1 or cjk) and not w.isdigit()
        if ok:
            out.append(w)
            if prev is not None and not cjk:
                out.append(f"{prev} {w}")
            prev = None if cjk else w
        else:
            prev = None
    return tuple(out)


def forget_terms() -> None:
    """Drop the cached member terms (the layers stage, when it ends)."""
    _terms.cache_clear()


def meta_summary_concepts(texts: list[str], k: int = 8) -> list[str]:
    """A small set of guiding concepts for a layer's summary entities: the paper's meta-summary entities X (§4.1,
    Algorithm 1 line 17), which an LLM would produce ("organization", "technology", ...). Offline: the top terms
    (content words and two-word phrases, a phrase weighted double) by summed TF-IDF over the layer's texts, counting only terms found in at
    least two texts when there are several, a phrase replacing the single words it contains. Deterministic."""
    docs = [_terms(_MEMBER_LIST.sub("", t or "")) for t in texts]
    docs = [d for d in docs if d]
    if not docs:
        return []
    idf = idf_table(docs)
    df: Counter[str] = Counter()
    score: dict[str, float] = {}
    for d in docs:
        tf = Counter(d)
        norm = math.sqrt(sum(c * c for c in tf.values())) or 1.0
        df.update(tf.keys())
        for w, c in tf.items():
            score[w] = score.get(w, 0) + c / norm * idf[w] * (2.0 if " " in w else 1.0)  # phrases over their words
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


def _contexts(worded: list[tuple[str, set[str]]], heads: set[str]) -> dict[str, list[str]]:
    """word -> the sentences holding it, for each of `heads`: what `nouns` reads a word in."""
    contexts: dict[str, list[str]] = {h: [] for h in heads}
    for sent, ws in worded:
        for w in ws & heads:
            contexts[w].append(sent)
    return contexts


def _noun_terms(shared: list[str], keywords: list[str], titles: list[str], sentences: list[str],
                nouns: NounTest) -> tuple[list[str], list[str]] | None:
    """(shared concepts, keywords) kept in order when their last word reads as a noun, or None when none does. Words
    are read by `nouns` in the cluster's sentences, then its members' titles (a name's word is read as a noun there),
    a few candidates at a time, until a head and a disambiguator are found."""
    verdict: dict[str, bool] = {}
    candidates = list(dict.fromkeys(shared + keywords))
    readable: list[str] = []
    texts = sentences + [t for t in titles if t.strip()]
    worded = [(sent, set(words(sent, folded=False))) for sent in texts]  # each tokenized once, as `_terms` does
    for start in range(0, len(candidates), 4):
        heads = {w.split()[-1] for w in candidates[: start + 4]} - set(verdict)
        if heads:
            ok = nouns(_contexts(worded, heads))
            verdict.update((h, h in ok) for h in heads)
        readable = [w for w in candidates[: start + 4] if verdict[w.split()[-1]]]
        if readable:
            head = readable[0]
            if any(w in keywords and not set(w.split()) & set(head.split()) for w in readable[1:]):
                break
    if not readable:
        return None
    return [w for w in shared if w in readable], [w for w in keywords if w in readable]


def term_groups(member_titles: list[str], member_texts: list[str], nouns: NounTest | None = None) -> list[list[int]]:
    """The offline stand-in for the model's SET of summary entities of one cluster (hirag.txt §4.1: the cluster's
    descriptions "are fed into the LLM to generate a set of summary entities", each related to the members it is
    "clearly related" to, Appendix I.3): the members (indices) grouped by the terms they share, greedily. The term
    held by the most members not yet grouped (at least two; ties: held by more members, a phrase, alphabetical)
    makes a group of every member holding it, so groups may overlap as a member may relate to several summary
    entities; until no term joins two ungrouped members. A member left over (it holds no term another ungrouped
    member holds) joins the group whose members' terms it shares most (the first on a tie). With `nouns`, only terms
    whose last word reads as a noun group members ("born" or "known" relate nothing). One group of everyone when no
    term is shared by two. Deterministic."""
    n = max(len(member_titles), len(member_texts))
    if n == 0:
        return []
    titles = [(member_titles[i] if i < len(member_titles) else "") or "" for i in range(n)]
    texts = [(member_texts[i] if i < len(member_texts) else "") or "" for i in range(n)]
    terms = [set(_terms(f"{titles[i]}. {_MEMBER_LIST.sub('', texts[i])}")) for i in range(n)]
    holders: dict[str, set[int]] = {}
    for i, ts in enumerate(terms):
        for t in ts:
            holders.setdefault(t, set()).add(i)
    shared = {t: h for t, h in holders.items() if len(h) >= 2}
    if nouns is not None and shared:
        worded = [(sent, set(words(sent, folded=False))) for i in range(n)
                  for sent in split_sentences(f"{titles[i]}. {texts[i]}")]
        ok = nouns(_contexts(worded, {t.split()[-1] for t in shared}))
        shared = {t: h for t, h in shared.items() if t.split()[-1] in ok}
    groups: list[tuple[str, set[int]]] = []
    left = set(range(n))
    order = sorted(shared, key=lambda t: (-len(shared[t]), -len(t.split()), t))
    # the term holding the most ungrouped members, the first of equals in `order`, by lazy greedy: a term's count of
    # ungrouped members only falls, so the heap's counts are upper bounds; a popped count still true is the most,
    # and no equal count sits before it in `order` (the same choice as a scan of every term per group, which made
    # a layer of large clusters quadratic in their size)
    heap = [(-len(shared[t]), r) for r, t in enumerate(order)]
    heapq.heapify(heap)
    while left and heap:
        bound, r = heapq.heappop(heap)
        now = len(shared[order[r]] & left)
        if now != -bound:
            heapq.heappush(heap, (-now, r))
            continue
        if now < 2:
            break
        best = order[r]
        groups.append((best, set(shared[best])))
        left -= shared[best]
    if not groups:
        return [list(range(n))]
    vocab = [set().union(*(terms[j] for j in h)) for _, h in groups]
    for i in sorted(left):
        k = max(range(len(groups)), key=lambda g: len(terms[i] & vocab[g]))  # the first of equals
        groups[k][1].add(i)
    return [sorted(h) for _, h in groups]


def summary_entity_offline(member_titles: list[str], member_texts: list[str], concepts: list[str],
                           nouns: NounTest | None = None) -> tuple[str, str]:
    """A summary entity for one cluster without a model: (name, description), deterministic and extractive.

    Name: the head term is the layer concept (meta summary) shared by the most members, else the keyword shared by
    the most members (ties: a phrase, then the higher count in the cluster, then alphabetical); the disambiguator is the next most
    shared keyword (or the most central member title), e.g. "Data Mining — recommendation". With `nouns` (the
    offline backend's spaCy reading, `core.extract.nouns`), only a term whose last word reads as a noun in the
    cluster's sentences names it, among the shared concepts and the NAME_CANDIDATES best keywords: "Known — team"
    and "First — yugoslavia" were names before. Description: the most central member sentences (TF-IDF centroid,
    `central_sentences`) in their original order, then the members."""
    n = max(len(member_titles), len(member_texts))
    titles = [(member_titles[i] if i < len(member_titles) else "") or "" for i in range(n)]
    # a member that is itself a summary entity ends with its own member list: not content to name or summarize by
    texts = [_MEMBER_LIST.sub("", (member_texts[i] if i < len(member_texts) else "") or "") for i in range(n)]
    df: Counter[str] = Counter()
    tf: Counter[str] = Counter()
    for t, x in zip(titles, texts):
        terms = _terms(f"{t}. {x}")
        df.update(set(terms))
        tf.update(terms)
    sentences: list[str] = []
    for x in texts:
        sentences.extend(split_sentences(x))
    sentences = list(dict.fromkeys(sentences))  # each sentence once, in first-seen order

    def rank(ws) -> list[str]:
        return sorted(ws, key=lambda w: (-df[w], -len(w.split()), -tf[w], w))

    shared = rank({c.lower() for c in concepts if df[c.lower()] >= max(1, min(2, n))})
    keywords = rank(df)
    if nouns is not None:
        shared, keywords = _noun_terms(shared, keywords[:NAME_CANDIDATES], titles, sentences, nouns) or (shared,
                                                                                                       keywords)
    head = shared[0] if shared else (keywords[0] if keywords else None)
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

    picked = sorted(i for i, _ in central_sentences(sentences, 3)) if sentences else []
    body = " ".join(sentences[i] for i in picked)
    shown = [t for t in titles if t.strip()]
    members = ", ".join(shown[:12]) + (f" and {len(shown) - 12} more" if len(shown) > 12 else "")
    desc = (body + " " if body else "") + (f"Groups {len(shown)} entities: {members}." if shown else "")
    return name, desc.strip()
