"""What a workspace's graph holds, counted once for every place the Build page shows a count: documents, chunks,
entities (extracted, after resolution: layer 0) apart from HiRAG's summary entities (layers 1 and up),
relationships, statements, HLG topics, edges, and the communities of each method per level with their singletons,
their largest, and the leaf communities bigger than the method's cap (`MethodCounts`). One query per table, scoped
by workspace; core/explore/verdict.py words them and the page draws them."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import case, func
from sqlalchemy import select as sa_select
from sqlmodel import col, select

from core.models import Community, Document, Edge, Node


@dataclass(frozen=True)
class MethodCounts:
    """One community method's communities: per level (0 = coarsest), how many hold one member, the largest, and the
    leaves (communities no other one splits) bigger than the cap the build split by (`cap` 0: none)."""

    method: str
    per_level: dict[int, int]
    singletons: int = 0
    largest: int = 0
    cap: int = 0
    over_cap: int = 0
    largest_over_cap: int = 0

    @property
    def total(self) -> int:
        return sum(self.per_level.values())

    @property
    def levels(self) -> int:
        return len(self.per_level)


@dataclass(frozen=True)
class GraphCounts:
    documents: int = 0
    chunks: int = 0
    entities: int = 0  # extracted entities after resolution (HiRAG layer 0)
    summary_entities: int = 0  # HiRAG summary entities (layers 1 and up)
    relationships: int = 0
    statements: int = 0
    topics: int = 0  # HLG topics
    edges: int = 0
    kinds: dict[str, int] = field(default_factory=dict)  # every node kind (entity: both entity counts together)
    methods: dict[str, MethodCounts] = field(default_factory=dict)

    @property
    def communities(self) -> int:
        """Communities of the community methods (not the connected components, `wcc`, they start from)."""
        return sum(m.total for k, m in self.methods.items() if k != "wcc")

    @property
    def all_entities(self) -> int:
        """Entities of every HiRAG layer: the extracted ones and the summary entities."""
        return self.entities + self.summary_entities


def communities_per_level(store, ws_id: int) -> dict[str, dict[str, int]]:
    """method -> level (as text) -> communities stored."""
    return {m: {str(lv): n for lv, n in c.per_level.items()} for m, c in method_counts(store, ws_id).items()}


def method_counts(store, ws_id: int, caps: dict[str, int] | None = None) -> dict[str, MethodCounts]:
    """Each method's communities (see MethodCounts); `caps`: method -> the largest size its clustering keeps."""
    caps = {m: c for m, c in (caps or {}).items() if c and c > 0}
    rows: dict[str, dict] = {}
    with store.session() as s:
        for method, level, n, ones, big in s.execute(  # (five columns: sqlalchemy's select, typed for them)
                sa_select(col(Community.method), col(Community.level), func.count(),
                          func.sum(case((col(Community.size) <= 1, 1), else_=0)), func.max(col(Community.size)))
                .where(col(Community.workspace_id) == ws_id).group_by(Community.method, col(Community.level))):
            r = rows.setdefault(method, {"per_level": {}, "singletons": 0, "largest": 0})
            r["per_level"][int(level)] = int(n)
            r["singletons"] += int(ones or 0)
            r["largest"] = max(r["largest"], int(big or 0))
        for method, cap in caps.items():
            if rows.get(method, {}).get("largest", 0) <= cap:
                continue
            # a leaf is a community no other one names as its parent (two indexed reads, no self-join)
            parents = set(s.exec(select(Community.parent_id).distinct()
                                 .where(Community.workspace_id == ws_id, Community.method == method,
                                        col(Community.parent_id).is_not(None))))
            sizes = [size for cid, size in s.exec(select(Community.id, Community.size)
                                                  .where(Community.workspace_id == ws_id, Community.method == method,
                                                         col(Community.size) > cap)) if cid not in parents]
            rows[method].update(over_cap=len(sizes), largest_over_cap=max(sizes, default=0))
    return {m: MethodCounts(m, dict(sorted(r["per_level"].items())), r["singletons"], r["largest"], caps.get(m, 0),
                            r.get("over_cap", 0), r.get("largest_over_cap", 0)) for m, r in sorted(rows.items())}


def graph_counts(store, ws_id: int, caps: dict[str, int] | None = None) -> GraphCounts:
    """The workspace's counts (module doc): the one source of every count the Build page shows."""
    with store.session() as s:
        kinds: dict[str, int] = {}
        entities = summary = 0
        # grouped by the layer itself: PostgreSQL takes `layer > 0` in SELECT and GROUP BY for two expressions (each
        # binds its own 0) and refuses the query
        for kind, layer, n in s.exec(select(Node.kind, Node.layer, func.count())
                                     .where(Node.workspace_id == ws_id).group_by(Node.kind, col(Node.layer))):
            kinds[kind] = kinds.get(kind, 0) + int(n)
            if kind == "entity":
                if (layer or 0) > 0:
                    summary += int(n)
                else:
                    entities += int(n)
        documents = s.exec(select(func.count()).select_from(Document).where(Document.workspace_id == ws_id)).one()
        edges = s.exec(select(func.count()).select_from(Edge).where(Edge.workspace_id == ws_id)).one()
    return GraphCounts(documents=int(documents), chunks=kinds.get("chunk", 0), entities=entities,
                       summary_entities=summary, relationships=kinds.get("relationship", 0),
                       statements=kinds.get("statement", 0), topics=kinds.get("topic", 0), edges=int(edges),
                       kinds=kinds, methods=method_counts(store, ws_id, caps))
