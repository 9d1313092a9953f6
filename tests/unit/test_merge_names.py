"""Entity-resolution review, issue 39 §3: the compact table's evidence (documents that mention both entities) and
its keep-which-name choice (core/resolution/review.py `name_choices`, `choose_name`): a merge applies the chosen
name, an undo brings the old one back, a name that is not the pair's is refused, a record of another workspace is
not found."""

from __future__ import annotations

import pytest

from core.models import EntityMerge, Node
from core.resolution import review as rv
from core.resolution.merge import MergeError, merge, record_candidates, undo
from core.resolution.names import settle
from tests.unit.test_merge import build_graph


def _candidate(store, ws, ids, kept: str, gone: str) -> rv.MergeRow:
    from core.resolution.candidates import Candidate

    [mid] = record_candidates(store, ws.id, [Candidate(ids[kept], ids[gone], 0.9, {
        "titles": [kept, gone], "types": ["PERSON", "PERSON"], "name_similarity": 0.88, "match": "contained",
        "cosine": 0.7, "jaccard": 0.25})])
    return next(r for r in rv.merge_table(store, ws.id) if r.id == mid)


def test_the_name_a_merge_settles_on_is_offered_first_and_a_chosen_one_is_applied_then_undone(tmp_path):
    store, ws, index, ids = build_graph(tmp_path)
    row = _candidate(store, ws, ids, "Jeff Porcaro", "Porcaro")
    names, settled, current = rv.name_choices(row, rv.sides(store, ws.id, [row]))
    assert names == ["Jeff Porcaro", "Porcaro"]
    assert settled == current == "Jeff Porcaro", "2 mentions against 1: the merge would keep the longer name"

    rv.choose_name(store, ws.id, row.id, "Porcaro")
    row = next(r for r in rv.merge_table(store, ws.id) if r.id == row.id)
    assert rv.name_choices(row, rv.sides(store, ws.id, [row]))[2] == "Porcaro", "the choice is remembered"
    merge(store, ws.id, row.id, index)
    with store.session() as s:
        kept = s.get(Node, ids["Jeff Porcaro"])
        assert kept.title == "Porcaro" and kept.data["name"] == "Porcaro"
        assert set(kept.data["aliases"]) == {"Jeff Porcaro", "Porcaro"}, "both names stay aliases"
    assert settle(kept.title, kept.type, kept.data)[0] == "Porcaro", "a later settle (a rebuild's refold) keeps it"
    with pytest.raises(MergeError, match="merged already"):
        rv.choose_name(store, ws.id, row.id, "Jeff Porcaro")

    undo(store, ws.id, row.id, index)
    with store.session() as s:
        kept = s.get(Node, ids["Jeff Porcaro"])
        assert kept.title == "Jeff Porcaro" and "name" not in kept.data
        assert s.get(Node, ids["Porcaro"]).title == "Porcaro"


def test_no_choice_or_the_settled_one_leaves_the_merge_as_it_was(tmp_path):
    store, ws, index, ids = build_graph(tmp_path)
    row = _candidate(store, ws, ids, "Jeff Porcaro", "Porcaro")
    rv.choose_name(store, ws.id, row.id, "Porcaro")
    rv.choose_name(store, ws.id, row.id, None)  # back to what the mentions settle on
    with store.session() as s:
        assert "keep_name" not in s.get(EntityMerge, row.id).evidence
    merge(store, ws.id, row.id, index)
    with store.session() as s:
        kept = s.get(Node, ids["Jeff Porcaro"])
        assert kept.title == "Jeff Porcaro" and "name" not in kept.data


def test_a_foreign_name_or_another_workspaces_record_is_refused(tmp_path):
    store, ws, index, ids = build_graph(tmp_path)
    row = _candidate(store, ws, ids, "Jeff Porcaro", "Porcaro")
    with pytest.raises(MergeError, match="not a name of this pair"):
        rv.choose_name(store, ws.id, row.id, "Acme Inc")
    other = store.create_workspace("other")
    with pytest.raises(MergeError, match="no merge candidate"):
        rv.choose_name(store, other.id, row.id, "Porcaro")
    with store.session() as s:
        assert "keep_name" not in s.get(EntityMerge, row.id).evidence


def test_shared_documents_count_the_documents_that_mention_both(tmp_path):
    store, ws, index, ids = build_graph(tmp_path, mentions={"c1": ["Jeff Porcaro", "Porcaro", "Acme"],
                                                             "c2": ["Jeff Porcaro", "Acme Inc"]})
    both = _candidate(store, ws, ids, "Jeff Porcaro", "Porcaro")
    none = _candidate(store, ws, ids, "Acme Inc", "Acme")
    assert rv.shared_documents(store, ws.id, [both, none]) == {both.id: 1, none.id: 0}
    other = store.create_workspace("other")
    assert rv.shared_documents(store, other.id, [both]) == {both.id: 0}, "rows are read within the workspace"
