"""Plain-text helpers shared by the offline extractor, offline summaries and extractive answers.

Words (`words`, `content_words`: BM25, GraphRAG global's offline map step, ArchRAG's filter, offline summaries and
answers) are read in any script: letters, marks and digits of every alphabet, an apostrophe or hyphen inside a word
keeping it whole ("o'neill", "well-known"), folded as a reader's query would be (`fold`: "Zürich", "ZURICH" and
"zurich" are one word; "Αθήνα" and "αθηνα" too). Scripts written without spaces between words (Chinese, Japanese,
Korean, Thai, Lao, Khmer, Myanmar) have no word boundaries to read without a dictionary, so a run of them is read
as its overlapping character bigrams (a single character alone), as Lucene's CJK analyzer does: "東京タワー" ->
東京, 京タ, タワ, ワー; a query's bigrams then meet the document's wherever the same two characters follow each other.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

import regex

_ABBREV = r"(?<!\bMr)(?<!\bMrs)(?<!\bMs)(?<!\bDr)(?<!\bSt)(?<!\bJr)(?<!\bSr)(?<!\bvs)(?<!\bNo)(?<!\bCo)(?<!\bInc)(?<!\bLtd)(?<!\bProf)(?<!\bGen)(?<!\bLt)(?<!\bMt)"
# The lookahead for the terminal mark comes first so the sixteen lookbehinds run only at . ! ? (the same matches,
# 8x faster: the engine tried every lookbehind at every character before).
_SENT_END = re.compile(r"(?=[.!?])" + _ABBREV + r"(?<!\b[A-Z])([.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
# Letters of the scripts written without spaces (kana's prolonged sound mark and 々 are letters of Common script
# used by them: Script_Extensions counts them in; the scripts' punctuation is not a letter).
_UNSPACED = r"[\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}\p{scx=Hangul}\p{scx=Thai}\p{scx=Lao}\p{scx=Khmer}\p{scx=Myanmar}]"
_WORD = regex.compile(
    rf"(?P<run>[{_UNSPACED}&&[\p{{L}}\p{{N}}]](?:[{_UNSPACED}&&[\p{{L}}\p{{N}}]]|\p{{M}})*)"  # an unspaced run
    rf"|[[\p{{L}}\p{{N}}]--{_UNSPACED}](?:[[\p{{L}}\p{{M}}\p{{N}}'\-]--{_UNSPACED}])*",  # a word of a spaced script
    regex.V1)
_ASCII_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")
_WIDE = regex.compile(r"[[\p{L}\p{M}\p{N}]--\p{ASCII}]", regex.V1)
_GRAPHEME = regex.compile(r"\X")
_IS_UNSPACED = regex.compile(_UNSPACED, regex.V1)
_MARKS = regex.compile(r"\p{M}+")
_POINTS = frozenset([1, *range(10, 37)])  # combining classes of overlays and of Hebrew and Arabic points
# Latin letters that carry their stroke in the letter itself (no decomposition), as a reader types them without it
_STROKES = str.maketrans({"ø": "o", "ł": "l", "đ": "d", "ð": "d", "ħ": "h", "ı": "i", "ŧ": "t", "ƒ": "f",
                          "æ": "ae", "œ": "oe", "þ": "th"})
_PUNCT = re.compile(r"[^\w\s&]+")
_LEADING = re.compile(r"^(the|a|an)\s+")

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having he
    her here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
    now of off on once only or other our ours ourselves out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves one two three
    many much may might must shall upon via among within without whose whereas however although though yet
    since per each every either neither what which who whom whose""".split()
)


def split_sentences(text: str) -> list[str]:
    """Sentences of a text, split on terminal punctuation and blank lines, abbreviations and initials kept."""
    out: list[str] = []
    for para in re.split(r"\n\s*\n|\n(?=[#*\-] )", text):
        para = " ".join(para.split())
        if not para:
            continue
        start = 0
        for m in _SENT_END.finditer(para):
            s = para[start : m.end(1)].strip()
            if s:
                out.append(s)
            start = m.end()
        tail = para[start:].strip()
        if tail:
            out.append(tail)
    return out


def fold(text: str) -> str:
    """`text` as a search matches it: case folded (ß -> ss, final ς -> σ), compatibility forms unified (ﬁ -> fi,
    full-width Ａ -> a), accents dropped (é -> e, ά -> α; as `norm_key` does, but keeping the marks that make another
    letter: が stays が), stroked Latin letters plain (ł -> l, ø -> o)."""
    if text.isascii():
        return text.lower()
    s = unicodedata.normalize("NFKD", text.casefold())
    return unicodedata.normalize("NFC", _MARKS.sub(_unaccented, s)).translate(_STROKES)


def _unaccented(m: regex.Match) -> str:
    return _accents_dropped(m.group())


@functools.lru_cache(maxsize=4096)
def _accents_dropped(marks: str) -> str:
    """The marks `fold` drops: accents and points that sit on a letter (canonical combining classes 1, 10-36 and 200
    up: Latin, Greek and Cyrillic accents, Hebrew and Arabic vowel points), not those that make another letter (kana
    voicing 8, Indic nukta 7 and virama 9, Thai, Lao and Tibetan vowels and tones 84-132, spacing marks 0)."""
    return "".join(c for c in marks if (k := unicodedata.combining(c)) not in _POINTS and k < 200)


def words(text: str, folded: bool = True) -> list[str]:
    """The words of `text` in reading order (module doc): folded (`fold`), or only lower-cased with `folded=False`
    (for names shown to a reader); a run of an unspaced script gives its character bigrams."""
    s = fold(text) if folded else unicodedata.normalize("NFC", text).lower()
    if s.isascii() or not _WIDE.search(s):
        return _ASCII_WORD.findall(s)  # no letter or digit outside ASCII: the same words, 10x faster
    out: list[str] = []
    for m in _WORD.finditer(s):
        run = m.group("run")
        if run is None:
            out.append(m.group())
            continue
        units = _GRAPHEME.findall(run)
        out.extend([run] if len(units) == 1 else [a + b for a, b in zip(units, units[1:])])
    return out


def unspaced(word: str) -> bool:
    """Whether a word of `words` comes from a script written without spaces (a bigram, or a lone character)."""
    return _IS_UNSPACED.match(word) is not None


def content_words(text: str) -> list[str]:
    """`words` without stop words and one-letter words (a lone character of an unspaced script is a word)."""
    return [w for w in words(text) if w not in STOPWORDS and (len(w) > 1 or unspaced(w))]


def idf_table(docs: Iterable[Sequence[str]]) -> dict[str, float]:
    df: Counter[str] = Counter()
    n = 0
    for d in docs:
        n += 1
        df.update(set(d))
    return {w: math.log((n + 1) / (c + 0.5)) for w, c in df.items()}


def central_sentences(sentences: list[str], k: int) -> list[tuple[int, float]]:
    """The k sentences most similar to the TF-IDF centroid of all sentences: (index, score), best first."""
    toks = [content_words(s) for s in sentences]
    idf = idf_table(toks)
    vecs = []
    centroid: Counter[str] = Counter()
    for t in toks:
        tf = Counter(t)
        v = {w: c * idf.get(w, 0.0) for w, c in tf.items()}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        v = {w: x / norm for w, x in v.items()}
        vecs.append(v)
        centroid.update(v)
    scored = []
    for i, v in enumerate(vecs):
        score = sum(x * centroid.get(w, 0.0) for w, x in v.items())
        # prefer informative sentences of moderate length
        length = len(toks[i])
        score *= min(1.0, length / 8.0) if length else 0.0
        scored.append((i, score))
    scored.sort(key=lambda p: (-p[1], p[0]))
    return scored[:k]


def overlap_score(query_terms: set[str], text: str, idf: dict[str, float] | None = None) -> float:
    """IDF-weighted share of the query's content words that occur in text."""
    if not query_terms:
        return 0.0
    present = set(content_words(text)) & query_terms
    if idf is None:
        return len(present) / len(query_terms)
    total = sum(idf.get(w, 1.0) for w in query_terms) or 1.0
    return sum(idf.get(w, 1.0) for w in present) / total


def truncate(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rsplit(" ", 1)[0] + "…"


def strip_label(line: str) -> str:
    """'Name: description' or 'A — predicate — B: description' -> the description (context and report lines)."""
    head, sep, body = line.partition(": ")
    return body if sep and len(head) <= 150 and "." not in head else line


def norm_key(name: str) -> str:
    """The merge key of an entity name: accents folded, lower case, no punctuation, no leading article."""
    s = unicodedata.normalize("NFKD", name)
    s = "".join(c for c in s if not unicodedata.combining(c)).lower().strip()
    s = re.sub(r"['’]s\b", "", s)
    s = _PUNCT.sub(" ", s)
    s = " ".join(s.split())
    return _LEADING.sub("", s)
