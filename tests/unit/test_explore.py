"""core/explore/explorer.py and explore_index.py: the Graph page's levels of detail over a small hand-built graph
whose every expected figure is worked out by hand below: aggregated community links, the super-node overview and
its cap, opening a community into exactly its children and members, filters, one-hop expansion, the derived file.

The graph (entities a-f of layer 0, summary entity s of layer 1; relationships as nodes with subject/object edges):

    r1 a-b, r2 a-b (a second relationship between a and b), r3 b-c, r4 c-d, r5 d-e, r6 a-e, r7 e-f;  a, b -> s
    leiden level 0:  C1 = {a, b, c}     C2 = {d, e, f}
    leiden level 1:  C1a = {a, b} (parent C1), C1b = {c} (parent C1), C2a = {d, e, f} (parent C2)
    attributed 0:    A1 = {a, b, c, d, e, f}
    doc1 -> chunk k1 mentions a, b;  doc2 -> chunk k2 mentions e

By hand: links (a,b) = 2 relationships, every other linked pair 1. Degrees (distinct linked entities): a 2, b 2,
c 2, d 2, e 3, f 1. Aggregated at leiden:0: C1-C2 = r4 (c-d) + r6 (a-e) = 2 (r1-r3 and r5, r7 stay inside).
At leiden:1: C1a-C1b = r3 = 1, C1b-C2a = r4 = 1, C1a-C2a = r6 = 1. At attributed:0 a single community: none.
"""

from __future__ import annotations

import html

import numpy as np
import pytest

from core.explore import explorer as X
from core.explore.details import describe_node, search_nodes
from core.explore.display import NodeFilter, display_graph
from core.explore.drawing import vis_payload
from core.explore.explore_index import compute_index, fingerprint, load_index
from core.models import Community, Document, Edge, Node
from core.store import Store

EVIL = "<img src=x onerror=alert(1)>"
RELS = {"r1": ("a", "b"), "r2": ("a", "b"), "r3": ("b", "c"), "r4": ("c", "d"), "r5": ("d", "e"), "r6": ("a", "e"),
        "r7": ("e", "f")}
COMMS = {  # id: (method, level, parent, members, title)
    "C1": ("leiden", 0, None, "abc", "Harbour <one>"), "C2": ("leiden", 0, None, "def", "Railway"),
    "C1a": ("leiden", 1, "C1", "ab", "Quay"), "C1b": ("leiden", 1, "C1", "c", "Crane"),
    "C2a": ("leiden", 1, "C2", "def", "Station"), "A1": ("attributed", 0, None, "abcdef", "Everything"),
    "W": ("wcc", 0, None, "abcdef", "component"),
}
WEIGHTS = {"a": 9, "b": 7, "c": 5, "d": 4, "e": 8, "f": 1, "s": 3}


@pytest.fixture
def g(tmp_path):
    store = Store(tmp_path / "strata.db")
    ws = store.create_workspace("w")
    with store.session() as s:
        for e, w in WEIGHTS.items():
            s.add(Node(id=e, workspace_id=ws.id, kind="entity", title=f"Entity {e}" if e != "c" else EVIL,
                       text=f"about {e} {EVIL}", type="PERSON", layer=1 if e == "s" else 0, weight=w))
        for r, (a, b) in RELS.items():
            s.add(Node(id=r, workspace_id=ws.id, kind="relationship", title=f"{a} knows {b}", type="knows"))
            s.add(Edge(workspace_id=ws.id, src=r, dst=a, kind="subject"))
            s.add(Edge(workspace_id=ws.id, src=r, dst=b, kind="object"))
        for e in "ab":
            s.add(Edge(workspace_id=ws.id, src=e, dst="s", kind="summarizes"))
        for cid, (m, lv, p, members, title) in COMMS.items():
            s.add(Community(id=cid, workspace_id=ws.id, method=m, level=lv, parent_id=p, size=len(members),
                            title=title, summary=f"summary of {title}"))
            for e in members:
                s.add(Edge(workspace_id=ws.id, src=e, dst=cid, kind="in_community"))
        for d, k, ents in (("doc1", "k1", "ab"), ("doc2", "k2", "e")):
            s.add(Document(id=d, workspace_id=ws.id, content_hash=d, title=f"Document {d}", filename=f"{d}.md",
                           mime="text/markdown", n_chars=10, text="text"))
            s.add(Node(id=k, workspace_id=ws.id, kind="chunk", title=d, text="chunk", document_id=d, ord=0))
            s.add(Edge(workspace_id=ws.id, src=k, dst=d, kind="derived_from"))
            for e in ents:
                s.add(Edge(workspace_id=ws.id, src=k, dst=e, kind="mentions"))
        ws.build_version = 1
        s.add(ws)
        s.commit()
    return store, ws.id


def _pairs(ix, group):
    a, b, n = ix.aggregated(group)
    return {frozenset((ix.comm_ids[x], ix.comm_ids[y])): int(w) for x, y, w in zip(a, b, n)}


def test_index_counts_links_memberships_and_aggregates_by_hand(g):
    store, ws = g
    ix = compute_index(store, ws)
    assert sorted(ix.comm_ids) == sorted(c for c in COMMS if c != "W")  # WCC rows are bookkeeping
    assert {c: int(ix.comm_size[ix.comm_index[c]]) for c in ix.comm_ids} == {
        "C1": 3, "C2": 3, "C1a": 2, "C1b": 1, "C2a": 3, "A1": 6}
    assert {ix.ent_ids[e] for e in ix.members(ix.comm_index["C1"])} == set("abc")
    links = {frozenset((ix.ent_ids[a], ix.ent_ids[b])): int(n) for a, b, n in zip(ix.link_a, ix.link_b, ix.link_n)}
    assert links == {frozenset("ab"): 2, frozenset("bc"): 1, frozenset("cd"): 1, frozenset("de"): 1,
                     frozenset("ae"): 1, frozenset("ef"): 1}
    assert {e: int(ix.degree[ix.ent_index[e]]) for e in "abcdefs"} == {
        "a": 2, "b": 2, "c": 2, "d": 2, "e": 3, "f": 1, "s": 0}
    assert {(ix.ent_ids[a], ix.ent_ids[b]) for a, b in zip(ix.up_a, ix.up_b)} == {("a", "s"), ("b", "s")}
    assert _pairs(ix, "leiden:0") == {frozenset(("C1", "C2")): 2}
    assert _pairs(ix, "leiden:1") == {frozenset(("C1a", "C1b")): 1, frozenset(("C1b", "C2a")): 1,
                                      frozenset(("C1a", "C2a")): 1}
    assert _pairs(ix, "attributed:0") == {}
    assert [ix.comm_ids[c] for c in ix.children[ix.comm_index["C1"]]] == ["C1a", "C1b"]  # largest first
    assert X.breadcrumb(ix, "C1b") == [("C1", "Harbour <one>"), ("C1b", "Crane")]


def test_derived_file_is_written_once_and_read_back_equal(g, tmp_path):
    store, ws = g
    cache = tmp_path / "derived"
    first = load_index(store, ws, cache)
    assert first.source == "computed" and len(list(cache.glob("explore-ws*.npz"))) == 1
    again = load_index(store, ws, cache)
    assert again.source == "file"
    for name in ("comm_ids", "comm_method", "comm_title", "ent_ids", "ent_title", "ent_type", "groups"):
        assert getattr(again, name) == getattr(first, name), name
    for name in ("comm_level", "comm_parent", "comm_size", "mem_start", "mem_ent", "link_n", "agg_a", "agg_n"):
        assert np.array_equal(getattr(again, name), getattr(first, name)), name
    # the graph changes (a new relationship e-b): another fingerprint, computed afresh, the old file replaced
    key = fingerprint(store, ws)
    with store.session() as s:
        s.add(Node(id="r8", workspace_id=ws, kind="relationship", title="e knows b", type="knows"))
        s.add(Edge(workspace_id=ws, src="r8", dst="e", kind="subject"))
        s.add(Edge(workspace_id=ws, src="r8", dst="b", kind="object"))
        s.commit()
    assert fingerprint(store, ws) != key
    fresh = load_index(store, ws, cache)
    assert fresh.source == "computed"
    assert _pairs(fresh, "leiden:0") == {frozenset(("C1", "C2")): 3}
    assert len(list(cache.glob("explore-ws*.npz"))) == 1


def test_overview_draws_super_nodes_with_aggregated_links_and_respects_the_cap(g):
    store, ws = g
    ix = compute_index(store, ws)
    dg = X.overview(store, ix, X.Filters(methods=("leiden",)), max_nodes=10)
    assert sorted(dg.ids) == ["C1", "C2"]
    assert [(e.kind, int(e.weight)) for e in dg.edges] == [("links", 2)]
    assert {n.id: n.members for n in dg.nodes} == {"C1": 3, "C2": 3}
    assert not dg.omitted and "Showing" not in dg.note

    capped = X.overview(store, ix, X.Filters(methods=("leiden",), levels=(1,)), max_nodes=2)
    assert capped.ids == ["C2a", "C1a"]  # the largest first
    assert capped.omitted == {"communities": 1}
    assert "Showing 2 of 3 communities; 1 smaller communities not drawn (cap 2)." in capped.note
    assert {frozenset((e.src, e.dst)): e.weight for e in capped.edges} == {frozenset(("C1a", "C2a")): 1}

    both = X.overview(store, ix, X.Filters(methods=("leiden", "attributed")), max_nodes=10)
    assert sorted(both.ids) == ["A1", "C1", "C2"]
    by_method = X.overview(store, ix, X.Filters(methods=("leiden", "attributed"), color_by="method"), 10)
    assert len({n.color for n in by_method.nodes}) == 2  # leiden and attributed
    by_level = X.overview(store, ix, X.Filters(methods=("leiden",), levels=(0, 1)), 10)
    assert len({n.color for n in by_level.nodes}) == 2  # level 0 and level 1
    assert {(e.src, e.dst) for e in by_level.edges if e.kind == "child_of"} == {
        ("C1a", "C1"), ("C1b", "C1"), ("C2a", "C2")}

    # edges are capped per drawn node, heaviest first
    thin = X.overview(store, ix, X.Filters(methods=("leiden",), levels=(1,)), 10, edges_per_node=0)
    assert thin.edges == [] and thin.omitted["links"] == 3


def test_super_node_labels_and_tooltips_are_escaped(g):
    store, ws = g
    ix = compute_index(store, ws)
    dg = X.overview(store, ix, X.Filters(methods=("leiden",)), 10)
    c1 = next(n for n in dg.nodes if n.id == "C1")
    assert c1.label == "Harbour <one>"  # a label travels as JSON text, drawn on the canvas
    assert "<one>" not in c1.tooltip and html.escape("Harbour <one>") in c1.tooltip
    assert "leiden · level 0 · 3 member entities · 2 child communities" in c1.tooltip
    opened = X.open_community(store, ix, "C1", X.Filters(), 10)
    c = next(n for n in opened.nodes if n.id == "c")
    assert EVIL not in c.tooltip and html.escape(EVIL) in c.tooltip
    payload = vis_payload(opened)
    assert all(EVIL not in n["title"] for n in payload["nodes"])


def test_open_community_returns_exactly_its_children_and_members(g):
    store, ws = g
    ix = compute_index(store, ws)
    dg = X.open_community(store, ix, "C1", X.Filters(), max_nodes=10)
    assert sorted(dg.ids) == ["C1a", "C1b", "a", "b", "c"]
    assert {n.id: n.kind for n in dg.nodes if n.kind == "community"} == {"C1a": "community", "C1b": "community"}
    edges = {(e.src, e.dst, e.kind): e.weight for e in dg.edges}
    assert {k for k in edges if k[2] == "in_community"} == {("a", "C1a", "in_community"), ("b", "C1a", "in_community"),
                                                            ("c", "C1b", "in_community")}
    rel = {frozenset((s, d)): w for (s, d, k), w in edges.items() if k == "relationship"}
    assert rel == {frozenset("ab"): 2, frozenset("bc"): 1}
    assert {frozenset((s, d)): w for (s, d, k), w in edges.items() if k == "links"} == {frozenset(("C1a", "C1b")): 1}
    assert dg.note.startswith("3 member entities, 2 child communities. Showing 3 of 3 members")

    # a leaf community: its members only
    leaf = X.open_community(store, ix, "C2a", X.Filters(), 10)
    assert sorted(leaf.ids) == ["d", "e", "f"]

    # the cap: a quarter for children (at least one), the rest for the most mentioned members
    small = X.open_community(store, ix, "C1", X.Filters(), max_nodes=3)
    assert small.ids == ["C1a", "a", "b"]  # a (9) and b (7) are mentioned more than c (5)
    assert small.omitted == {"members": 1, "children": 1}
    assert ("Showing 2 of 3 members (most mentioned first); 1 smaller child communities not drawn (cap 3)."
            in small.note)
    assert X.community_choices(ix, small) == [("C1a", "Quay · leiden level 1 · 2 members")]


def test_filters_layer_degree_and_kinds(g):
    store, ws = g
    ix = compute_index(store, ws)
    deg3 = X.open_community(store, ix, "C2a", X.Filters(min_degree=3), 10)
    assert deg3.ids == ["e"] and deg3.omitted == {"filtered": 2}
    assert "2 hidden by the filters" in deg3.note
    assert X.open_community(store, ix, "A1", X.Filters(layers=(1,)), 10).ids == []  # s is in no community
    no_entities = X.open_community(store, ix, "C1", X.Filters(kinds=("community",)), 10)
    assert sorted(no_entities.ids) == ["C1a", "C1b"]
    mask = X.entity_mask(ix, X.Filters(layers=(0,), min_degree=2))
    assert sorted(ix.ent_ids[i] for i in np.flatnonzero(mask)) == list("abcde")

    # the flat view: the same filters through display_graph
    flt = X.node_filter(ix, X.Filters(layers=(0,), min_degree=3, methods=("attributed",)))
    flat = display_graph(store, ws, ["entity", "community"], 50, flt=flt, min_degree=3)
    assert sorted(flat.ids) == ["A1", "e"]
    assert "Showing 2 of 2" not in flat.note and "Filters: HiRAG layer 0; method attributed; entity degree ≥ 3." in flat.note
    only_s = display_graph(store, ws, ["entity"], 50, flt=NodeFilter(layers=(1,)))
    assert only_s.ids == ["s"]
    capped = display_graph(store, ws, ["entity"], 2, flt=NodeFilter(layers=(0,)))
    assert capped.note.startswith("Showing 2 of 6 nodes of the selected kinds (cap 2)")


def test_expand_adds_one_hop_within_the_kinds_and_the_cap(g):
    store, ws = g
    ix = compute_index(store, ws)
    f = X.Filters(methods=("leiden", "attributed"))
    nb = X.expand(store, ws, ix, {"a"}, "a", f, limit=50)
    # linked entities first (b: 2 relationships, then e), its communities, then the documents of the chunks
    # mentioning it (chunks are not drawn, documents are); `s` comes through the stored summarizes edge
    assert nb[:2] == ["b", "e"]
    assert set(nb) == {"b", "e", "C1", "C1a", "A1", "s", "doc1"}
    assert X.expand(store, ws, ix, {"a", "b"}, "a", X.Filters(kinds=("entity",)), 50) == ["e", "s"]
    assert X.expand(store, ws, ix, set(), "a", f, limit=1) == ["b"]
    assert X.expand(store, ws, ix, set(), "C1", X.Filters(kinds=("community",)), 50) == ["C1a", "C1b"]
    with_chunks = X.expand(store, ws, ix, set(), "a", X.Filters(kinds=("chunk",)), 50)
    assert with_chunks == ["k1"]

    # adding them to a drawn view: within the cap, with the edges that join them to what is drawn
    base = X.open_community(store, ix, "C2a", X.Filters(), 10)  # d, e, f
    grown = X.add_nodes(store, ws, ix, base, ["a", "doc2"], max_nodes=10)
    assert sorted(grown.ids) == ["a", "d", "doc2", "e", "f"]
    new_edges = {(e.src, e.dst, e.kind) for e in grown.edges} - {(e.src, e.dst, e.kind) for e in base.edges}
    assert new_edges == {("a", "e", "relationship"), ("doc2", "e", "mentions")}
    full = X.add_nodes(store, ws, ix, X.open_community(store, ix, "C2a", X.Filters(), 4), ["a", "b"], 4)
    assert sorted(full.ids) == ["a", "d", "e", "f"] and full.omitted["expanded"] == 1
    assert "1 nodes of the expanded neighbourhoods not drawn (cap 4)." in full.note


def test_node_details_list_communities_sources_and_neighbours(g):
    store, ws = g
    det = describe_node(store, ws, "a")
    assert {c[0] for c in det.communities} == {"C1", "C1a", "A1"}  # WCC left out
    assert det.sources == [("doc1", "Document doc1", 1)]
    assert {i for i, _ in det.neighbours["related entities"]} == {"b", "e"}
    assert det.counts["subject (in)"] == 3 and det.counts["in_community"] == 4  # r1, r2, r6; C1, C1a, A1, W
    assert det.layer == 0
    c1 = describe_node(store, ws, "C1")
    assert [c[0] for c in c1.communities] == ["C1b", "C1a"]  # its children, by method, level and title
    assert {d for d, _, _ in c1.sources} == {"doc1"}
    assert [r[0] for r in search_nodes(store, ws, "entity")][:1] == ["a"]  # heaviest first
    assert ("C1", "community", "Harbour <one>") in search_nodes(store, ws, "harb")
    assert describe_node(store, ws, "nope") is None


def test_the_same_view_is_laid_out_the_same_way(g):
    import random

    store, ws = g
    ix = compute_index(store, ws)
    first = vis_payload(X.open_community(store, ix, "A1", X.Filters(), 10))
    random.random()  # other users of the global generators in between
    again = vis_payload(X.open_community(store, ix, "A1", X.Filters(), 10))
    assert first["view"] == again["view"] and first["nodes"] == again["nodes"]
    assert all("x" in n and "y" in n for n in first["nodes"])
    assert first["options"]["physics"]["stabilization"]["enabled"] is False  # placed: drawn at once
    hier = vis_payload(X.open_community(store, ix, "C1", X.Filters(), 10), hierarchical=True)
    levels = {n["id"]: n["level"] for n in hier["nodes"]}
    assert levels == {"C1a": 1, "C1b": 1, "a": 2, "b": 2, "c": 2}  # communities by level, then entities


def test_the_sample_workspace_on_start_can_be_turned_off(tmp_path):
    from core.config import Settings
    from core.workspace import ensure_sample

    assert Settings.from_env({"STRATA_HOME": str(tmp_path)}).storage.sample_on_start is True
    off = Settings.from_env({"STRATA_HOME": str(tmp_path), "STRATA_SAMPLE": "0"})
    assert off.storage.sample_on_start is False
    store = Store(off.storage.db_url)
    assert ensure_sample(store, off) == (None, None)
    assert store.workspaces() == []  # nothing created, no build started
