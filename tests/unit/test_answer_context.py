"""The answer step's context: every kind of item a section holds reaches the model, `MAX_ITEMS` of each."""

from __future__ import annotations

from core.answer import MAX_ITEMS, context_block
from core.retrieval.base import ContextItem, Retrieval, Source, per_kind


def _item(i: int, kind: str) -> ContextItem:
    return ContextItem(f"{kind}{i}", kind, f"{kind} {i}", f"text of {kind} {i}", 1.0 - i / 100, None, [f"d{i % 3}"])


def test_per_kind_keeps_the_first_items_of_each_kind_in_order():
    items = [_item(i, "entity") for i in range(5)] + [_item(i, "chunk") for i in range(3)]
    kept, left = per_kind(items, 2)
    assert [pos for pos, _ in kept] == [0, 1, 5, 6]
    assert [it.id for _, it in kept] == ["entity0", "entity1", "chunk0", "chunk1"]
    assert left == {"entity": 3, "chunk": 1}
    assert per_kind(items, 10) == (list(enumerate(items)), {})


def test_text_units_after_many_entities_reach_the_answer():
    r = Retrieval("hirag", "q?")
    r.sections["local"] = [_item(i, "entity") for i in range(MAX_ITEMS + 5)] + [_item(i, "chunk") for i in range(3)]
    r.sources = [Source(document_id="d0", external_id=None, title="Doc 0", score=1.0, chunk_ids=["c"])]
    ctx = context_block(r)
    assert len(ctx.local) == MAX_ITEMS + 3
    assert sum("text of chunk" in line for line in ctx.local) == 3
    assert ctx.local[0].startswith("[1] entity 0:")  # cites the source of its document
    assert ctx.local[-1] == "text of chunk 2"  # a chunk is its text; its document is not a source: no citation
    assert not any(f"entity {MAX_ITEMS}:" in line for line in ctx.local)


def _long(i: int, kind: str, section_docs: str) -> ContextItem:
    return ContextItem(f"{kind}{i}", kind, f"{kind} {i}", " ".join(f"word{j}" for j in range(120)), 1.0, None,
                       [section_docs])


def test_a_token_budget_keeps_the_best_items_of_every_section_and_kind():
    from core.ingest import count_tokens

    r = Retrieval("hirag", "q?")
    r.sections["local"] = [_long(i, "entity", "d") for i in range(20)] + [_long(i, "chunk", "d") for i in range(10)]
    r.sections["bridge"] = [_long(i, "relationship", "d") for i in range(20)]
    r.sections["global"] = [_long(i, "community", "d") for i in range(8)]
    full = context_block(r)
    one = count_tokens(full.local[0])
    ctx = context_block(r, max_tokens=8 * one + one // 2)  # room for 8 items
    kept = ctx.local + ctx.bridge + ctx.global_
    assert len(kept) == 8 and sum(count_tokens(t) for t in kept) <= 8 * one + one // 2
    # taken in turns: the first two of each of the four (section, kind) streams, best first
    assert ctx.local == [full.local[0], full.local[1], full.local[20], full.local[21]]
    assert ctx.bridge == full.bridge[:2] and ctx.global_ == full.global_[:2]
    assert context_block(r, max_tokens=10**6) == full  # a budget that holds it all changes nothing
    assert context_block(r, max_tokens=0).local == []  # nothing fits: the question is still answered, without context
