"""The whole stored state of a built workspace in a form two builds can be compared by: every node with its text and
data, every edge with its weight and data (row ids left out), every community with its report, and every vector
collection as (id, content hash, hash of the vector's bytes) triples. Nothing is rounded: two builds of the same
document set must give equal snapshots however they got there (at once, documents added later, documents deleted,
killed and resumed; tests/stages/test_incremental.py) and whichever workspace of a database they were built in:
every id is read without its workspace part (core/ids.py), the only part of a stored row that names the workspace."""

from __future__ import annotations

import hashlib
import json
import re

import numpy as np
from sqlmodel import select

from core.models import Community, Edge, Node
from core.pipeline.factory import open_index

COLLECTIONS = ("chunk", "statement", "entity", "community", "topic", "attribute", "high_level")


def _j(v) -> str:
    return json.dumps(v or {}, sort_keys=True)


def _bits(v: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(v, dtype=np.float32).tobytes()).hexdigest()[:16]


def full_snapshot(store, ws, settings, embedder_name: str) -> dict[str, set]:
    suffix = re.compile(rf"~{ws.id}(?![0-9])")

    def local(row: tuple) -> tuple:
        return tuple(suffix.sub("", v) if isinstance(v, str) else v for v in row)

    with store.session() as s:
        nodes = {local((n.id, n.kind, n.key, n.title, n.text, n.type, n.layer, repr(n.weight), n.document_id, n.ord,
                        _j(n.data))) for n in s.exec(select(Node).where(Node.workspace_id == ws.id))}
        edges = {local((e.src, e.dst, e.kind, repr(e.weight), _j(e.data)))
                 for e in s.exec(select(Edge).where(Edge.workspace_id == ws.id))}
        comms = {local((c.id, c.method, c.level, c.parent_id, c.size, c.title, c.summary, _j(c.report), _j(c.data)))
                 for c in s.exec(select(Community).where(Community.workspace_id == ws.id))}
    index = open_index(settings, ws.name, embedder_name)
    vectors = set()
    for kind in COLLECTIONS:
        texts = index.existing(kind)
        ids, mat = index.all_vectors(kind)
        vectors |= {local((kind, i, texts.get(i), _bits(v))) for i, v in zip(ids, mat)}
    return {"nodes": nodes, "edges": edges, "communities": comms, "vectors": vectors}


def differences(a: dict[str, set], b: dict[str, set], show: int = 3) -> dict[str, tuple]:
    """part -> (only in a, only in b, a few examples of each) for the parts that differ."""
    out = {}
    for k in a:
        only_a, only_b = a[k] - b[k], b[k] - a[k]
        if only_a or only_b:
            out[k] = (len(only_a), len(only_b), sorted(only_a, key=str)[:show], sorted(only_b, key=str)[:show])
    return out
