"""Token counting and the token-aware chunker."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from core.config import ChunkSettings
from core.ingest import ChunkSpan, chunk_text, count_tokens, token_offsets
from core.ingest import tokens as tokens_mod

HOTPOT = Path("/work/shared/eval/hotpotqa/corpus.jsonl")
WORDS = (
    "the river city market old bridge green house north light stone water music people garden winter "
    "story night road school paper small early wood field song horse tower black island summer"
).split()


def sentences_text(n_sentences: int, seed: int = 1, paragraph_every: int = 0) -> str:
    """Short sentences of common one-token words, so every 20% window tail holds a sentence end."""
    rng = random.Random(seed)
    out = []
    for i in range(n_sentences):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 7))]
        out.append(" ".join(words).capitalize() + rng.choice([".", ".", "!", "?"]))
        if paragraph_every and (i + 1) % paragraph_every == 0:
            out.append("\n\n")
        else:
            out.append(" ")
    return "  \n" + "".join(out) + "\n\n  "


def check_invariants(text: str, chunks: list[ChunkSpan], size: int, slack: int = 2) -> None:
    assert chunks, "non-blank text must give chunks"
    for c in chunks:
        assert c.text == text[c.start : c.end]
        assert c.text == c.text.strip() and c.text
        assert c.n_tokens <= size
        assert count_tokens(c.text) <= size + slack
        assert c.start == 0 or text[c.start - 1].isspace(), f"starts mid-word: {text[c.start - 5 : c.start + 5]!r}"
        assert c.end == len(text) or text[c.end].isspace(), f"ends mid-word: {text[c.end - 5 : c.end + 5]!r}"
    # Coverage: first and last non-space characters included, no gap holding anything but whitespace.
    assert chunks[0].start == len(text) - len(text.lstrip())
    assert chunks[-1].end == len(text.rstrip())
    for a, b in zip(chunks, chunks[1:]):
        assert a.start < b.start and a.end < b.end
        assert b.start <= a.end or text[a.end : b.start].isspace()


# -------------------------------------------------------------------------------------------------------- tokens
def test_count_tokens_and_offsets_agree():
    text = "Jeffrey Porcaro (1954–1992) was an American drummer; unbelievably prolific. Café 東京!"
    offs = token_offsets(text)
    assert count_tokens(text) == len(offs) > 15
    assert offs == sorted(offs)
    assert all(0 <= s < e <= len(text) for s, e in offs)
    pieces = [text[s:e] for s, e in offs]
    assert pieces[0] == "Jeffrey" and "(" in pieces and "drummer" in pieces
    assert "東" in pieces and "京" in pieces


def test_count_tokens_has_no_special_tokens_and_no_truncation():
    assert count_tokens("") == 0
    assert count_tokens("hello") == 1
    long = "word " * 1000  # the tokenizer file truncates at 128 tokens unless disabled
    assert count_tokens(long) == 1000


def test_segmented_encoding_matches_whole(monkeypatch):
    text = sentences_text(400, seed=3, paragraph_every=5)
    whole = token_offsets(text)
    monkeypatch.setattr(tokens_mod, "SEGMENT_CHARS", 300)
    assert len(tokens_mod.split_segments(text)) > 10
    assert token_offsets(text) == whole
    assert count_tokens(text) == len(whole)


def test_split_segments_cover_text_and_respect_limit():
    text = "a" * 1000 + " " + "b\n" * 300 + "\n\n" + "c" * 50
    spans = tokens_mod.split_segments(text, 200)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert all(0 < e - s <= 200 for s, e in spans)


# ------------------------------------------------------------------------------------------------------ chunking
@pytest.mark.parametrize("text", ["", "   ", "\n\n\t  \n"])
def test_blank_text_gives_no_chunks(text):
    assert chunk_text(text, ChunkSettings()) == []


def test_short_text_is_one_chunk():
    text = "\n  A short note. It fits in one window.  \n"
    chunks = chunk_text(text, ChunkSettings(size_tokens=50))
    assert len(chunks) == 1
    c = chunks[0]
    assert c.text == "A short note. It fits in one window."
    assert text[c.start : c.end] == c.text
    assert c.n_tokens == count_tokens(c.text)


def test_windows_overlap_and_respect_size():
    size, overlap = 50, 0.2
    text = sentences_text(300, seed=11)
    chunks = chunk_text(text, ChunkSettings(size_tokens=size, overlap=overlap))
    assert len(chunks) > 10
    check_invariants(text, chunks, size)
    want = round(size * overlap)
    for a, b in zip(chunks, chunks[1:]):
        assert b.start < a.end, "consecutive chunks must overlap"
        shared = count_tokens(text[b.start : a.end])
        assert 0 < shared <= want, (shared, want)  # whole sentences, at most the overlap
    assert sum(c.n_tokens for c in chunks) > count_tokens(text)


def test_boundaries_snap_to_sentence_ends():
    text = sentences_text(300, seed=5)
    chunks = chunk_text(text, ChunkSettings(size_tokens=60, overlap=0.15))
    for c in chunks[:-1]:
        assert c.text[-1] in ".!?", c.text[-20:]
        assert c.n_tokens >= 60 * 0.8 - 1  # snapped only within the last ~20% of the window


def test_windows_open_at_a_sentence_start_when_the_overlap_holds_one():
    # sentences of 3-7 words: the overlap (12 tokens) always holds a sentence start
    text = sentences_text(300, seed=6)
    size, overlap = 60, 0.2
    chunks = chunk_text(text, ChunkSettings(size_tokens=size, overlap=overlap))
    assert len(chunks) > 10
    check_invariants(text, chunks, size)
    for a, b in zip(chunks, chunks[1:]):
        assert b.text[0].isupper(), b.text[:30]
        assert text[: b.start].rstrip()[-1] in ".!?", text[b.start - 20 : b.start + 20]
        assert 0 < count_tokens(text[b.start : a.end]) <= round(size * overlap)


def test_a_long_last_sentence_is_repeated_whole_when_it_starts_within_twice_the_overlap():
    long = "Long " + " ".join(["word"] * 15) + "."  # 17 tokens: longer than the overlap (14), shorter than twice it
    text = " ".join([long] * 40)
    chunks = chunk_text(text, ChunkSettings(size_tokens=70, overlap=0.2))  # windows of 4 sentences, 68 tokens
    check_invariants(text, chunks, 70)
    assert len(chunks) > 10
    for a, b in zip(chunks, chunks[1:]):
        assert b.text.startswith("Long"), b.text[:30]
        assert count_tokens(text[b.start : a.end]) == 17, "the last sentence, whole"


def test_a_window_without_a_sentence_start_in_reach_opens_at_a_word():
    rng = random.Random(12)
    text = " ".join(rng.choice(WORDS) for _ in range(600))  # one endless sentence
    chunks = chunk_text(text, ChunkSettings(size_tokens=50, overlap=0.2))
    check_invariants(text, chunks, 50)
    for b in chunks[1:]:
        assert text[b.start - 1] == " "


def test_paragraph_breaks_are_sentence_ends():
    rng = random.Random(3)
    paras = [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(60)]  # no punctuation at all
    text = "\n\n".join(paras)
    chunks = chunk_text(text, ChunkSettings(size_tokens=100, overlap=0.1))
    check_invariants(text, chunks, 100)
    ends = [c.end for c in chunks[:-1]]
    assert all(text[e : e + 2] == "\n\n" for e in ends)


def test_no_overlap_setting():
    text = sentences_text(200, seed=2)
    chunks = chunk_text(text, ChunkSettings(size_tokens=40, overlap=0.0))
    check_invariants(text, chunks, 40)
    for a, b in zip(chunks, chunks[1:]):
        assert b.start > a.end and text[a.end : b.start].isspace()
    assert sum(c.n_tokens for c in chunks) == count_tokens(text)


def test_never_cuts_inside_a_word_without_sentence_ends():
    rng = random.Random(9)
    vocab = ["extraordinarily", "counterintuitive", "photosynthesis", "lackadaisical", "x", "of", "ünïcödé", "東京"]
    text = " ".join(rng.choice(vocab) for _ in range(2000))
    chunks = chunk_text(text, ChunkSettings(size_tokens=64, overlap=0.25))
    check_invariants(text, chunks, 64)


def test_unbroken_run_longer_than_a_window_still_terminates():
    text = "start " + "abc" * 2000 + " end"
    chunks = chunk_text(text, ChunkSettings(size_tokens=30, overlap=0.2))
    assert all(c.n_tokens <= 30 for c in chunks)
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    assert all(b.start <= a.end for a, b in zip(chunks, chunks[1:]))
    assert len(chunks) < 200


def test_offsets_are_into_the_original_text():
    text = "Ünïcode  ﬁrst — “quoted” text.\r\n\r\nSecond\tparagraph with   spaces. " * 40
    chunks = chunk_text(text, ChunkSettings(size_tokens=32, overlap=0.2))
    check_invariants(text, chunks, 32)
    for c in chunks:
        assert text[c.start : c.end] == c.text


def test_chunks_are_deterministic():
    text = sentences_text(250, seed=4, paragraph_every=7)
    s = ChunkSettings(size_tokens=45, overlap=0.3)
    assert chunk_text(text, s) == chunk_text(text, s)


def test_segmented_long_text_chunks_identically(monkeypatch):
    text = sentences_text(600, seed=8, paragraph_every=4)
    s = ChunkSettings(size_tokens=80, overlap=0.2)
    reference = chunk_text(text, s)
    monkeypatch.setattr(tokens_mod, "SEGMENT_CHARS", 400)
    assert chunk_text(text, s) == reference
    check_invariants(text, reference, 80)


@pytest.mark.skipif(not HOTPOT.exists(), reason="eval corpus not present")
def test_hotpotqa_chunking_is_fast():
    texts = [json.loads(line)["text"] for line in HOTPOT.open(encoding="utf-8")]
    count_tokens("warm up")
    t0 = time.perf_counter()
    all_chunks = [chunk_text(t, ChunkSettings()) for t in texts]
    elapsed = time.perf_counter() - t0
    assert elapsed < 10.0, elapsed
    assert all(len(c) >= 1 for c in all_chunks)
    for text, chunks in zip(texts[:200], all_chunks[:200]):
        check_invariants(text, chunks, 300)
    print(f"\nhotpotqa: {len(texts)} passages -> {sum(map(len, all_chunks))} chunks in {elapsed:.2f}s")
