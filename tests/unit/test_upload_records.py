"""Issue 39 §3: an upload's duplicates and refusals are recorded (core/ingest/uploads.py) and listed again on a later
visit: what the store keeps, bounded, per workspace; a deleted workspace's records go with it."""

from __future__ import annotations

from core.config import Settings
from core.ingest import Refusals
from core.ingest.uploads import KEEP, MAX_DUPLICATES, recent_uploads, record_upload
from core.store import Store
from core.workspace import ingest_uploads
from tests.stores import configure


def test_an_upload_with_a_duplicate_and_a_refusal_is_kept(tmp_path):
    settings = Settings()
    settings.storage.home = tmp_path / "home"
    configure(settings)
    store = Store(settings.storage.db_url)
    ws, other = store.create_workspace("w"), store.create_workspace("other")
    first = ingest_uploads(store, ws, [("a.txt", b"Anna Benson married Kris Benson.")], settings)
    assert first.added == ["a"] and not first.same_as
    report = ingest_uploads(store, ws, [("copy of a.txt", b"Anna Benson married Kris Benson."),
                                        ("new.txt", b"Kris Benson pitched."), ("x.bin", b"MZ\x90\x00")], settings)
    [stored] = [d.id for d in store.documents(ws.id) if d.title == "a"]
    assert report.same_as == [("copy of a.txt", "copy of a", stored)]
    record_upload(store, ws.id, "alice", len(report.added), report.same_as, report.refusals)

    [u] = recent_uploads(store, store.require_workspace("w"))  # a later visit: read back from the store
    assert (u.user, u.added, u.n_duplicates, u.duplicates) == ("alice", 1, 1, [("copy of a.txt", "copy of a", stored)])
    assert u.refusals == report.refusals and u.refusals.total == 1
    assert u.summary() == "1 document(s) added, 1 already present, 1 refused"
    assert recent_uploads(store, other) == [], "per workspace"

    store.delete_workspace(store.require_workspace("w"))
    again = store.create_workspace("w")
    assert recent_uploads(store, again) == []


def test_records_are_bounded(tmp_path):
    store = Store(tmp_path / "t.db")
    ws = store.create_workspace("w")
    refused = Refusals()
    for i in range(5000):
        refused.add(f"f{i}.bin", "unsupported type '.bin'")
    dups = [(f"d{i}.txt", f"d{i}", f"id{i}") for i in range(1000)]
    for k in range(KEEP + 3):
        record_upload(store, ws.id, "", k, dups, refused)
    got = recent_uploads(store, ws, limit=100)
    assert len(got) == KEEP and got[0].added == KEEP + 2, "the latest first, the oldest dropped"
    assert got[0].n_duplicates == 1000 and len(got[0].duplicates) == MAX_DUPLICATES
    assert got[0].refusals.total == 5000 and len(got[0].refusals) == 3
