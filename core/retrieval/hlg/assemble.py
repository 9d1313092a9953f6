"""HLG result assembly: the local / bridge / global sections and the path drawn (what the search visited)."""

from __future__ import annotations

import numpy as np

from core.models import Node
from core.retrieval.base import ContextItem, PathEdge, PathStep, Resources, Retrieval
from core.retrieval.hlg.graph import Lexicon
from core.retrieval.hlg.rank import Hop


def sections(res: Resources, lx: Lexicon, r: Retrieval, items, kept: list[int], hops: list[Hop], topic_hits,
             score: np.ndarray, k: int, topics: bool) -> dict[str, Node]:
    """Fill r.sections: local = the context items (id, kind, score, documents), in their order; bridge = the entities
    the hops share (two most specific per hop) and the facts their statements state about them; global = the
    retrieved topics (TopicGraphRAG) or the topics of the kept statements. Returns the nodes read, by id."""
    bridge: dict[str, float] = {}
    backing: dict[str, list[str]] = {}  # the documents of the hops' statements
    for h in hops:
        ents = h.entities[:2]
        for i in ents + [f for f in lx.sfacts.get(h.src, []) + lx.sfacts.get(h.dst, [])
                         if set(lx.fact_ends.get(f, ())) & set(ents)]:
            bridge[i] = max(bridge.get(i, -1.0), h.score)
            backing[i] = list(dict.fromkeys(backing.get(i, []) + [d for d in (lx.sdoc[h.src], lx.sdoc[h.dst]) if d]))
    bridge_ids = sorted(bridge, key=lambda i: (-bridge[i], i))[: 2 * k]
    if topics:
        glob = topic_hits[:k]
    else:
        tscore: dict[str, float] = {}
        for s in kept:
            for tid in lx.stopics.get(s, []):
                tscore[tid] = max(tscore.get(tid, -1.0), float(score[s]))
        glob = sorted(tscore.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    nodes = res.store.nodes_by_id(res.ws_id, [i for i, *_ in items] + bridge_ids + [tid for tid, _ in glob])
    for i, kind, sc, docs in items:
        if i in nodes:
            r.sections["local"].append(ContextItem(i, kind, nodes[i].title, nodes[i].text, round(sc, 4),
                                                   documents=docs))
    for i in bridge_ids:
        if i in nodes:
            n = nodes[i]
            r.sections["bridge"].append(ContextItem(i, n.kind, n.title, n.text, round(bridge[i], 4),
                                                    n.layer if n.kind == "entity" else None, backing[i]))
    for tid, sc in glob:
        if tid in nodes:
            n = nodes[tid]
            r.sections["global"].append(ContextItem(tid, "topic", n.title, n.text, round(sc, 4),
                                                    documents=[n.document_id] if n.document_id else []))
    return nodes


def path(lx: Lexicon, r: Retrieval, kws, topic_hits, kept: list[int], kept_chunks: list[str], starts: set[int],
         hops: list[Hop], labels: dict[str, str], topics: bool) -> None:
    """Fill r.path: the hops (beam: their statements, shared entities, `mentions` edges), keyword entities and the
    other kept statements that were entry points (entry), other kept statements (result), topics (`in_topic`;
    entry for TopicGraphRAG), chunks (chunk, `derived_from`)."""
    steps: dict[str, PathStep] = {}
    edges: dict[frozenset, PathEdge] = {}

    def node(i: str, kind: str, role: str, label: str) -> None:
        steps.setdefault(i, PathStep(i, kind, role, (label or i)[:80]))

    def edge(a: str, b: str, kind: str, role: str) -> None:
        if a in steps and b in steps:
            edges.setdefault(frozenset((a, b)), PathEdge(a, b, kind, role))

    on_hops = [s for h in hops for s in (h.src, h.dst)]
    shown = list(dict.fromkeys(on_hops + kept))
    on_set = set(on_hops)
    for s in shown:
        role = "beam" if s in on_set else ("entry" if s in starts else "result")
        node(lx.sids[s], "statement", role, lx.stext[s])
    for h in hops:
        for e in h.entities[:2]:
            node(e, "entity", "beam", labels.get(e, e))
            edge(lx.sids[h.src], e, "mentions", "beam")
            edge(lx.sids[h.dst], e, "mentions", "beam")
    kw_ents = {lx.eids[c] for _, cols in kws for c in cols}
    for s in shown:  # the keyword entities a shown statement mentions
        for e in (lx.eids[c] for c in lx.M[s].indices if lx.eids[c] in kw_ents):
            node(e, "entity", "entry", labels.get(e, e))
            edge(lx.sids[s], e, "mentions", "entry")
    shown_set = set(shown)
    for tid in ([t for t, _ in topic_hits] if topics else [i.id for i in r.sections["global"]]):
        members = [s for s in lx.tstmts.get(tid, []) if s in shown_set]
        if members:
            node(tid, "topic", "entry" if topics else "result", labels.get(tid, tid))
            for s in members:
                edge(lx.sids[s], tid, "in_topic", "entry" if topics else "membership")
    for c in kept_chunks:
        node(c, "chunk", "chunk", labels.get(c, c))
        for s in kept:
            if c in lx.schunks[s]:
                edge(lx.sids[s], c, "derived_from", "chunk")
    r.path_nodes = list(steps.values())
    r.path_edges = list(edges.values())
