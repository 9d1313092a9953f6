"""Where each sentence of a retrieval's context comes from, and which of its sentences answer the question.

Citations. A context item (an entity's description, a relationship, a community report, a chunk) is read sentence
by sentence; each sentence is looked up in the texts of the retrieved documents (the `Retrieval.sources`, whose
numbers the answer cites as [n]) and is cited by the one that contains it: first a document that backs the item,
then the others in rank order. A sentence cut short ("…") is looked up by what is left of it, and one that an
extractive description glued to its subject's name ("Halden Barrier The six sluice gates …") by the sentence
without that leading name. A sentence that no retrieved document contains (a model's paraphrase, a summary entity's
made-up line) is cited by none: no citation rather than a wrong one (`cited_pieces`).

Best evidence (no model). `best_evidence` picks, among the sentences of the retrieved passages (each source's
backing chunks: its stored statements, else its sentences), the one that best covers the question's words: each
sentence read with its document's title, the first about a name the question holds (capitalised) when one is, a
name's words counting double and only where the whole name stands ("Tom Benson" does not hold "Anna Benson"),
rarer words more (IDF over those sentences), the word a which/what question asks for ("which university") half as
much again, and with the stored vectors, the sentence's cosine to the question.
A question the sentence leaves partly unanswered ("the seat of the county where Van Hook Township is": the township's
sentence names Mountrail County but not its seat) is followed one hop: a name the first sentence holds that the
question does not (a retrieved document's title, a capitalised span) leads to the sentences about it (in its own
document, or naming it), and the one that covers the question's remaining words (else, when that name's own document
was retrieved, its sentence nearest to the question) is the second hop. A sentence that covers remaining words
without such a link (a comparison's other half) may be the second sentence too, unless it is about another holder
of part of a name the question holds (Tom Benson, for Anna Benson's husband).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from core.retrieval.base import Retrieval
from core.text import STOPWORDS, fold, idf_table, norm_key, split_sentences, words

_HEADING = re.compile(r"(?:^|\s)#{1,6}\s+")  # Markdown headings inside chunk text end a sentence
_CAP_SPAN = re.compile(r"(?:[A-Z][\w'’.\-]*|[0-9]+)(?:\s+(?:(?:of|the|de|du|von|van|der|la|le|and|&)\s+)*"
                       r"(?:[A-Z][\w'’.\-]*|[0-9]+))*")
_WH = re.compile(r"\b(?:[Ww]hich|[Ww]hat|[Ww]hose)\s+([A-Za-z][\w\-]*)")
_TOKEN = re.compile(r"[\w'’\-]+")
_ENDINGS = ("ings", "ing", "ies", "ied", "ed", "es", "s")
MIN_WORDS = 4  # a sentence shorter than this is not evidence, nor looked up
MAX_GLUED = 6
WHOLE_DOCUMENT = 20_000  # characters: a retrieved document this short is read whole, a longer one by its chunks  # words of a leading name dropped to find a glued sentence


def norm(text: str) -> str:
    """Whitespace folded to single spaces: how sentences are compared with document texts."""
    return " ".join(text.split())


def stem(word: str) -> str:
    """A folded word without its possessive and one common ending ("Benson's", "teams", "designed", "training"
    meet "Benson", "team", "design", "train"): crude, but the same for the question and the sentences."""
    w = word.removesuffix("'s").removesuffix("’s")
    for end in _ENDINGS:
        if w.endswith(end) and len(w) - len(end) >= 4:
            return w[: -len(end)]
    return w


def terms(text: str) -> list[str]:
    """Content words as the question is matched: folded and `stem`med, stop words left out."""
    return [t for t in (stem(w) for w in words(text) if w not in STOPWORDS) if len(t) > 1 and t not in STOPWORDS]


def sentences_of(text: str) -> list[str]:
    """The sentences of a passage, headings apart, each once, in order."""
    out = [s for part in _HEADING.split(text) for s in split_sentences(part)]
    return list(dict.fromkeys(s for s in out if s.strip()))


class Locator:
    """Finds the retrieved document that contains a sentence. `docs`: document id -> text; `order`: the sources'
    document ids, best first (their [n] is their place + 1)."""

    def __init__(self, docs: dict[str, str], order: list[str]):
        self.order = [d for d in dict.fromkeys(order) if d in docs]
        self.texts = {d: norm(docs[d]) for d in self.order}
        self.number = {d: i + 1 for i, d in enumerate(dict.fromkeys(order))}

    def find(self, sentence: str, prefer: Iterable[str] = ()) -> tuple[str | None, str]:
        """(the document holding `sentence`, the sentence as it stands there), or (None, the sentence)."""
        s = norm(sentence)
        docs = [d for d in dict.fromkeys([*prefer, *self.order]) if d in self.texts]
        for variant, shown in _variants(s):
            for d in docs:
                if variant in self.texts[d]:
                    return d, shown
        return None, s


def _variants(s: str) -> Iterable[tuple[str, str]]:
    """(text to look up, text to show) for a sentence: itself; cut short, what is left; glued to a leading name,
    the sentence without it."""
    cut = s.endswith("…")
    base = s.rstrip("…").rstrip() if cut else s
    toks = base.split(" ")
    if len(toks) < MIN_WORDS:
        return
    yield base, s
    for k in range(1, min(MAX_GLUED, len(toks) - MIN_WORDS) + 1):
        head, rest = toks[:k], toks[k:]
        if not head[-1][:1].isupper() or not rest[0][:1].isupper():
            continue
        if all(w[:1].isupper() or w in ("of", "the", "and", "de", "von", "van") for w in head):
            tail = " ".join(rest)
            yield tail, tail + ("…" if cut else "")


def cited_pieces(body: str, locator: Locator, prefer: Iterable[str] = ()) -> list[tuple[str | None, str]]:
    """`body` (an item's text) as (document, text) pieces: consecutive sentences held by the same retrieved
    document, each sentence once; a sentence no retrieved document holds is a piece of its own with no document."""
    prefer = list(prefer)
    out: list[tuple[str | None, list[str]]] = []
    seen: set[str] = set()
    for sent in sentences_of(body):
        doc, shown = locator.find(sent, prefer)
        key = norm(shown)
        if key in seen:
            continue
        seen.add(key)
        if out and out[-1][0] == doc:
            out[-1][1].append(shown)
        else:
            out.append((doc, [shown]))
    return [(d, " ".join(x)) for d, x in out]


@dataclass
class Reading:
    """What evidence is read from: the retrieved documents' texts (for citations) and, per document, the sentences
    of its passages that back the context, with their cosine to the question when the vectors were read."""

    docs: dict[str, str] = field(default_factory=dict)  # source document id -> its text
    sentences: dict[str, list[str]] = field(default_factory=dict)  # source document id -> its passages' sentences
    similarity: dict[str, float] = field(default_factory=dict)  # norm(sentence) -> cosine to the question


@dataclass
class Evidence:
    sentence: str
    document_id: str
    title: str
    cite: int | None  # the [n] of its document among the sources
    hop: int = 1  # 2: the sentence about the name `via` that the first sentence holds
    via: str = ""
    words: list[str] = field(default_factory=list)  # the question's words it holds (`terms`), to highlight

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class _Cand:
    doc: str
    rank: int
    title: str
    sentence: str
    w: set[str]  # the sentence's terms
    t: set[str]  # its document title's terms
    sim: float


def _names(question: str) -> list[set[str]]:
    """The terms of each capitalised name of the question (its first word only when a name follows it)."""
    out: list[set[str]] = []
    for m in _CAP_SPAN.finditer(question):
        span = m.group()
        if m.start() == 0 and " " not in span:
            continue  # "What", "Which": a sentence's first word
        t = set(terms(span))
        if t:
            out.append(t)
    return out


def asked_term(question: str) -> str:
    """The term a which/what question asks for ("Which university trained…": university), or ""."""
    m = _WH.search(question)
    t = terms(m.group(1)) if m else []
    return t[0] if t else ""


def best_evidence(question: str, r: Retrieval, reading: Reading) -> list[Evidence]:
    """The sentence(s) of the retrieved passages that most likely answer `question` (module doc): one, or two when
    the first leaves words of the question to a second hop; [] when no sentence holds a word of the question."""
    q = set(terms(question))
    if not q:
        return []
    cands = _candidates(r, reading)
    if not cands:
        return []
    idf = idf_table([sorted(c.w | c.t) for c in cands] + [sorted(q)])
    groups = _names(question)
    named = set().union(*groups) if groups else set()
    head = asked_term(question)
    weight = {w: idf.get(w, 1.0) * (2.0 if w in named else 1.0) * (1.5 if w == head else 1.0) for w in q}

    def held(words_: set[str]) -> set[str]:
        """The question's terms `words_` holds, a name's only when it holds the whole name ("Tom Benson" does not
        hold "Anna Benson"'s "Benson")."""
        return (q & words_) - {w for g in groups if not g <= words_ for w in g}

    def cover(words_: set[str], among: set[str]) -> float:
        total = sum(weight[w] for w in among) or 1.0
        return sum(weight[w] for w in among & held(words_)) / total

    def first(c: _Cand) -> float:  # a name in its document's title is what the sentence is about ("She …")
        return cover(c.w | (c.t & named), q) + 0.4 * cover(c.w | c.t, q) + 0.3 * c.sim + 0.05 / (1 + c.rank)

    # the first sentence is about a name the question holds, when one is
    anchored = [c for c in cands if any(g <= (c.w | c.t) for g in groups)] or cands
    ranked = sorted(anchored, key=lambda c: (-first(c), c.rank))
    best = ranked[0]
    if not (q & (best.w | best.t)):
        return []
    pick: tuple[float, _Cand, _Cand | None, str] = (first(best), best, None, "")
    titles = {c.doc: c.title for c in cands}
    for a in ranked[:5]:
        left = q - a.w - a.t
        if not left:
            continue
        for c, via in _second(a, cands, titles, q):
            if not via and any(g & (c.w | c.t) and not g <= (c.w | c.t) for g in groups):
                continue  # unlinked and about another holder of a name's word (Tom Benson for Anna Benson)
            gain = cover(c.w, left) + 0.4 * cover(c.w | c.t, left)
            own = bool(via) and set(terms(via)) <= c.t  # a sentence of the bridge's own document
            if gain <= 0 and not own:
                continue
            score = first(a) + gain + 0.3 * c.sim + (0.2 if via else 0.0) + (0.1 if own else 0.0)
            # a pair that adds no word of the question must beat the best single sentence by a margin
            bar = first(best) + (0.0 if gain > 0 else 0.15)
            if score > bar and score > pick[0]:
                pick = (score, a, c, via)
    _, one, two, via = pick
    out = [_evidence(one, q, 1, "", r)]
    if two is not None:
        out.append(_evidence(two, q, 2, via, r))
    return out


def _second(a: _Cand, cands: list[_Cand], titles: dict[str, str], q: set[str]) -> Iterable[tuple[_Cand, str]]:
    """Sentences that may follow `a`: (sentence, the name of `a` it is about) for a name `a` holds that the question
    does not; (sentence, "") for any other sentence."""
    bridges: list[str] = []
    low = fold(a.sentence)
    for d, title in titles.items():
        base = re.sub(r"\s*\(.*\)$", "", title)
        tt = set(terms(base))
        if d != a.doc and tt and not tt <= q and not tt <= a.t and re.search(
                rf"(?<!\w){re.escape(fold(base))}(?!\w)", low):
            bridges.append(base)
    for m in _CAP_SPAN.finditer(a.sentence):
        tt = set(terms(m.group()))
        if tt and not tt <= q | a.t and m.group() not in bridges:
            bridges.append(m.group())
    for c in cands:
        if c is a or norm_key(c.sentence) == norm_key(a.sentence):
            continue
        via = next((b for b in bridges if set(terms(b)) <= (c.w | c.t)), "")
        yield c, via


def _candidates(r: Retrieval, reading: Reading) -> list[_Cand]:
    out: list[_Cand] = []
    seen: set[str] = set()
    for rank, s in enumerate(r.sources):
        for sent in reading.sentences.get(s.document_id, []):
            key = norm(sent)
            if len(key.split(" ")) < MIN_WORDS or key in seen:
                continue
            seen.add(key)
            out.append(_Cand(s.document_id, rank, s.title, key, set(terms(key)), set(terms(s.title)),
                             reading.similarity.get(key, 0.0)))
    return out


def _evidence(c: _Cand, q: set[str], hop: int, via: str, r: Retrieval) -> Evidence:
    number = next((i + 1 for i, s in enumerate(r.sources) if s.document_id == c.doc), None)
    return Evidence(c.sentence, c.doc, c.title, number, hop, via, sorted(q & c.w))


def highlight(sentence: str, words_: Iterable[str]) -> list[tuple[str, bool]]:
    """`sentence` as (text, matched) runs: a run of a word whose `terms` form is among `words_` is matched."""
    want = set(words_)
    out: list[tuple[str, bool]] = []
    pos = 0
    for m in _TOKEN.finditer(sentence):
        hit = bool(want & set(terms(m.group())))
        if not hit:
            continue
        if m.start() > pos:
            out.append((sentence[pos:m.start()], False))
        out.append((m.group(), True))
        pos = m.end()
    if pos < len(sentence):
        out.append((sentence[pos:], False))
    return out


def read_sources(store, ws_id: int, r: Retrieval) -> Reading:
    """The texts of `r`'s source documents and, per document, its sentences: of a short one (WHOLE_DOCUMENT) all of
    them, of a longer one those of its chunks that back the context (`Source.chunk_ids`); its stored statements there
    in document order, else the passages' sentences."""
    from sqlmodel import col, select

    from core.models import Node

    ids = [s.document_id for s in r.sources]
    docs = {d: doc.text for d, doc in store.documents_by_id(ws_id, ids).items()}
    chunks = store.nodes_by_id(ws_id, [c for s in r.sources for c in s.chunk_ids])
    stated: dict[str, list[str]] = {}
    if docs:
        with store.session() as s:
            for text, doc in s.exec(select(Node.text, Node.document_id).where(
                    Node.workspace_id == ws_id, Node.kind == "statement", col(Node.document_id).in_(list(docs)))):
                if doc is not None and text:
                    stated.setdefault(doc, []).append(norm(text))
    out = Reading(docs=docs)
    for src in r.sources:
        d = src.document_id
        if d not in docs:
            continue
        whole = norm(docs[d])
        passages = [whole] if len(whole) <= WHOLE_DOCUMENT else [
            norm(chunks[c].text) for c in src.chunk_ids if c in chunks] or [whole[:WHOLE_DOCUMENT]]
        mine = sorted({t for t in stated.get(d, []) if any(t in p for p in passages)}, key=lambda t: (whole.find(t), t))
        out.sentences[d] = mine or [norm(x) for p in passages for x in sentences_of(p)]
    return out


def add_similarity(reading: Reading, res, question: str) -> None:
    """Each stored statement's cosine to the question (the statements' stored vectors), for `best_evidence`."""
    import numpy as np
    from sqlmodel import col, select

    from core.models import Node

    wanted = {t for ts in reading.sentences.values() for t in ts}
    if not wanted:
        return
    with res.store.session() as s:
        rows = s.exec(select(Node.id, Node.text).where(Node.workspace_id == res.ws_id, Node.kind == "statement",
                                                       col(Node.document_id).in_(list(reading.sentences)))).all()
    ids = {i: norm(t) for i, t in rows if t and norm(t) in wanted}
    vecs = res.index.vectors("statement", list(ids)) if ids else {}
    if not vecs:
        return
    qv = np.asarray(res.embed_query(question), dtype=np.float32)
    qv = qv / max(float(np.linalg.norm(qv)), 1e-12)
    for i, v in vecs.items():
        n = float(np.linalg.norm(v)) or 1.0
        key = ids[i]
        reading.similarity[key] = max(reading.similarity.get(key, -1.0), float(v @ qv) / n)
