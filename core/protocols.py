"""The task-level protocol every language backend implements, and the structured results it returns.

The pydantic models double as the JSON schemas sent to Ollama as `format`, so a reply either validates against
the same model the offline backend builds, or is repaired / retried / refused.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, Field


class BackendError(Exception):
    """A language or embedding backend failed in a way the user must hear about (unreachable, missing model)."""


class ExtractedEntity(BaseModel):
    name: str = Field(description="The entity's name as written in the text.")
    type: str = Field(description="One of the allowed entity types.")
    description: str = Field(description="What the text says about this entity, in one or two sentences.")


class ExtractedRelationship(BaseModel):
    source: str = Field(description="Name of the subject entity, exactly as in the entity list.")
    target: str = Field(description="Name of the object entity, exactly as in the entity list.")
    predicate: str = Field(description="A short verb phrase naming the relation.")
    description: str = Field(description="One sentence stating the relation as the text says it.")
    weight: float = Field(1.0, description="Strength of the relation from 1 (weak) to 10 (strong).")


class Extraction(BaseModel):
    entities: list[ExtractedEntity] = Field(default_factory=list)
    relationships: list[ExtractedRelationship] = Field(default_factory=list)
    statements: list[str] = Field(
        default_factory=list, description="Atomic, self-contained propositions paraphrasing the text."
    )


class Finding(BaseModel):
    summary: str = Field(description="One-line headline of the finding.")
    explanation: str = Field(description="A few sentences grounded in the given material.")
    importance: float = Field(5.0, description="Importance from 0 to 10.")


class Report(BaseModel):
    title: str = Field(description="A short, specific title naming the group's key entities.")
    summary: str = Field(description="An executive summary of the group in a few sentences.")
    findings: list[Finding] = Field(default_factory=list)
    rating: float = Field(5.0, description="Overall importance of the group from 0 to 10.")
    keywords: list[str] = Field(default_factory=list)


class Summary(BaseModel):
    """A short named summary of one subject: a NodeRAG attribute of an important entity, an HLG topic."""

    title: str = Field(description="A short title or keyword phrase naming the subject.")
    summary: str = Field(description="A few sentences grounded in the material.")
    keywords: list[str] = Field(default_factory=list)


class SummaryEntity(BaseModel):
    """A HiRAG summary entity (hirag.txt §4.1, Appendix I.3 Figure 9): a more general entity one layer up."""

    name: str = Field(description="Name of the summary entity, capitalized.")
    type: str = Field(description="One of the meta summary concepts it is a kind of.")
    description: str = Field(description="Comprehensive description of the entity's attributes and activities.")


class SummaryRelation(BaseModel):
    source: str = Field(description="Name of a given entity, exactly as in the entity list.")
    target: str = Field(description="Name of the summary entity it relates to.")
    description: str = Field(description="Why the given entity relates to the summary entity.")
    weight: float = Field(5.0, description="Strength of the relation from 1 (weak) to 10 (strong).")


class SummaryEntities(BaseModel):
    """HiRAG's reply for one cluster: its summary entities and the relations from the cluster's entities to them."""

    entities: list[SummaryEntity] = Field(default_factory=list)
    relationships: list[SummaryRelation] = Field(default_factory=list)


class ChunkTopic(BaseModel):
    """An HLG topic of one chunk (hierarchical-lexical-graph.txt §3.2, §6.2 (3)): a theme and the chunk's statements
    it holds, by their numbers in the prompt."""

    title: str = Field(description="A short topic phrase (2 to 6 words).")
    summary: str = Field(description="One to three sentences on what the topic's statements say.")
    statements: list[int] = Field(default_factory=list, description="Numbers of the statements the topic holds.")
    keywords: list[str] = Field(default_factory=list)


class ChunkTopics(BaseModel):
    """The topics a model relates one chunk's statements to; each statement in one topic."""

    topics: list[ChunkTopic] = Field(default_factory=list)


class ContextBlock(BaseModel):
    """What `answer` sees: labelled sections of context, and numbered sources it may cite as [n]."""

    local: list[str] = Field(default_factory=list)
    bridge: list[str] = Field(default_factory=list)
    global_: list[str] = Field(default_factory=list, alias="global")
    sources: list[str] = Field(default_factory=list)

    model_config = {"populate_by_name": True}


class RatedPoint(BaseModel):
    description: str = Field(description="A comprehensive description of the point.")
    score: float = Field(0.0, description="An integer from 0 to 100: how important the point is in answering the "
                                          "question; an 'I don't know' type of point scores 0.")


class RatedPoints(BaseModel):
    """GraphRAG's map step and ArchRAG's adaptive filter (archrag.txt Figure 10) reply with the same key points."""

    points: list[RatedPoint] = Field(default_factory=list)


class PassageScores(BaseModel):
    """A listwise rerank: one relevance score (0-10) per numbered passage, in the passages' order."""

    scores: list[float] = Field(default_factory=list)


class QueryTerms(BaseModel):
    """What a question names (NodeRAG's query entities) and its keywords with synonyms (HLG Eq. 1)."""

    entities: list[str] = Field(default_factory=list, description="Names of the entities the question mentions.")
    keywords: list[str] = Field(default_factory=list, description="Salient terms of the question and synonyms.")


@runtime_checkable
class LanguageBackend(Protocol):
    name: str  # "offline", "ollama" or "openai"

    @property
    def model(self) -> str:
        """The model's name, or offline the extractor that runs (read-only: the offline backend computes it)."""
        ...

    def extract(self, text: str, entity_types: list[str], subject: str | None = None) -> Extraction:
        """Entities, relationships and statements of `text`; `subject` names what the document is about."""
        ...

    def report(self, title_hint: str, material: list[str]) -> Report: ...

    def summarize(self, task: str, subject: str, material: list[str]) -> Summary:
        """`task` "attribute": what the material says about entity `subject` (NodeRAG attribute node);
        "topic": a title and summary of a group of statements of one document (HLG topic)."""
        ...

    def answer(self, question: str, context: ContextBlock) -> str: ...

    def summary_entities(self, members: list[tuple[str, str]], concepts: list[str]) -> SummaryEntities:
        """HiRAG's summary entities of one cluster (hirag.txt Algorithm 1 line 17, LLM(S_x, X)): `members` are the
        cluster's entities as (name, description), `concepts` the meta summary entities X."""
        ...


@runtime_checkable
class TopicModel(Protocol):
    """A backend whose model relates one chunk's statements to topics (HLG's way, §6.2 (3)); the model backends."""

    def chunk_topics(self, statements: list[str], subject: str) -> ChunkTopics:
        """Topics of one chunk's statements (numbered from 1 in the prompt); every statement in exactly one topic
        after cleaning."""
        ...


@runtime_checkable
class RetrievalLLM(Protocol):
    """The language tasks some retrieval strategies hand to a model (Ollama). The offline backend does not have
    them: offline, each strategy runs its own extractive, vector-aware version of the step instead."""

    name: str
    model: str

    def rate_points(self, question: str, material: str) -> list[RatedPoint]:
        """Key points of `material` that answer `question`, each rated 0-100 (GraphRAG map / ArchRAG filter)."""
        ...

    def rerank(self, question: str, passages: list[str]) -> list[float]:
        """A relevance score 0-10 for each passage, in order (HLG's reranker, Eq. 9)."""
        ...

    def query_terms(self, question: str) -> QueryTerms:
        """The entities the question names and its keywords with synonyms (NodeRAG dual search, HLG Eq. 1)."""
        ...


@runtime_checkable
class Embedder(Protocol):
    name: str  # used in collection names, e.g. "minilm"
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-normalised float32 vectors, one row per text."""
        ...
