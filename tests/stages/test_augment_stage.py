"""The augment stage (NodeRAG, core/pipeline/stages/augment.py) on the built sample: the seven node kinds of Table 4,
edges joining the kinds the paper joins, NodeRAG's own Leiden communities over the heterograph (a partition of the
N, R, S, A nodes they cover, each connected, each with a report and its high-level elements), matches inside one
of them, semantic edges between embedded kinds only, one vector per attribute and high-level node, the stage's
counts, and re-runs that change nothing."""

from __future__ import annotations

from collections import Counter, defaultdict

from sqlmodel import delete, select

from core.algorithms import noderag
from core.models import Community, Edge, Node
from core.pipeline.factory import make_context
from core.pipeline.stages.augment import augment_stage

KINDS = {"chunk", "statement", "entity", "relationship", "attribute", "high_level", "overview"}
EMBEDDED = {"chunk", "statement", "attribute", "high_level"}


def graph(built):
    with built.store.session() as s:
        kind = dict(s.exec(select(Node.id, Node.kind).where(Node.workspace_id == built.ws.id)).all())
        data = dict(s.exec(select(Node.id, Node.data).where(Node.workspace_id == built.ws.id)).all())
        edges = s.exec(select(Edge).where(Edge.workspace_id == built.ws.id)).all()
    return kind, data, edges


def snapshot(built):
    _, _, edges = graph(built)
    with built.store.session() as s:
        nodes = sorted(s.exec(select(Node.id, Node.kind, Node.title, Node.text).where(
            Node.workspace_id == built.ws.id)).all())
        comms = sorted((c.id, c.method, c.level, c.size, c.title, c.summary, str(c.report), str(sorted(c.data.items())))
                       for c in s.exec(select(Community).where(Community.workspace_id == built.ws.id)))
    return nodes, comms, sorted((e.src, e.dst, e.kind, e.weight, str(sorted((e.data or {}).items()))) for e in edges)


def community_ids(built) -> set[str]:
    """NodeRAG's own communities (Leiden over the heterograph), those that get high-level elements."""
    with built.store.session() as s:
        return set(s.exec(select(Community.id).where(Community.workspace_id == built.ws.id,
                                                     Community.method == "noderag")))


def stage_counts(built) -> dict:
    run = built.store.latest_run(built.ws.id)
    return next(r for r in built.store.stage_runs(run.id) if r.stage == "augment").counts


def rerun(built) -> dict:
    ctx = make_context(built.store, built.ws, built.settings, embedder=built.embedder)
    last = None
    for p in augment_stage(ctx):
        last = p
    return last.counts


def test_all_seven_node_kinds_are_present(sample_built):
    kind, _, _ = graph(sample_built)
    assert KINDS <= set(kind.values())


def test_edges_join_the_kinds_of_table_4(sample_built):
    kind, data, edges = graph(sample_built)
    comms = community_ids(sample_built)
    by_kind = defaultdict(list)
    for e in edges:
        by_kind[e.kind].append(e)
    attr_of = Counter(e.dst for e in by_kind["has_attribute"])
    for e in by_kind["has_attribute"]:
        assert (kind[e.src], kind[e.dst]) == ("entity", "attribute")
        assert data[e.dst]["entity_id"] == e.src
    assert set(attr_of) == {i for i, k in kind.items() if k == "attribute"} and set(attr_of.values()) == {1}
    over = [e for e in by_kind["has_overview"]]
    for e in over:
        assert (kind[e.src], kind[e.dst]) == ("high_level", "overview")
    assert sorted(e.src for e in over) == sorted(i for i, k in kind.items() if k == "high_level")
    assert sorted(e.dst for e in over) == sorted(i for i, k in kind.items() if k == "overview")
    prov = [e for e in by_kind["derived_from"] if kind.get(e.src) == "high_level"]
    assert len(prov) == len(over)
    for e in prov:
        assert e.dst in comms and data[e.src]["community_id"] == e.dst
    for e in by_kind["semantic"]:
        assert kind[e.src] in EMBEDDED and kind[e.dst] in EMBEDDED
        assert e.data["by"] == "hnsw" and e.weight == 1.0
    assert by_kind["semantic"] and by_kind["matches"]


def test_matches_link_a_high_level_element_to_its_own_community(sample_built):
    kind, data, edges = graph(sample_built)
    comms = community_ids(sample_built)
    member = {e.src: e.dst for e in edges if e.kind == "in_community" and e.dst in comms}
    h_comm = {i: d["community_id"] for i, d in data.items() if kind[i] == "high_level"}
    matches = [e for e in edges if e.kind == "matches"]
    for e in matches:
        assert kind[e.src] == "high_level" and kind[e.dst] in {"statement", "attribute", "high_level"}
        want = h_comm[e.src]
        assert (h_comm[e.dst] if kind[e.dst] == "high_level" else member.get(e.dst)) == want
    assert {kind[e.dst] for e in matches} >= {"statement", "attribute"}


def test_noderag_communities_partition_the_heterograph_nodes_they_cover(sample_built):
    kind, data, edges = graph(sample_built)
    with sample_built.store.session() as s:
        rows = {c.id: c for c in s.exec(select(Community).where(Community.workspace_id == sample_built.ws.id,
                                                                 Community.method == "noderag"))}
        layer = dict(s.exec(select(Node.id, Node.layer).where(Node.workspace_id == sample_built.ws.id)).all())
    assert len(rows) >= 2
    members = defaultdict(list)
    for e in edges:
        if e.kind == "in_community" and e.dst in rows:
            members[e.dst].append(e.src)
    covered = [m for ms in members.values() for m in ms]
    assert len(covered) == len(set(covered)), "a node lies in one noderag community at most"
    assert {kind[m] for m in covered} == {"entity", "relationship", "statement", "attribute"}
    assert all(layer[m] == 0 for m in covered if kind[m] == "entity")  # HiRAG summary entities are not NodeRAG's
    # each community is connected by the heterograph edges Leiden saw (Leiden guarantees connected communities)
    allowed = set(noderag.COMMUNITY_EDGES)
    links = defaultdict(set)
    for e in edges:
        if (e.kind, kind.get(e.src), kind.get(e.dst)) in allowed:
            links[e.src].add(e.dst)
            links[e.dst].add(e.src)
    for cid, ms in members.items():
        c = rows[cid]
        assert c.level == 0 and c.parent_id is None and c.size == len(ms) >= sample_built.settings.noderag.min_community_size
        assert c.title and c.summary and c.report.get("summary") == c.summary  # the Hierarchy page shows it
        inside, seen, todo = set(ms), {ms[0]}, [ms[0]]
        while todo:
            for nb in links[todo.pop()] & inside - seen:
                seen.add(nb)
                todo.append(nb)
        assert seen == inside
    # every attribute, and every statement some heterograph edge reaches, lies in a community of >= 2 nodes
    assert {i for i, k in kind.items() if k == "attribute"} <= set(covered)
    assert {i for i, k in kind.items() if k == "statement" and links[i]} <= set(covered)


def test_high_level_elements_are_made_per_noderag_community(sample_built):
    kind, data, edges = graph(sample_built)
    with sample_built.store.session() as s:
        rows = {c.id: c for c in s.exec(select(Community).where(Community.workspace_id == sample_built.ws.id,
                                                                 Community.method == "noderag"))}
    per_comm = Counter(d["community_id"] for i, d in data.items() if kind[i] == "high_level")
    assert set(per_comm) <= set(rows)
    for cid, c in rows.items():
        findings = c.report.get("findings") or []
        assert per_comm[cid] == (len(findings) or 1)
    heads = {(d["community_id"], d["finding"]) for i, d in data.items() if kind[i] == "high_level"}
    assert len(heads) == sum(per_comm.values())


def test_semantic_edges_never_duplicate_a_link_they_boost(sample_built):
    """An HNSW pair already joined by a heterograph edge raises that edge's weight; a pair joined only by an edge
    NodeRAG does not define (a chunk's `next`) gets its own semantic edge, and such an edge is never boosted."""
    kind, _, edges = graph(sample_built)
    paper = set(noderag.HETEROGRAPH_EDGES)
    other = {frozenset((e.src, e.dst)) for e in edges
             if e.kind != "semantic" and (e.kind, kind.get(e.src), kind.get(e.dst)) in paper}
    sem = [frozenset((e.src, e.dst)) for e in edges if e.kind == "semantic"]
    assert len(sem) == len(set(sem))
    assert not set(sem) & other
    boosted = [e for e in edges if (e.data or {}).get("hnsw")]
    assert boosted, "some HNSW neighbours (a statement and its chunk) are already linked"
    for e in boosted:
        assert (e.kind, kind[e.src], kind[e.dst]) in paper and e.weight >= 2.0


def test_one_vector_per_attribute_and_high_level_node_only(sample_built):
    from core.pipeline.factory import open_index

    kind, _, _ = graph(sample_built)
    index = open_index(sample_built.settings, sample_built.ws.name, sample_built.embedder.name)
    for k in ("attribute", "high_level"):
        ids, vecs = index.all_vectors(k)
        assert sorted(ids) == sorted(i for i, kk in kind.items() if kk == k)
        assert vecs.shape == (len(ids), sample_built.embedder.dim)
    stored = set(index.all_vectors("attribute")[0]) | set(index.all_vectors("high_level")[0])
    assert not {i for i, k in kind.items() if k in ("entity", "overview", "relationship")} & stored


def test_counts_describe_the_graph(sample_built):
    kind, _, edges = graph(sample_built)
    counts = stage_counts(sample_built)
    per_kind = Counter(kind.values())
    assert counts["nodes"] == {k: per_kind[k] for k in ("attribute", "high_level", "overview")}
    assert counts["matches"] == sum(e.kind == "matches" for e in edges)
    assert counts["semantic_edges"] == sum(e.kind == "semantic" for e in edges)
    assert counts["boosted_edges"] == sum(bool((e.data or {}).get("hnsw")) for e in edges)
    assert counts["important_entities"] == per_kind["attribute"] > 0
    assert counts["k_core_k"] >= 1
    assert counts["communities"] == len(community_ids(sample_built)) > 0


def test_rerun_and_resume_change_nothing(sample_built):
    before = snapshot(sample_built)
    counts = stage_counts(sample_built)
    assert rerun(sample_built) == counts
    assert snapshot(sample_built) == before
    # killed while summarizing: some attribute nodes and their edges were never written, nor any attribute vector
    # (vectors are made after the summaries; the same texts embedded in the same batch give the same vectors)
    kind, _, _ = graph(sample_built)
    lost = sorted(i for i, k in kind.items() if k == "attribute")[:5]
    with sample_built.store.session() as s:
        s.exec(delete(Edge).where(Edge.src.in_(lost) | Edge.dst.in_(lost)))
        s.exec(delete(Node).where(Node.id.in_(lost)))
        s.commit()
    ctx = make_context(sample_built.store, sample_built.ws, sample_built.settings, embedder=sample_built.embedder)
    ctx.index.delete("attribute", list(ctx.index.existing("attribute")))
    assert rerun(sample_built) == counts
    assert snapshot(sample_built) == before
