"""How an entity's descriptions are folded from its mentions (core/pipeline/mentions.py)."""

from __future__ import annotations

import random

from core.pipeline.mentions import fold_entity
from core.resolution.names import DESC_CAP, add_description


def _fold(contribs: list[tuple[str, bool]]) -> tuple[list[str], int]:
    descs: list[str] = []
    n = 0
    for desc, about in contribs:
        descs, n = add_description(descs, n, desc, about)
    return descs, n


def test_the_passage_about_an_entity_describes_it_first_even_when_others_named_it_before():
    others = ["Borders: Kuwait 221 km; Iraq 811 km. " + "x" * 700, "Imports - partners: Kuwait 7%. " + "y" * 600]
    own = "Kuwait: a small, high-income, oil-exporting economy on the Persian Gulf."
    row = {"title": "", "type": "", "weight": 0.0, "data": {}}
    for k, d in enumerate(others):
        fold_entity(row, "Kuwait", "LOCATION", d, ("a", k))
    assert row["data"]["descriptions"] == others  # the cap was already reached by other pages
    fold_entity(row, "Kuwait", "LOCATION", own, ("z", 0), about=True)
    assert row["data"]["descriptions"][0] == own
    assert row["data"]["about"] == 1
    assert row["data"]["descriptions"] == [own, others[0], others[1]][: len(row["data"]["descriptions"])]
    used = 0
    for d in row["data"]["descriptions"]:  # every kept description started under the cap
        assert used < DESC_CAP
        used += len(d)
    assert row["weight"] == 3.0


def test_descriptions_do_not_depend_on_how_about_and_other_mentions_interleave():
    """Documents added to a built workspace bring mentions out of canonical order; within each group the order is
    canonical, but the groups interleave any way. The fold must equal the fold of every about-passage first."""
    rng = random.Random(3)
    words = ["alpha", "beta", "gamma", "delta", "eps"]
    for trial in range(60):
        about = [" ".join(rng.choices(words, k=rng.randint(1, 120))) for _ in range(rng.randint(0, 4))]
        other = [" ".join(rng.choices(words, k=rng.randint(1, 120))) for _ in range(rng.randint(0, 5))]
        if about and other and rng.random() < 0.5:
            other.insert(rng.randrange(len(other) + 1), about[0])  # the same text in both kinds of passage
        ref = _fold([(d, True) for d in about] + [(d, False) for d in other])
        assert ref[0][: ref[1]] == about[: ref[1]]
        for _ in range(30):
            labels = [True] * len(about) + [False] * len(other)
            rng.shuffle(labels)
            a_it, o_it = iter(about), iter(other)
            seq = [(next(a_it), True) if lab else (next(o_it), False) for lab in labels]
            assert _fold(seq) == ref, (trial, seq)
