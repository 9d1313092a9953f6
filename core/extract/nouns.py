"""Which words read as nouns: spaCy's part-of-speech tags over the sentences a word occurs in, counted per backend.

HiRAG's summary entities are named from concepts ("organization", "technology", hirag.txt §4.1); offline they are
named from the terms their members share most (`core.algorithms.layers.summary_entity_offline`), and on a large
corpus those include words that are no concept at all: "first", "known", "born", "new", "like", "said". A word is a
noun here when spaCy tags most of its occurrences NOUN, or PROPN at the end of a name (`reads_as_noun`). Its tags
are counted over every call, so a frequent word is tagged in the first clusters that ask about it and then settled
(`SETTLED` occurrences), which keeps the cost of a layer to a few hundred short sentences. Deterministic for a given
build: the offline build names its clusters one after another, in order.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

from core.extract import spacy_nlp

SETTLED = 8  # occurrences after which a word's reading is not tagged again
PER_WORD = 3  # sentences tagged per unsettled word and call
CACHED = 200_000  # sentences whose tags are kept


def reads_as_noun(tok) -> bool:
    """A common noun, or the last word of a proper name: "New" in "New York" is inside a name, not a concept."""
    if tok.pos_ == "PROPN":
        nxt = tok.nbor(1) if tok.i + 1 < len(tok.doc) else None
        return nxt is None or nxt.pos_ != "PROPN"
    return tok.pos_ == "NOUN"


_READ: dict[str, list[tuple[str, bool]]] = {}  # sentence -> (word, read as a noun) per token
_READ_LOCK = threading.Lock()
Tagger = Callable[[list[str]], list[list[tuple[str, bool]]]]  # sentences -> (word, read as a noun) per token


def tag_readings(sentences: list[str]) -> list[list[tuple[str, bool]]]:
    """(lower-cased word, read as a noun) of each token of each sentence, tagged by spaCy in this process."""
    return [[(tok.lower_, reads_as_noun(tok)) for tok in doc] for doc in spacy_nlp.tag(sentences)]


def readings(sentences: list[str], tag: Tagger = tag_readings) -> list[list[tuple[str, bool]]]:
    """(lower-cased word, read as a noun) of each token of each sentence, by `tag` (spaCy here, or a build's
    workers: core/pipeline/tasks.py `EngineTagger`). A sentence is tagged once until `forget_readings` (the same
    sentence comes back in the clusters of a soft clustering and in the layers above): the summary layers of a
    one-million-token corpus were the same, entity for entity, with this cache as without."""
    with _READ_LOCK:
        new = [s for s in dict.fromkeys(sentences) if s not in _READ]
        if len(_READ) + len(new) > CACHED:
            _READ.clear()  # bounded
        for sent, tokens in zip(new, tag(new) if new else []):
            _READ[sent] = tokens
        return [_READ[s] for s in sentences]


def forget_readings() -> None:
    """Drop the cached readings (the layers stage, when it ends: its memory goes back before the next stage)."""
    with _READ_LOCK:
        _READ.clear()


class NounReader:
    """`nouns(contexts)`: of the words of `contexts` (word -> sentences containing it), those read as nouns."""

    def __init__(self, tag: Tagger = tag_readings) -> None:
        self.counts: dict[str, list[int]] = {}  # word -> [noun occurrences, tagged occurrences]
        self.tag = tag  # what tags the sentences (`readings`)
        self._lock = threading.Lock()

    def nouns(self, contexts: dict[str, list[str]]) -> set[str]:
        with self._lock:
            todo = {w: s[:PER_WORD] for w, s in contexts.items() if self.counts.get(w, [0, 0])[1] < SETTLED and s}
            sentences = list(dict.fromkeys(s for ss in todo.values() for s in ss))
            for tokens in readings(sentences, self.tag):
                for w, noun in tokens:
                    if w in todo:
                        c = self.counts.setdefault(w, [0, 0])
                        c[0] += noun
                        c[1] += 1
            # a word never tagged (spaCy split it otherwise) is not judged: it stays a candidate
            return {w for w in contexts if self.counts.get(w, [0, 0])[1] == 0
                    or 2 * self.counts[w][0] > self.counts[w][1]}
