"""A question is stored in the history every viewer of a workspace may read: it has a length limit (a setting with
its environment variable), and on a workspace shared with everyone each person reads only their own questions."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from core import access
from core.access import User
from core.config import Settings
from core.store import Store
from core.workspace import ask


def test_a_question_past_the_limit_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv("STRATA_MAX_QUESTION_CHARS", "50")
    res = SimpleNamespace(settings=Settings.from_env())
    with pytest.raises(ValueError) as err:
        ask(res, None, "x" * 51, "naive")  # type: ignore[arg-type]
    assert "51 > 50" in str(err.value) and "STRATA_MAX_QUESTION_CHARS" in str(err.value)
    assert Settings().retrieval.max_question_chars == 2000


def test_whose_questions_a_person_reads(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'strata.db'}")
    owner, member, stranger = User("o@example.org"), User("m@example.org"), User("s@example.org")
    ws = access.create(store, owner, "shared")
    access.share(store, owner, ws, member.name, "viewer")
    access.share(store, owner, ws, access.EVERYONE, "viewer")
    assert access.history_of(store, owner, ws) is None
    assert access.history_of(store, member, ws) is None
    assert access.history_of(store, stranger, ws) == stranger.name  # only through "*": their own questions
    assert access.history_of(store, access.LOCAL, ws) is None
