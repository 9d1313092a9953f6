"""The seeded benchmark corpus generator (bench/gen_corpus.py): size, determinism, and a world that connects."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from bench.gen_corpus import generate, write_corpus
from core.extract.offline import extract_offline
from core.ingest.tokens import count_tokens
from core.text import norm_key

TOKENS = 30_000
TYPES = ["PERSON", "ORGANIZATION", "LOCATION", "EVENT", "WORK", "CONCEPT"]


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return generate(TOKENS, seed=7)


def test_size_is_the_requested_token_count_within_5_percent(rows):
    n = sum(count_tokens(r["text"]) for r in rows)
    assert abs(n - TOKENS) <= 0.05 * TOKENS, n


def test_rows_are_articles_with_unique_ids_and_titles(rows):
    assert [set(r) for r in rows] == [{"id", "title", "text"}] * len(rows)
    assert len({r["id"] for r in rows}) == len(rows)
    assert len({r["title"] for r in rows}) == len(rows)
    lengths = sorted(count_tokens(r["text"]) for r in rows)
    assert lengths[0] >= 100 and lengths[-1] <= 1800, (lengths[0], lengths[-1])
    assert lengths[len(lengths) // 2] < lengths[-1] / 1.5, "lengths vary"
    text = " ".join(r["text"] for r in rows)
    assert re.search(r"\b1[89]\d\d\b", text) and re.search(r"\d{1,3},\d{3}", text), "dates and numbers"


def test_same_seed_same_corpus_other_seed_other_corpus(rows):
    assert generate(TOKENS, seed=7) == rows
    other = generate(TOKENS, seed=8)
    assert [r["text"] for r in other] != [r["text"] for r in rows]


def test_sentences_vary(rows):
    sentences = [s for r in rows for s in re.split(r"(?<=\.)\s+", r["text"])]
    assert len(set(sentences)) > 0.9 * len(sentences)


def test_the_offline_extractor_finds_entities_shared_across_documents(rows):
    docs_of: Counter[str] = Counter()
    types: Counter[str] = Counter()
    for r in rows:
        ex = extract_offline(r["text"], TYPES, subject=r["title"])
        docs_of.update({norm_key(e.name) for e in ex.entities})
        types.update(e.type for e in ex.entities)
    shared = [k for k, n in docs_of.items() if n >= 3]
    assert len(shared) >= 30, len(shared)
    assert max(docs_of.values()) >= len(rows) // 10, "a few names recur across many articles"
    assert min(types[t] for t in ("PERSON", "ORGANIZATION", "LOCATION", "WORK")) > 20, types


def test_write_corpus(tmp_path, rows):
    meta = write_corpus(rows, tmp_path, 7, TOKENS)
    lines = (tmp_path / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(x) for x in lines] == rows
    assert json.loads((tmp_path / "meta.json").read_text()) == meta
    assert meta["documents"] == len(rows) and abs(meta["tokens"] - TOKENS) <= 0.05 * TOKENS
