"""Token-aware chunking with overlap.

Windows hold at most `size_tokens` tokens of the bundled MiniLM tokenizer. A window's end is pulled back to a
sentence end (or line break) when one lies in its last ~20%, else to the last whitespace; a chunk is never cut
inside a word unless a single "word" is longer than a whole window. The next window starts at the first sentence (or
line) start among the previous window's last `overlap` tokens, so it repeats whole sentences and at most that many
tokens (as a sentence splitter's overlap does); when the last sentence is longer than that, at its start if it
begins within twice the overlap, else at the start of a word `overlap` tokens back. A window that opened
mid-sentence ("it in 1986 and ran it until…") would hand extraction a fragment as a sentence (a statement, an
entity's description) that the window before already holds whole. Offsets index the original text; every chunk is
`text[start:end]` with no leading or trailing whitespace, and the chunks cover every non-space character.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.config import ChunkSettings
from core.ingest.tokens import iter_encodings

_SENTENCE_END = frozenset(".!?…")
_CLOSERS = frozenset("\"'”’»)]}")
_TAIL_FRACTION = 0.2
_COMPACT_AT = 100_000  # drop consumed tokens from the buffer once this many have piled up


@dataclass
class ChunkSpan:
    text: str
    start: int
    end: int
    n_tokens: int


def chunk_text(text: str, settings: ChunkSettings) -> list[ChunkSpan]:
    """Split `text` into overlapping token windows; see the module docstring."""
    first = _skip_space(text, 0)
    if first == len(text):
        return []
    last_end = len(text.rstrip())
    size = max(1, int(settings.size_tokens))
    overlap = min(int(round(size * settings.overlap)), size - 1)
    tail = max(1, int(round(size * _TAIL_FRACTION)))

    offs: list[tuple[int, int]] = []
    cont: list[bool] = []
    encodings = iter_encodings(text)
    exhausted = False
    chunks: list[ChunkSpan] = []
    i = 0  # buffer index of the current window's first token
    start_char = first
    while True:
        while not exhausted and len(offs) - i <= size:
            try:
                o, c = next(encodings)
            except StopIteration:
                exhausted = True
            else:
                offs.extend(o)
                cont.extend(c)
        n = len(offs)
        if n - i <= size:
            chunks.append(ChunkSpan(text[start_char:last_end], start_char, last_end, n - i))
            return chunks
        j = _cut(text, offs, cont, i, size, tail)
        end_char = offs[j - 1][1]
        chunks.append(ChunkSpan(text[start_char:end_char], start_char, end_char, j - i))
        k = _next_start(text, offs, i, j, overlap)
        start_char = offs[k][0] if k < j else _skip_space(text, end_char)
        i = k
        if i >= _COMPACT_AT:
            del offs[:i]
            del cont[:i]
            i = 0


def _skip_space(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos].isspace():
        pos += 1
    return pos


def _space_before(text: str, offs: list[tuple[int, int]], k: int) -> bool:
    """True when whitespace separates token k-1 from token k."""
    a, b = offs[k - 1][1], offs[k][0]
    if b <= a:
        return False
    return any(ch.isspace() for ch in text[a:b])


def _sentence_end_before(text: str, offs: list[tuple[int, int]], i: int, j: int) -> bool:
    """True when the boundary between tokens j-1 and j ends a sentence or a line."""
    a, b = offs[j - 1][1], offs[j][0]
    if "\n" in text[a:b]:
        return True
    p = j - 1
    while p > i and offs[p][1] - offs[p][0] == 1 and text[offs[p][0]] in _CLOSERS and offs[p][0] == offs[p - 1][1]:
        p -= 1
    ch = text[offs[p][1] - 1]
    if ch in "。！？":
        return True
    return ch in _SENTENCE_END and b > a


def _cut(text: str, offs: list[tuple[int, int]], cont: list[bool], i: int, size: int, tail: int) -> int:
    """Exclusive token index ending the window that starts at token i (the window is known to be full)."""
    hard = i + size
    floor = max(i + 1, hard - tail)
    first_space = -1
    for j in range(hard, floor - 1, -1):
        if _sentence_end_before(text, offs, i, j):
            return j
        if first_space < 0 and _space_before(text, offs, j):
            first_space = j
    if first_space > 0:
        return first_space
    for j in range(floor - 1, i, -1):
        if _space_before(text, offs, j):
            return j
    # One unbroken run longer than the window: cut at a word-piece start if possible.
    for j in range(hard, i, -1):
        if not cont[j]:
            return j
    return hard


def _next_start(text: str, offs: list[tuple[int, int]], i: int, j: int, overlap: int) -> int:
    """First token of the window after the one spanning tokens [i, j)."""
    if overlap <= 0:
        return j
    k0 = max(j - overlap, i + 1)
    lowest = max(i + 1, j - 2 * overlap)
    for k in range(k0, j):  # the first sentence start in the overlap: the overlap shrinks, and holds whole sentences
        if _sentence_end_before(text, offs, i, k):
            return k
    for k in range(k0 - 1, lowest - 1, -1):  # none: the start of the sentence the overlap is inside, when near
        if _sentence_end_before(text, offs, i, k):
            return k
    for k in range(k0, lowest - 1, -1):
        if _space_before(text, offs, k):
            return k
    for k in range(k0 + 1, j):
        if _space_before(text, offs, k):
            return k
    return j
