"""Cleaning a model's HiRAG summary-entity reply (hirag.txt Appendix I.3), and the offline extractive equivalent."""

from __future__ import annotations

import math

from core.algorithms.layers import NounTest, summary_entity_offline
from core.backends.replies import MalformedReply
from core.protocols import SummaryEntities, SummaryEntity, SummaryRelation


def _flat(text: str) -> str:
    return " ".join((text or "").split())


def clean_summary_entities(rep: SummaryEntities, member_names: list[str]) -> SummaryEntities:
    """Named summary entities, once each (case-insensitive); relations kept only from a given member to a summary
    entity of the reply, spelled as given, weight clamped to 1-10, once per pair. A reply without any named entity
    is malformed (asked again, then refused), as HiRAG asks for at least one."""
    entities: list[SummaryEntity] = []
    canon: dict[str, str] = {}
    for e in rep.entities:
        name = _flat(e.name)
        if not name or name.casefold() in canon:
            continue
        canon[name.casefold()] = name
        entities.append(SummaryEntity(name=name, type=_flat(e.type) or "normal_entity",
                                      description=(e.description or "").strip()))
    if not entities:
        raise MalformedReply("no summary entity in the reply")
    members = {_flat(m).casefold(): m for m in member_names}
    relations: list[SummaryRelation] = []
    seen: set[tuple[str, str]] = set()
    for r in rep.relationships:
        src, dst = members.get(_flat(r.source).casefold()), canon.get(_flat(r.target).casefold())
        if src is None or dst is None or (src, dst) in seen:
            continue
        seen.add((src, dst))
        w = float(r.weight) if math.isfinite(r.weight) else 5.0
        relations.append(SummaryRelation(source=src, target=dst, description=(r.description or "").strip(),
                                         weight=min(10.0, max(1.0, w))))
    return SummaryEntities(entities=entities, relationships=relations)


def offline_summary_entities(members: list[tuple[str, str]], concepts: list[str],
                             nouns: NounTest | None = None) -> SummaryEntities:
    """Without a model: one extractive summary entity per cluster (`core.algorithms.layers.summary_entity_offline`:
    the layer concept and keyword the members share most as its name, their most central sentences as its
    description), related to every member. Deterministic."""

    name, desc = summary_entity_offline([n for n, _ in members], [d for _, d in members], concepts, nouns)
    return SummaryEntities(
        entities=[SummaryEntity(name=name, type="summary", description=desc)],
        relationships=[SummaryRelation(source=n, target=name, description="", weight=1.0) for n, _ in members],
    )
