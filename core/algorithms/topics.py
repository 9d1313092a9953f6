"""HLG's topics of one chunk (hierarchical-lexical-graph.txt §3.1.3, §3.2, §6.2 (3)): its statements' vectors grouped
by agglomerative clustering (average linkage, cosine distance, cut at 1 - topic_similarity, 0.35 by default); a group
bigger than max_topic_statements (12) is split along its own tree; neither value is the paper's (docs/CONSTANTS.md).
More than `WINDOW` statements are clustered in consecutive windows, which bounds the quadratic
distance matrix. Pure maths: the `lexical` stage (core/pipeline/stages/lexical.py) reads the vectors, calls this once
per chunk (the paper's model relates each chunk's propositions to topics; issue 37, it was once per document) and
writes the topics. This clustering stands in for the paper's model-made topics offline, where no model is
configured, and with lexical.topics = "clustering" (a model then only titles and summarizes each group); with a model
backend the model groups each chunk's statements itself (core/backends/topic_replies.py).
"""

from __future__ import annotations

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

from core.algorithms.similarity import cross_dots

WINDOW = 1000  # statements clustered together at most (a document's statements in order, window by window)


def _condensed(vecs: np.ndarray) -> np.ndarray:
    """Condensed cosine-distance matrix of unit rows, clipped to [0, 2] (rounding can make it slightly negative)."""
    d = 1.0 - np.clip(cross_dots(vecs, vecs), -1.0, 1.0)
    np.fill_diagonal(d, 0.0)
    return squareform(np.maximum(d, 0.0).astype(np.float64), checks=False)


def _split(vecs: np.ndarray, idx: np.ndarray, max_size: int) -> list[np.ndarray]:
    """Split a group along its own average-linkage tree until no part exceeds max_size."""
    if len(idx) <= max_size:
        return [idx]
    labels = fcluster(linkage(_condensed(vecs), method="average"), t=2, criterion="maxclust")
    if labels.max() < 2:  # indistinguishable vectors: split in document order
        half = len(idx) // 2
        parts = [np.arange(half), np.arange(half, len(idx))]
    else:
        parts = [np.flatnonzero(labels == lab) for lab in (1, 2)]
    out: list[np.ndarray] = []
    for p in parts:
        out += _split(vecs[p], idx[p], max_size)
    return out


def topic_groups(vecs: np.ndarray, similarity: float, max_size: int, window: int = WINDOW) -> list[list[int]]:
    """Groups of row indices of one document's statement vectors (unit rows in document order): average-linkage
    agglomerative clustering with cosine distance cut at 1 - similarity, groups above max_size split. Each group is
    sorted; groups are ordered by their first row. Deterministic."""
    n = len(vecs)
    groups: list[list[int]] = []
    max_size = max(1, int(max_size))
    for start in range(0, n, window):
        idx = np.arange(start, min(n, start + window))
        if len(idx) == 1:
            groups.append([int(idx[0])])
            continue
        v = np.asarray(vecs[idx], dtype=np.float32)
        labels = fcluster(linkage(_condensed(v), method="average"), t=max(0.0, 1.0 - similarity), criterion="distance")
        for lab in np.unique(labels):
            members = np.flatnonzero(labels == lab)
            for part in _split(v[members], idx[members], max_size):
                groups.append(sorted(int(i) for i in part))
    return sorted(groups, key=lambda g: g[0])
