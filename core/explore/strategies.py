"""The strategies as the Ask page offers them, and what the number beside a context item or a source means.

The picker offers the reference designs (HiRAG, GraphRAG local and global, NodeRAG, ArchRAG, HLG's StatementGraphRAG
and TopicGraphRAG with the chunk-based variants the HLG paper measures (§6.4), and the dense and BM25 baselines);
the ablations (a strategy whose label says "ablation": HiRAG's level ablations and *-simsources, HLG's chunk-blended
rerank and path beam) only behind a research switch.

A score means something else in each strategy and kind of item (a cosine, a BM25 score, a PPR mass, a rating), so a
number is never shown alone: `item_score` and `source_score` name it, and the page shows ranks as ranks.
"""

from __future__ import annotations

from core.retrieval.base import Retrieval, Source, get_strategy, strategy_names

DESIGNS = ("hirag", "graphrag-local", "graphrag-global", "noderag", "archrag", "hlg-statement", "hlg-topic",
           "hlg-statement-chunk", "hlg-topic-chunk", "naive", "bm25")

# (family, kind) -> what an item's score is; (family, section, kind) where a section changes it
_ITEM: dict[tuple[str, ...], str] = {
    ("naive", "chunk"): "cosine",
    ("bm25", "chunk"): "BM25",
    ("hirag", "entity"): "cosine",
    ("hirag", "chunk"): "its entity's cosine",
    ("hirag", "relationship"): "ends' mean cosine",
    ("hirag", "summarizes"): "ends' mean cosine",
    ("hirag", "community"): "best member cosine",
    ("graphrag-local", "entity"): "cosine",
    ("graphrag-local", "chunk"): "entities named + cosine",
    ("graphrag-local", "relationship"): "ends' degree (GraphRAG rank)",
    ("graphrag-local", "community"): "entry entities held",
    ("graphrag-global", "global", "community"): "rating 0-100",
    ("graphrag-global", "bridge", "community"): "cosine",
    ("graphrag-global", "entity"): "cosine",
    ("noderag",): "PageRank",
    ("archrag",): "filter relevance",
}
_SOURCE = {"naive": "summed cosine of its chunks", "bm25": "summed BM25 of its chunks",
           "noderag": "summed PageRank of its chunks", "graphrag-global": "summed member cosine of its chunks"}


def is_ablation(name: str) -> bool:
    """An ablation of a design (its label says so), not a design of its own."""
    try:
        return "ablation" in get_strategy(name).label.lower()
    except KeyError:
        return False


def designs() -> list[str]:
    """The registered designs, in DESIGNS order (others that are no ablation after them)."""
    names = strategy_names()
    first = [n for n in DESIGNS if n in names and not is_ablation(n)]
    return first + [n for n in names if n not in first and not is_ablation(n)]


def ablations() -> list[str]:
    return [n for n in strategy_names() if is_ablation(n)]


def family(name: str) -> str:
    """The design a strategy or its ablation belongs to: hirag-local -> hirag, hlg-topic-chunk -> hlg,
    noderag-teleport -> noderag, archrag-ef256 -> archrag."""
    if name.startswith("hlg-"):
        return "hlg"
    for f in ("graphrag-local", "graphrag-global", "hirag", "noderag", "archrag"):
        if name == f or name.startswith(f + "-"):
            return f
    return name


def item_score(strategy: str, section: str, kind: str) -> str:
    """What the score of a `kind` item in `section` is for `strategy` ("cosine", "BM25", ...), or
    "score" when it is the strategy's own blend."""
    f = family(strategy)
    if f == "hlg":  # offline no reranker: the statement's cosine (a model reranks the order, not the scores shown)
        local = ("dense + TF-IDF score" if strategy.endswith("-hybrid") else
                 "chunk-blended cosine" if strategy.endswith("-chunkblend") else "cosine")
        return {"local": local, "bridge": "beam path score"}.get(section, "best statement's " + local)
    return _ITEM.get((f, section, kind)) or _ITEM.get((f, kind)) or _ITEM.get((f,)) or "score"


def source_score(r: Retrieval, s: Source) -> str:
    """A source's score, named: the summed score of its chunks, or its rank in the context's order."""
    f = family(r.strategy)
    if f in _SOURCE:
        return f"{_SOURCE[f]} {s.score:.3g}"
    return "ranked by its first chunk in the context" if f != "archrag" else "ranked by the filter's best point"
