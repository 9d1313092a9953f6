"""The `merge` stage in a full offline build: the same company written two ways in two documents is merged by the
build, every mention kept; re-running the stages around it adds and changes nothing."""

from __future__ import annotations

from sqlmodel import select

from core.ids import IdScope
from core.models import Edge, EntityMerge, Node, StageRun
from core.pipeline.factory import make_context
from core.pipeline.runner import create_run, run_build
from core.pipeline.stages.extract import entity_id
from core.resolution.merge import list_merges, undo
from core.text import norm_key

DOCS = {
    "plant.md": "# Dorset plant\n\nAcme Corporation opened a cable plant in Dorchester in 2015. "
                "Acme Corporation employs three hundred people at the Dorchester site. "
                "Mira Tallis runs the plant for Acme Corporation.\n",
    "sale.md": "# The sale\n\nIn 2021 Acme Corporation Inc sold its cable business to Veltra Holdings. "
               "Veltra Holdings kept the Dorchester plant open after the sale.\n",
    "results.md": "# Results\n\nAcme Corporation reported record cable sales in 2019.\n",
    "porcaro.md": "# Drummers\n\nJeff Porcaro played drums with Toto. Steve Porcaro played keyboards with Toto. "
                  "The album was recorded by Porcaro in 1982.\n",
}


def rows(store, ws_id):
    with store.session() as s:
        nodes = sorted((n.id, n.kind, n.title, n.type, n.text, n.weight, repr(n.data))
                       for n in s.exec(select(Node).where(Node.workspace_id == ws_id, Node.kind == "entity")))
        edges = sorted((e.src, e.dst, e.kind, e.weight, repr(e.data))
                       for e in s.exec(select(Edge).where(Edge.workspace_id == ws_id)))
        merges = sorted((m.kept_id, m.merged_id, m.status, m.score)
                        for m in s.exec(select(EntityMerge).where(EntityMerge.workspace_id == ws_id)))
    return nodes, edges, merges


def write_docs(folder):
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_build_merges_a_company_named_two_ways_and_a_rerun_adds_nothing(tmp_path, build):
    settings, store, ws, embedder = build(tmp_path / "home", [write_docs(tmp_path / "docs")])
    kept, gone = entity_id(IdScope(ws.id), norm_key("Acme Corporation")), entity_id(IdScope(ws.id), norm_key("Acme Corporation Inc"))

    merged = list_merges(store, ws.id, "merged")
    assert [(m.kept_id, m.merged_id, m.auto) for m in merged] == [(kept, gone, True)]
    assert merged[0].evidence["match"] == "same_core" and merged[0].score >= settings.resolve.auto_merge
    with store.session() as s:
        assert s.get(Node, gone) is None
        node = s.get(Node, kept)
        chunk_docs = dict(s.exec(select(Node.id, Node.document_id).where(Node.workspace_id == ws.id,
                                                                         Node.kind == "chunk")).all())
        mentions = s.exec(select(Edge).where(Edge.workspace_id == ws.id, Edge.dst == kept,
                                             Edge.kind == "mentions")).all()
        stage = s.exec(select(StageRun).where(StageRun.workspace_id == ws.id, StageRun.stage == "merge")).one()
    assert node.data["aliases"] == {"Acme Corporation": 2, "Acme Corporation Inc": 1}
    assert node.title == "Acme Corporation" and node.type == "ORGANIZATION"
    assert len({chunk_docs[e.src] for e in mentions if e.src in chunk_docs}) == 3, "mentions of every document"
    assert any(e.data.get("merged_from") == gone for e in mentions), "moved mentions remember their entity"
    ctx = make_context(store, ws, settings, embedder=embedder)
    assert ctx.index.vectors("entity", [gone]) == {}
    with store.session() as s:
        layer0 = s.exec(select(Node.id).where(Node.workspace_id == ws.id, Node.kind == "entity",
                                              Node.layer == 0)).all()
    assert stage.counts["auto_merged"] == 1 and stage.counts["entities"] == len(layer0)
    # the surname alone matches two full names: a candidate for review (flagged), never merged by the build
    porcaro = [m for m in list_merges(store, ws.id, "candidate") if entity_id(IdScope(ws.id), "porcaro") in
               (m.kept_id, m.merged_id)]
    assert len(porcaro) == 2 and all(m.evidence["ambiguous"] for m in porcaro)

    # re-running resolve, embed and merge records nothing new, merges nothing twice and re-embeds nothing
    before, vecs = rows(store, ws.id), ctx.index.existing("entity")
    run = create_run(store, ws, settings)
    events = list(run_build(ctx, run.id, only=["resolve", "embed", "merge"]))
    assert events[-1].status == "done"
    assert rows(store, ws.id) == before and ctx.index.existing("entity") == vecs

    # a reviewer's undo brings the second spelling back, and the next build does not merge it again
    undo(store, ws.id, merged[0].id, ctx.index)
    with store.session() as s:
        assert s.get(Node, gone).title == "Acme Corporation Inc"
    run = create_run(store, ws, settings)
    assert list(run_build(ctx, run.id, only=["merge"]))[-1].status == "done"
    assert [m.status for m in list_merges(store, ws.id) if m.merged_id == gone] == ["undone"]
    with store.session() as s:
        assert s.get(Node, gone) is not None


def test_a_new_mention_of_a_merged_name_joins_the_entity_it_was_merged_into(tmp_path, build):
    from core.workspace import ingest_paths

    settings, store, ws, embedder = build(tmp_path / "home", [write_docs(tmp_path / "docs")])
    kept, gone = entity_id(IdScope(ws.id), norm_key("Acme Corporation")), entity_id(IdScope(ws.id), norm_key("Acme Corporation Inc"))
    assert [(m.kept_id, m.merged_id) for m in list_merges(store, ws.id, "merged")] == [(kept, gone)]
    with store.session() as s:
        weight = s.get(Node, kept).weight

    more = tmp_path / "more"
    more.mkdir()
    (more / "later.md").write_text("# Later\n\nAcme Corporation Inc opened an office in Kelmouth in 2023.\n",
                                   encoding="utf-8")
    assert ingest_paths(store, ws, [more], settings).added
    ctx = make_context(store, ws, settings, embedder=embedder)
    assert list(run_build(ctx, create_run(store, ws, settings).id))[-1].status == "done"
    with store.session() as s:
        assert s.get(Node, gone) is None, "the merged name did not come back as its own entity"
        node = s.get(Node, kept)
    assert node.weight == weight + 1
    assert node.data["aliases"]["Acme Corporation Inc"] == 2
