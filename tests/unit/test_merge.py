"""Entity resolution (core/resolution/merge.py) on a hand-built graph: candidates by name and by vector, merges that
move every mention and can be undone exactly, rejections remembered, conservative auto-merging."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from sqlmodel import select

from core.config import Settings
from core.ids import IdScope
from core.index.vectors import VectorIndex
from core.models import Edge, EntityMerge, Node
from core.pipeline.stages.merge import merge_stage
from core.resolution.merge import (
    MergeError,
    find_candidates,
    list_merges,
    merge,
    merged_into,
    record_candidates,
    reject,
    undo,
)
from core.resolution.names import name_similarity, name_tokens
from core.store import Store, content_id
from core.text import norm_key

DIM = 16
# name -> (type, mentions); each entity gets its own basis vector except the Kelmouth pair, nearly identical
ENTITIES = {
    "Acme": ("CONCEPT", 1),
    "Acme Inc": ("ORGANIZATION", 3),
    "Jeff Porcaro": ("PERSON", 2),
    "Porcaro": ("PERSON", 1),
    "Kelmouth Harbour": ("LOCATION", 2),
    "Port of Kelmouth": ("LOCATION", 1),
    "Saint Bride Church": ("LOCATION", 1),
    "Arden Orchards": ("ORGANIZATION", 1),
}


def eid(ws_id: int, name: str) -> str:
    return IdScope(ws_id).id("entity", norm_key(name))


class FakeEmbedder:
    """Deterministic 16-d vectors from a text hash (the merge stage re-embeds kept entities)."""

    name, dim = "fake", DIM

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.stack([np.random.default_rng(int(content_id(t)[:8], 16)).normal(size=DIM) for t in texts])
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def build_graph(tmp_path, entities=ENTITIES, mentions=None):
    """Two chunks of two documents, entities with aliases/types/descriptions, statements, relationships."""
    store = Store(tmp_path / "t.db")
    ws = store.create_workspace("t")
    index = VectorIndex(tmp_path / "vec", "fake")
    nodes, edges = [], []

    def edge(src, dst, kind, weight=1.0):
        edges.append(Edge(workspace_id=ws.id, src=src, dst=dst, kind=kind, weight=weight, data={}))

    ids = {name: eid(ws.id, name) for name in entities}
    for name, (typ, w) in entities.items():
        nodes.append(Node(id=ids[name], workspace_id=ws.id, kind="entity", key=norm_key(name), title=name,
                          text=f"{name} appears here.", type=typ, weight=float(w),
                          data={"aliases": {name: w}, "types": {typ: w}, "descriptions": [f"{name} appears here."]}))
    for c in ("c1", "c2"):
        nodes.append(Node(id=c, workspace_id=ws.id, kind="chunk", text=c, document_id=f"d{c[-1]}", ord=0))
        edge(c, f"d{c[-1]}", "derived_from")
    mentions = mentions or {"c1": list(entities), "c2": [n for n in entities if n != "Acme"]}
    for c, names in mentions.items():
        for name in names:
            edge(c, ids[name], "mentions")
    # a statement naming two entities, and the relationship (fact) between them
    if "Acme Inc" in ids and "Jeff Porcaro" in ids:
        nodes.append(Node(id="s1", workspace_id=ws.id, kind="statement", text="Acme Inc hired Jeff Porcaro.",
                          document_id="d1", ord=0))
        edge("s1", "c1", "derived_from")
        edge("s1", ids["Acme Inc"], "mentions")
        edge("s1", ids["Jeff Porcaro"], "mentions")
        nodes.append(Node(id="r1", workspace_id=ws.id, kind="relationship", title="Acme Inc — hired — Jeff Porcaro",
                          type="hired", data={"source": ids["Acme Inc"], "target": ids["Jeff Porcaro"]}))
        edge("r1", ids["Acme Inc"], "subject")
        edge("r1", ids["Jeff Porcaro"], "object")
        edge("r1", "c1", "derived_from")
    with store.session() as s:
        s.add_all(nodes + edges)
        s.commit()
    vecs = np.eye(DIM, dtype=np.float32)[: len(entities)]
    names = list(entities)
    if "Port of Kelmouth" in names:
        a, b = names.index("Kelmouth Harbour"), names.index("Port of Kelmouth")
        v = vecs[a] + 0.05 * vecs[b]
        vecs[b] = v / np.linalg.norm(v)
    index.upsert("entity", [ids[n] for n in names], vecs, [{"type": entities[n][0], "layer": 0} for n in names])
    return store, ws, index, ids


def graph_state(store, ws_id):
    with store.session() as s:
        nodes = sorted(tuple(sorted((k, repr(v)) for k, v in n.model_dump().items()))
                       for n in s.exec(select(Node).where(Node.workspace_id == ws_id)))
        edges = sorted((e.src, e.dst, e.kind, e.weight, repr(sorted(e.data.items())))
                       for e in s.exec(select(Edge).where(Edge.workspace_id == ws_id)))
    return nodes, edges


def pairs(cands):
    return {frozenset((c.kept_id, c.merged_id)): c for c in cands}


def test_name_similarity_is_token_aware():
    def sim(a, b):
        return name_similarity(name_tokens(norm_key(a)), name_tokens(norm_key(b)))

    assert sim("Acme", "Acme Inc.") == (1.0, "same_core")
    assert sim("Acme Corporation", "ACME Corporation Inc")[1] == "same_core"
    assert sim("Professor Daniel Osei", "Daniel Osei")[1] == "same_core"
    assert sim("Mayor of Port Halden", "Port Halden")[1] == "contained", "the mayor is not the town"
    assert sim("J. Smith", "John Smith") == (pytest.approx(0.9), "initials")
    assert sim("Porcaro", "Jeff Porcaro")[1] == "contained" and sim("Porcaro", "Jeff Porcaro")[0] >= 0.85
    assert sim("Jeff Porcaro", "Jeff Porcarro")[1] == "spelling"
    assert sim("Henry VII", "Henry VIII")[0] < 0.85, "numerals are not spelling variants"
    assert sim("John Smith", "Jane Smith")[0] < 0.85
    assert sim("Saint Bride Church", "Arden Orchards")[0] == 0.0


def test_candidates_by_name_and_by_vector_and_none_for_unrelated(tmp_path):
    store, ws, index, ids = build_graph(tmp_path)
    found = pairs(find_candidates(store, ws.id, index, Settings().resolve))
    acme = found[frozenset((ids["Acme"], ids["Acme Inc"]))]
    assert acme.kept_id == ids["Acme Inc"], "the entity with more mentions is kept"
    assert acme.evidence["match"] == "same_core" and not acme.evidence["auto_eligible"], "types differ"
    porcaro = found[frozenset((ids["Porcaro"], ids["Jeff Porcaro"]))]
    assert porcaro.kept_id == ids["Jeff Porcaro"] and porcaro.evidence["match"] == "contained"
    kel = found[frozenset((ids["Kelmouth Harbour"], ids["Port of Kelmouth"]))]
    assert kel.evidence["name_similarity"] < 0.85 and kel.evidence["cosine"] > 0.99, "found by its vector"
    assert frozenset((ids["Saint Bride Church"], ids["Arden Orchards"])) not in found
    assert len(found) == 3, {tuple(c.evidence["titles"]) for c in found.values()}
    assert all(0.0 <= c.score <= 1.0 for c in found.values())
    # without the vector index only name evidence is left
    assert set(pairs(find_candidates(store, ws.id, None, Settings().resolve))) == {
        frozenset((ids["Acme"], ids["Acme Inc"])), frozenset((ids["Porcaro"], ids["Jeff Porcaro"]))}


def test_merge_moves_every_mention_and_undo_restores_the_graph_exactly(tmp_path):
    store, ws, index, ids = build_graph(tmp_path)
    before = graph_state(store, ws.id)
    vec_before = index.vectors("entity", [ids["Jeff Porcaro"]])[ids["Jeff Porcaro"]]
    cand = pairs(find_candidates(store, ws.id, index, Settings().resolve))[frozenset((ids["Porcaro"],
                                                                                      ids["Jeff Porcaro"]))]
    # merge the other way round too: kept = Jeff Porcaro is the default, so build the reverse candidate by hand
    (mid,) = record_candidates(store, ws.id, [cand])
    kept, gone = ids["Jeff Porcaro"], ids["Porcaro"]
    with store.session() as s:
        gone_edges = {(e.src, e.dst, e.kind): e.weight
                      for e in s.exec(select(Edge).where((Edge.src == gone) | (Edge.dst == gone)))}
    affected = merge(store, ws.id, mid, index)
    assert {kept, gone, "c1", "c2"} <= set(affected)
    with store.session() as s:
        assert s.get(Node, gone) is None
        node = s.get(Node, kept)
        on_kept = {(e.src, e.dst, e.kind): e for e in s.exec(select(Edge).where((Edge.src == kept) |
                                                                                 (Edge.dst == kept)))}
        assert not list(s.exec(select(Edge).where((Edge.src == gone) | (Edge.dst == gone))))
        row = s.get(EntityMerge, mid)
    # both chunks mentioned both names: the moved mention adds its weight to the existing edge and says from whom
    for (src, _, kind), w in gone_edges.items():
        e = on_kept[(src, kept, kind)]
        assert e.weight == w + 1.0 and e.data["absorbed"] == {gone: w}
    assert node.weight == 3.0 and node.data["aliases"] == {"Jeff Porcaro": 2, "Porcaro": 1}
    assert node.data["merged"] == [gone] and "Porcaro appears here." in node.data["descriptions"]
    assert row.status == "merged" and row.snapshot["merged"]["id"] == gone
    assert len(row.snapshot["edges"]) == len(gone_edges)
    assert index.vectors("entity", [gone]) == {}, "the merged entity's vector is gone"
    with pytest.raises(MergeError):
        merge(store, ws.id, mid, index)

    undo(store, ws.id, mid, index)
    assert graph_state(store, ws.id) == before
    assert set(index.vectors("entity", [gone])) == {gone}, "the vector is back"
    assert np.allclose(index.vectors("entity", [kept])[kept], vec_before)
    assert list_merges(store, ws.id, "undone")[0].id == mid


def test_moved_edges_keep_their_provenance_and_relationships_follow(tmp_path):
    store, ws, index, ids = build_graph(tmp_path, mentions={"c1": ["Acme", "Jeff Porcaro"], "c2": ["Acme Inc"]})
    before = graph_state(store, ws.id)
    cand = pairs(find_candidates(store, ws.id, index, Settings().resolve))[frozenset((ids["Acme"], ids["Acme Inc"]))]
    # the reverse direction: keep "Acme", merge "Acme Inc" (the fact's subject) into it
    cand.kept_id, cand.merged_id = ids["Acme"], ids["Acme Inc"]
    (mid,) = record_candidates(store, ws.id, [cand])
    merge(store, ws.id, mid, index)
    kept, gone = ids["Acme"], ids["Acme Inc"]
    with store.session() as s:
        moved = {(e.src, e.kind): e for e in s.exec(select(Edge).where(Edge.dst == kept))}
        rel = s.get(Node, "r1")
    assert moved[("c2", "mentions")].data == {"merged_from": gone}, "a moved mention says where it came from"
    assert moved[("s1", "mentions")].data == {"merged_from": gone}
    assert moved[("r1", "subject")].data == {"merged_from": gone}, "the fact now has the kept entity as subject"
    assert moved[("c1", "mentions")].data == {}, "the kept entity's own mention is untouched"
    assert rel.data["source"] == kept and rel.data["target"] == ids["Jeff Porcaro"]
    undo(store, ws.id, mid, index)
    assert graph_state(store, ws.id) == before
    with pytest.raises(MergeError):
        undo(store, ws.id, mid, index)


def test_an_absorbed_mention_keeps_its_subject_mark_and_undo_removes_it(tmp_path):
    """A chunk whose document is about the merged entity (the extract stage's subject mark on its mention) is about
    the kept one after the merge, also when the kept entity's own mention absorbs that edge: the mark decides whether
    the document's statements are embedded with its title (core/index/embedding.py), so losing it changed their
    vectors between a build and its resume."""
    store, ws, index, ids = build_graph(tmp_path)
    kept, gone = ids["Jeff Porcaro"], ids["Porcaro"]
    with store.session() as s:
        e = s.exec(select(Edge).where(Edge.src == "c1", Edge.dst == gone, Edge.kind == "mentions")).one()
        e.data = {"subject": True}
        s.add(e)
        s.commit()
    before = graph_state(store, ws.id)
    cand = pairs(find_candidates(store, ws.id, index, Settings().resolve))[frozenset((kept, gone))]
    cand.kept_id, cand.merged_id = kept, gone
    (mid,) = record_candidates(store, ws.id, [cand])
    merge(store, ws.id, mid, index)
    with store.session() as s:
        hit = s.exec(select(Edge).where(Edge.src == "c1", Edge.dst == kept, Edge.kind == "mentions")).one()
    assert hit.data.get("subject") is True and hit.data["absorbed"] == {gone: 1.0}
    undo(store, ws.id, mid, index)
    assert graph_state(store, ws.id) == before


def ctx_for(store, ws, index, **resolve):
    settings = Settings()
    for k, v in resolve.items():
        setattr(settings.resolve, k, v)
    return SimpleNamespace(store=store, ws=ws, index=index, settings=settings, embedder=FakeEmbedder(),
                           should_stop=lambda: False)


def test_stage_records_candidates_and_a_rejection_is_remembered(tmp_path):
    store, ws, index, ids = build_graph(tmp_path)
    counts = list(merge_stage(ctx_for(store, ws, index)))[-1].counts
    assert counts == {"candidates": 3, "auto_merged": 0, "entities": len(ENTITIES)}
    rows = list_merges(store, ws.id)
    assert all(r.status == "candidate" and not r.auto for r in rows)
    acme = next(r for r in rows if {r.kept_id, r.merged_id} == {ids["Acme"], ids["Acme Inc"]})
    reject(store, ws.id, acme.id)
    # a second pass still sees the pair but neither proposes it again nor merges anything
    assert frozenset((ids["Acme"], ids["Acme Inc"])) in pairs(find_candidates(store, ws.id, index, Settings()))
    counts = list(merge_stage(ctx_for(store, ws, index, auto_merge=0.0)))[-1].counts
    assert counts["auto_merged"] == 0 and counts["candidates"] == 2
    after = list_merges(store, ws.id)
    assert len(after) == 3 and next(r for r in after if r.id == acme.id).status == "rejected"
    with pytest.raises(MergeError):
        reject(store, ws.id, 10_000)


def test_auto_merge_is_conservative_and_runs_once(tmp_path):
    ents = {"Acme Corporation": ("ORGANIZATION", 3), "ACME Corporation Inc": ("ORGANIZATION", 1),
            "Jeff Porcaro": ("PERSON", 2), "Steve Porcaro": ("PERSON", 2), "Porcaro": ("PERSON", 1),
            "Ada Finnegan": ("PERSON", 2), "Finnegan": ("PERSON", 1)}
    store, ws, index, ids = build_graph(tmp_path, entities=ents,
                                        mentions={"c1": list(ents), "c2": ["ACME Corporation Inc", "Porcaro"]})
    # even with the threshold at 0, a surname alone matching two full names is never merged by the build,
    # nor one matching a single full name: containment is for a reviewer to confirm
    counts = list(merge_stage(ctx_for(store, ws, index, auto_merge=0.0)))[-1].counts
    assert counts["auto_merged"] == 1 and counts["entities"] == 6
    (ada,) = [r for r in list_merges(store, ws.id) if ids["Finnegan"] in (r.kept_id, r.merged_id)]
    assert ada.status == "candidate" and ada.evidence["match"] == "contained" and not ada.evidence["ambiguous"]
    (done,) = list_merges(store, ws.id, "merged")
    assert done.auto and (done.kept_id, done.merged_id) == (ids["Acme Corporation"], ids["ACME Corporation Inc"])
    porcaro = [r for r in list_merges(store, ws.id, "candidate") if ids["Porcaro"] in (r.kept_id, r.merged_id)]
    assert len(porcaro) == 2 and all(r.evidence["ambiguous"] for r in porcaro)
    with store.session() as s:
        node = s.get(Node, ids["Acme Corporation"])
        c2 = s.exec(select(Edge).where(Edge.src == "c2", Edge.dst == ids["Acme Corporation"])).one()
    assert node.title == "Acme Corporation" and node.weight == 4.0 and c2.data == {"merged_from": done.merged_id}
    # the kept entity was re-embedded from its settled text; a second run changes nothing
    state, n_rows = graph_state(store, ws.id), len(list_merges(store, ws.id))
    vecs = index.existing("entity")
    counts = list(merge_stage(ctx_for(store, ws, index, auto_merge=0.0)))[-1].counts
    assert counts["auto_merged"] == 0
    assert graph_state(store, ws.id) == state and len(list_merges(store, ws.id)) == n_rows
    assert index.existing("entity") == vecs


def test_merges_into_one_entity_undo_in_reverse_order(tmp_path):
    ents = {"Acme Corporation": ("ORGANIZATION", 3), "ACME Corporation Inc": ("ORGANIZATION", 1),
            "Acme Corp.": ("ORGANIZATION", 1), "Arden Orchards": ("ORGANIZATION", 1)}
    store, ws, index, ids = build_graph(tmp_path, entities=ents)
    before = graph_state(store, ws.id)
    stages = list(merge_stage(ctx_for(store, ws, index)))
    assert stages[-1].counts == {"candidates": 0, "auto_merged": 2, "entities": 2}
    assert sum("merged 2 entities" in p.message for p in stages) == 1, "both merged in one round"
    first, second = sorted(list_merges(store, ws.id, "merged"), key=lambda m: m.id)
    assert first.kept_id == second.kept_id == ids["Acme Corporation"]
    assert merged_into(store, ws.id) == {first.merged_id: first.kept_id, second.merged_id: first.kept_id}
    with pytest.raises(MergeError):
        undo(store, ws.id, first.id, index)  # the kept entity absorbed the second one since
    undo(store, ws.id, second.id, index)
    undo(store, ws.id, first.id, index)
    assert graph_state(store, ws.id) == before and merged_into(store, ws.id) == {}
    assert set(index.existing("entity")) == set(ids.values())
