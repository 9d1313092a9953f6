"""Cleaning a model's HiRAG summary-entity reply (hirag.txt Appendix I.3), and the offline extractive equivalent."""

from __future__ import annotations

import math

from core.algorithms.layers import NounTest, summary_entity_offline, term_groups
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
    """Without a model: a set of extractive summary entities per cluster, as HiRAG's model gives a set (§4.1,
    Appendix I.3). The members are grouped by the terms they share (`core.algorithms.layers.term_groups`); each group
    is one summary entity (`summary_entity_offline`: the layer concept and keyword its members share most as its name,
    their most central sentences as its description), related to the members of its group. Groups that come out
    with the same name are one entity. Deterministic."""
    names = [n for n, _ in members]
    texts = [d for _, d in members]
    entities: dict[str, SummaryEntity] = {}
    related: dict[str, list[str]] = {}
    for group in term_groups(names, texts, nouns):
        name, desc = summary_entity_offline([names[i] for i in group], [texts[i] for i in group], concepts, nouns)
        key = name.casefold()
        if key not in entities:
            entities[key] = SummaryEntity(name=name, type="summary", description=desc)
            related[key] = []
        related[key] += [names[i] for i in group if names[i] not in related[key]]
    return SummaryEntities(
        entities=list(entities.values()),
        relationships=[SummaryRelation(source=m, target=entities[k].name, description="", weight=1.0)
                       for k in entities for m in related[k]],
    )
