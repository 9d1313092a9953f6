"""Adding documents by content hash: duplicates add nothing, but a duplicate's own id is kept as an alias."""

from __future__ import annotations

import json

from core.config import IngestSettings
from core.eval import document_ids, recall_at
from core.ingest import load_bytes
from core.ingest.add import add_documents
from core.store import Store


def _rows(*rows) -> bytes:
    return "\n".join(json.dumps(r) for r in rows).encode()


def test_identical_passages_are_stored_once_and_answer_to_every_id(tmp_path):
    store = Store(tmp_path / "s.db")
    ws = store.create_workspace("w")
    docs, _ = load_bytes("c.jsonl", _rows({"id": 1, "title": "A", "text": "same text"},
                                          {"id": 2, "title": "B", "text": "same text"},
                                          {"id": 3, "title": "C", "text": "other text"}), IngestSettings())
    res = add_documents(store, ws, docs)
    assert (len(res.added), len(res.duplicates)) == (2, 1)
    ids = document_ids(store, ws.id)
    assert sorted(map(sorted, ids.values())) == [["1", "2"], ["3"]]
    # a later upload of the same text under a third id adds no document, only the alias
    docs, _ = load_bytes("d.jsonl", _rows({"id": 4, "title": "D", "text": "same text"}), IngestSettings())
    assert not add_documents(store, ws, docs).added
    assert sorted(map(sorted, document_ids(store, ws.id).values())) == [["1", "2", "4"], ["3"]]
    assert store.counts(ws.id)["document"] == 2


def test_recall_counts_every_id_of_a_ranked_document():
    assert recall_at([{"1", "2"}, {"3"}], {"2", "3"}, 1) == 0.5
    assert recall_at([{"1", "2"}, {"3"}], {"2", "3"}, 2) == 1.0
    assert recall_at(["1", "3"], {"3"}, 1) == 0.0
