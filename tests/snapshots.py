"""The whole stored state of a built workspace in a form two builds can be compared by: every node with its text and
data, every edge with its weight and data (row ids left out), every community with its report, and every vector
collection as (id, content hash) pairs. Two builds of the same document set must give equal snapshots however they
got there (at once, documents added later, documents deleted; tests/stages/test_incremental.py)."""

from __future__ import annotations

import json

from sqlmodel import select

from core.build.factory import open_index
from core.models import Community, Edge, Node

COLLECTIONS = ("chunk", "statement", "entity", "community", "topic", "attribute", "high_level")


def _j(v) -> str:
    return json.dumps(v or {}, sort_keys=True)


def full_snapshot(store, ws, settings, embedder_name: str) -> dict[str, set]:
    with store.session() as s:
        nodes = {(n.id, n.kind, n.key, n.title, n.text, n.type, n.layer, round(n.weight, 6), n.document_id, n.ord,
                  _j(n.data)) for n in s.exec(select(Node).where(Node.workspace_id == ws.id))}
        edges = {(e.src, e.dst, e.kind, round(e.weight, 6), _j(e.data))
                 for e in s.exec(select(Edge).where(Edge.workspace_id == ws.id))}
        comms = {(c.id, c.method, c.level, c.parent_id, c.size, c.title, c.summary, _j(c.report), _j(c.data))
                 for c in s.exec(select(Community).where(Community.workspace_id == ws.id))}
    index = open_index(settings, ws.name, embedder_name)
    vectors = {(kind, i, h) for kind in COLLECTIONS for i, h in index.existing(kind).items()}
    return {"nodes": nodes, "edges": edges, "communities": comms, "vectors": vectors}


def differences(a: dict[str, set], b: dict[str, set], show: int = 3) -> dict[str, tuple]:
    """part -> (only in a, only in b, a few examples of each) for the parts that differ."""
    out = {}
    for k in a:
        only_a, only_b = a[k] - b[k], b[k] - a[k]
        if only_a or only_b:
            out[k] = (len(only_a), len(only_b), sorted(only_a, key=str)[:show], sorted(only_b, key=str)[:show])
    return out
