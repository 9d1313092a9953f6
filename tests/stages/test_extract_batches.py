"""The extract stage writes many chunks per transaction: the graph must be exactly what writing the chunks one at a
time gives (entities and relationships met again, in the same batch or a later one, merged in the same order)."""

from __future__ import annotations

import json

from sqlmodel import select

from core.backends.offline import OfflineBackend
from core.config import ExtractSettings
from core.models import Checkpoint, Edge, Node
from core.pipeline.factory import make_context
from core.pipeline.mentions import refold
from core.pipeline.runner import create_run, run_build
from core.pipeline.stages.extract import write_extractions
from core.store import Store
from core.workspace import ingest_paths
from tests.conftest import SAMPLE_DIR


def _chunked(home, settings_factory, embedder):
    settings = settings_factory(home)
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("w")
    ingest_paths(store, ws, [SAMPLE_DIR], settings)
    ctx = make_context(store, ws, settings, embedder=embedder)
    list(run_build(ctx, create_run(store, ws, settings).id, only=["chunk"]))
    return store, ws


def _rows(store, ws_id):
    with store.session() as s:
        nodes = [(n.id, n.kind, n.key, n.title, n.text, n.type, n.layer, n.weight, n.document_id, n.ord,
                  json.dumps(n.data, sort_keys=True)) for n in s.exec(select(Node).where(Node.workspace_id == ws_id,
                                                                                  Node.kind != "chunk"))]
        edges = [(e.id, e.src, e.dst, e.kind, e.weight) for e in s.exec(select(Edge).where(
            Edge.workspace_id == ws_id, Edge.kind != "next", Edge.kind != "derived_from"))]
        edges += [(e.src, e.dst) for e in s.exec(select(Edge).where(Edge.workspace_id == ws_id,
                                                                     Edge.kind == "derived_from"))]
        cps = sorted(s.exec(select(Checkpoint.unit).where(Checkpoint.stage == "extract")))
    return sorted(nodes), sorted(edges, key=str), cps


def test_batched_writes_equal_chunk_by_chunk_writes(tmp_path, make_settings, embedder):
    one_store, one_ws = _chunked(tmp_path / "one", make_settings, embedder)
    batch_store, batch_ws = _chunked(tmp_path / "batch", make_settings, embedder)
    with one_store.session() as s:
        chunks = s.exec(select(Node.id, Node.text, Node.document_id).where(Node.kind == "chunk")
                        .order_by(Node.document_id, Node.ord)).all()
    backend = OfflineBackend()
    types = ExtractSettings().entity_types
    items = [(cid, doc, backend.extract(text, types)) for cid, text, doc in chunks]
    assert len(items) > 20

    for item in items:
        write_extractions(one_store, one_ws.id, [item])
    # uneven batches, so names recur both inside a batch and across batches
    for a, b in ((0, 7), (7, 8), (8, 30), (30, len(items))):
        write_extractions(batch_store, batch_ws.id, items[a:b])

    one, batched = _rows(one_store, one_ws.id), _rows(batch_store, batch_ws.id)
    assert one[0] == batched[0]
    assert one[1] == batched[1]
    assert one[2] == batched[2] == sorted(c for c, _, _ in items)
    entities = [n for n in one[0] if n[1] == "entity"]
    assert any(n[7] > 1 for n in entities), "some entity was met in several chunks"


def test_a_titled_rows_mention_of_its_subject_is_marked(tmp_path, make_settings, embedder, tiny_jsonl):
    """A corpus row is about the entity it is titled after: that mention carries the subject flag; the same entity
    named in another row's chunk is an ordinary mention. Every mention weighs 1, the subject's too (no paper
    weights a mention by a title field)."""
    settings = make_settings(tmp_path)
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("w")
    ingest_paths(store, ws, [tiny_jsonl], settings)
    ctx = make_context(store, ws, settings, embedder=embedder)
    list(run_build(ctx, create_run(store, ws, settings).id, only=["chunk", "extract"]))
    with store.session() as s:
        title_of = {n.id: n.title for n in s.exec(select(Node).where(Node.workspace_id == ws.id,
                                                                    Node.kind == "entity"))}
        chunk_doc = {n.id: n.title for n in s.exec(select(Node).where(Node.workspace_id == ws.id,
                                                                     Node.kind == "chunk"))}
        mentions = [(e.src, e.dst, e.weight, e.data) for e in s.exec(select(Edge).where(
            Edge.workspace_id == ws.id, Edge.kind == "mentions")) if e.src in chunk_doc]
    assert {w for _, _, w, _ in mentions} == {1.0}
    subject = [(chunk_doc[c], title_of[e]) for c, e, w, d in mentions if (d or {}).get("subject") is True]
    assert sorted(t for t, _ in subject) == sorted(chunk_doc.values())  # one per row, each row's own subject
    assert all(t.startswith(name) for t, name in subject), subject
    lena = [(chunk_doc[c], w) for c, e, w, d in mentions if title_of[e] == "Lena Marsh"]
    assert ("Lena Marsh #1" in {t for t, _ in lena} or "Lena Marsh" in {t for t, _ in lena})
    assert any(t.startswith("Tidewater") for t, _ in lena), lena  # named in the bridge's row
    assert not any((d or {}).get("subject") for c, e, _, d in mentions
                   if title_of[e] == "Lena Marsh" and chunk_doc[c].startswith("Tidewater"))


def test_an_entity_is_described_first_by_the_row_about_it(tmp_path, make_settings, embedder, tiny_jsonl):
    """Lena Marsh is named in the Tidewater Bridge row and is the subject of her own row: her description leads with
    what her own row says, and folding her again from the stored edges (what adding documents does) agrees."""
    settings = make_settings(tmp_path)
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("w")
    ingest_paths(store, ws, [tiny_jsonl], settings)
    ctx = make_context(store, ws, settings, embedder=embedder)
    list(run_build(ctx, create_run(store, ws, settings).id, only=["chunk", "extract", "resolve"]))
    with store.session() as s:
        lena = next(n for n in s.exec(select(Node).where(Node.workspace_id == ws.id, Node.kind == "entity"))
                    if n.title == "Lena Marsh")
        chunk_title = {n.id: n.title for n in s.exec(select(Node).where(Node.workspace_id == ws.id,
                                                                        Node.kind == "chunk"))}
        said = {chunk_title[e.src].split(" #")[0]: (e.data or {}) for e in s.exec(select(Edge).where(
            Edge.workspace_id == ws.id, Edge.kind == "mentions", Edge.dst == lena.id)) if e.src in chunk_title}
        refolded = refold(s.connection(), ws.id, "entity", [lena.id])[lena.id]
    assert said["Lena Marsh"].get("subject") is True and not said["Tidewater Bridge"].get("subject")
    own, other = said["Lena Marsh"]["x"][0][2], said["Tidewater Bridge"]["x"][0][2]
    assert own and other and own != other
    assert lena.data["descriptions"][:2] == [own, other] and lena.data["about"] == 1
    assert lena.text.startswith(own)
    assert refolded is not None and refolded["data"]["descriptions"] == lena.data["descriptions"]
    assert refolded["text"] == lena.text
