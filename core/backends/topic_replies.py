"""Cleaning a model's HLG topics of one chunk (hierarchical-lexical-graph.txt §3.2, §6.2 (3): "From each chunk, we
extract fine-grained propositions, and then link them with topics"): the reply names each topic's statements by
their numbers in the prompt (1 to n), and each statement ends in exactly one topic, as graphrag-toolkit attaches a
statement to one topic."""

from __future__ import annotations

from core.backends.replies import MalformedReply
from core.protocols import ChunkTopic, ChunkTopics

_TITLE_CHARS = 120
_LEFT_OUT_TITLE_WORDS = 8
_LEFT_OUT_SUMMARY_CHARS = 500


def _flat(text: str) -> str:
    return " ".join((text or "").split())


def clean_chunk_topics(rep: ChunkTopics, statements: list[str]) -> ChunkTopics:
    """The reply's usable topics in its order: numbers outside 1..len(statements) dropped, a statement claimed twice
    kept in its first topic, a topic left without a title or without statements dropped; each topic's numbers
    ascending, its summary the title when empty, keywords flattened. The statements no kept topic holds form one more
    topic, last, titled by the first of them (its first words) and summarized by their text. A reply without a usable
    topic is malformed (asked again, then refused: a failed unit)."""
    n = len(statements)
    claimed: set[int] = set()
    topics: list[ChunkTopic] = []
    for t in rep.topics:
        title = _flat(t.title)[:_TITLE_CHARS]
        own = sorted({i for i in t.statements if 1 <= i <= n and i not in claimed})
        if not title or not own:
            continue
        claimed.update(own)
        topics.append(ChunkTopic(title=title, summary=(t.summary or "").strip() or title, statements=own,
                                 keywords=[k for k in (_flat(k) for k in t.keywords) if k]))
    if not topics:
        raise MalformedReply(f"no topic holding any of the {n} statements in the reply")
    left = [i for i in range(1, n + 1) if i not in claimed]
    if left:
        words = _flat(statements[left[0] - 1]).split()
        title = " ".join(words[:_LEFT_OUT_TITLE_WORDS]) + (" ..." if len(words) > _LEFT_OUT_TITLE_WORDS else "")
        summary = " ".join(_flat(statements[i - 1]) for i in left)[:_LEFT_OUT_SUMMARY_CHARS]
        topics.append(ChunkTopic(title=title[:_TITLE_CHARS] or "Other statements", summary=summary or title,
                                 statements=left))
    return ChunkTopics(topics=topics)
