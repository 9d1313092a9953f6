"""The Graph page's read model of one workspace build: what the levels of detail need, computed once.

Drawing communities as super-nodes and opening one into its members must not scan the 1.7M edges of a big
workspace on every click. `ExploreIndex` holds, as compact arrays:

* every community except the WCC bookkeeping rows (method, level, parent, title, member count);
* every entity (title, type, HiRAG layer, weight) and its members-of-community lists (a CSR by community);
* the entity graph: relationship nodes collapsed into entity—entity links counting the relationships between the
  two ends, and HiRAG's `summarizes` links;
* for every (method, level), the aggregated links between its communities: how many relationships join a member
  of one to a member of the other (`Mᵀ L M` with M the membership matrix and L the symmetric link counts, so an
  entity in two communities of one level counts for both).

`load_index` computes it from the store (four reads of edges by kind) or, with a `cache_dir`, reads it from
`explore-ws<id>-<fingerprint>.npz` there, written the first time. The fingerprint changes with the build version
and with the newest edge, node and community rows, so a rebuild or an edit of the graph computes it again.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse
from sqlalchemy import text

from core.algorithms.pairs import code_pairs, sorted_unique
from core.secrets import private_dir
from core.store import index_hint, is_sqlite

FORMAT = 1  # bump when the file layout changes
_SEP = "\x1f"
_STRINGS = ("comm_ids", "comm_method", "comm_title", "ent_ids", "ent_title", "ent_type", "groups")
_ARRAYS = ("comm_level", "comm_parent", "comm_size", "ent_layer", "ent_weight", "mem_start", "mem_ent",
           "link_a", "link_b", "link_n", "up_a", "up_b", "agg_group", "agg_a", "agg_b", "agg_n")


@dataclass
class ExploreIndex:
    key: str  # the fingerprint it was computed for
    comm_ids: list[str]
    comm_method: list[str]
    comm_level: np.ndarray  # int16
    comm_parent: np.ndarray  # int32 community index, -1 for a root
    comm_size: np.ndarray  # int32 member entities
    comm_title: list[str]
    ent_ids: list[str]
    ent_title: list[str]
    ent_type: list[str]
    ent_layer: np.ndarray  # int16 HiRAG layer
    ent_weight: np.ndarray  # float32 mention count
    mem_start: np.ndarray  # int64, len(comm_ids)+1: members of c are mem_ent[mem_start[c]:mem_start[c+1]]
    mem_ent: np.ndarray  # int32 entity indices
    link_a: np.ndarray  # int32 entity index (a < b)
    link_b: np.ndarray
    link_n: np.ndarray  # int32 relationships between a and b
    up_a: np.ndarray  # int32 entity summarized by …
    up_b: np.ndarray  # … this summary entity
    groups: list[str]  # "method:level" per group number
    agg_group: np.ndarray  # int16 group number of each aggregated link
    agg_a: np.ndarray  # int32 community index (a < b)
    agg_b: np.ndarray
    agg_n: np.ndarray  # int32 relationships between members of a and members of b
    source: str = "computed"  # "computed" or "file"
    seconds: float = 0.0  # time to compute or read

    # -- lookups, built on first use -----------------------------------------------------------------------------
    @cached_property
    def comm_index(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.comm_ids)}

    @cached_property
    def ent_index(self) -> dict[str, int]:
        return {e: i for i, e in enumerate(self.ent_ids)}

    @cached_property
    def children(self) -> list[list[int]]:
        """Child communities of each community, largest first."""
        out: list[list[int]] = [[] for _ in self.comm_ids]
        for c in np.argsort(-self.comm_size, kind="stable"):
            p = int(self.comm_parent[c])
            if p >= 0:
                out[p].append(int(c))
        return out

    @cached_property
    def degree(self) -> np.ndarray:
        """Distinct entities each entity is linked to through relationships."""
        n = len(self.ent_ids)
        return (np.bincount(self.link_a, minlength=n) + np.bincount(self.link_b, minlength=n)).astype(np.int32)

    @cached_property
    def adjacency(self) -> sparse.csr_matrix:
        """Symmetric entity × entity matrix of relationship counts."""
        n = len(self.ent_ids)
        m = sparse.coo_matrix((self.link_n, (self.link_a, self.link_b)), shape=(n, n)).tocsr()
        return (m + m.T).tocsr()

    @cached_property
    def member_of(self) -> sparse.csr_matrix:
        """Entity × community membership (1 = member)."""
        comm = np.repeat(np.arange(len(self.comm_ids), dtype=np.int32), np.diff(self.mem_start))
        return sparse.csr_matrix((np.ones(len(comm), dtype=np.int8), (self.mem_ent, comm)),
                                 shape=(len(self.ent_ids), len(self.comm_ids)))

    def members(self, c: int) -> np.ndarray:
        return self.mem_ent[self.mem_start[c] : self.mem_start[c + 1]]

    def communities_of(self, e: int) -> list[int]:
        m = self.member_of
        return [int(c) for c in m.indices[m.indptr[e] : m.indptr[e + 1]]]

    def group_of(self, c: int) -> str:
        return f"{self.comm_method[c]}:{int(self.comm_level[c])}"

    def ancestors(self, c: int) -> list[int]:
        """The community's parents from the root down, without the community itself."""
        out, seen = [], {c}
        p = int(self.comm_parent[c])
        while p >= 0 and p not in seen:
            out.append(p)
            seen.add(p)
            p = int(self.comm_parent[p])
        return out[::-1]

    def aggregated(self, group: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(a, b, relationships) of the aggregated links between communities of `group` ("method:level")."""
        if group not in self.groups:
            empty = np.zeros(0, dtype=np.int32)
            return empty, empty, empty
        sel = self.agg_group == self.groups.index(group)
        return self.agg_a[sel], self.agg_b[sel], self.agg_n[sel]


# -- computing --------------------------------------------------------------------------------------------------
def fingerprint(store, ws_id: int) -> str:
    """The workspace's creation, build version and the newest edge, node and community rows: cheap reads (rowid maxima on SQLite, indexed
    counts of the workspace's rows on PostgreSQL, which has no rowid, and one indexed count)."""
    with store.session() as s:
        conn = s.connection()
        one = {"ws": ws_id}
        ws = conn.execute(text("SELECT build_version, created_at FROM workspace WHERE id=:ws"), one).first()
        bv, born = (ws[0], str(ws[1]).replace(" ", "T")) if ws is not None else (0, "")
        e = conn.execute(text("SELECT max(id) FROM edge")).scalar()
        n = conn.execute(text("SELECT max(rowid) FROM node" if is_sqlite(conn)
                              else "SELECT count(*) FROM node WHERE workspace_id=:ws"), one).scalar()
        c = conn.execute(text("SELECT count(*) FROM community WHERE workspace_id=:ws"), one).scalar()
    born_key = hashlib.sha256(born.encode()).hexdigest()[:8]  # a workspace made again under a freed id differs
    return f"w{born_key}-b{bv or 0}-e{e or 0}-n{n or 0}-c{c or 0}"


def compute_index(store, ws_id: int, key: str = "") -> ExploreIndex:
    t0 = time.perf_counter()
    with store.session() as s:
        conn = s.connection()
        by_kind = "edge" + index_hint(conn, "ix_edge_ws_kind")

        def rows(sql: str) -> list:
            return conn.execute(text(sql), {"ws": ws_id}).fetchall()

        comms = rows("SELECT id, method, level, parent_id, size, title FROM community WHERE workspace_id=:ws "
                     "AND method != 'wcc' ORDER BY method, level, id")
        ents = rows("SELECT id, title, type, layer, weight FROM node WHERE workspace_id=:ws AND kind='entity' "
                    "ORDER BY id")
        mem = rows(f"SELECT src, dst FROM {by_kind} WHERE workspace_id=:ws AND kind='in_community'")
        ends = rows(f"SELECT src, dst, kind FROM {by_kind} WHERE workspace_id=:ws AND kind IN ('subject', 'object')")
        ups = rows(f"SELECT src, dst FROM {by_kind} WHERE workspace_id=:ws AND kind='summarizes'")
    ci = {r[0]: i for i, r in enumerate(comms)}
    ei = {r[0]: i for i, r in enumerate(ents)}
    n_c, n_e = len(comms), len(ents)

    pairs = np.array([(ei[s_], ci[d]) for s_, d in mem if s_ in ei and d in ci], dtype=np.int64).reshape(-1, 2)
    pairs = code_pairs(sorted_unique(pairs[:, 0] * max(n_c, 1) + pairs[:, 1]), max(n_c, 1))  # sorted, once each
    order = np.lexsort((pairs[:, 0], pairs[:, 1])) if len(pairs) else np.zeros(0, dtype=np.int64)
    mem_ent = pairs[order, 0].astype(np.int32)
    mem_comm = pairs[order, 1]
    mem_start = np.zeros(n_c + 1, dtype=np.int64)
    np.cumsum(np.bincount(mem_comm, minlength=n_c), out=mem_start[1:])
    counted = np.diff(mem_start).astype(np.int32)
    stored = np.array([r[4] or 0 for r in comms], dtype=np.int32)
    size = np.where(counted > 0, counted, stored).astype(np.int32)

    sub: dict[str, str] = {}
    obj: dict[str, str] = {}
    for src, dst, kind in ends:
        (sub if kind == "subject" else obj)[src] = dst
    ab = [(ei[a], ei[obj[r]]) for r, a in sub.items() if a in ei and obj.get(r) in ei and a != obj[r]]
    link_a, link_b, link_n = _count_pairs(np.array(ab, dtype=np.int64).reshape(-1, 2), n_e)
    up = np.array([(ei[a], ei[b]) for a, b in ups if a in ei and b in ei and a != b], dtype=np.int32).reshape(-1, 2)

    level = np.array([r[2] for r in comms], dtype=np.int16)
    method = [r[1] for r in comms]
    groups = sorted({f"{m}:{lv}" for m, lv in zip(method, level.tolist())})
    gnum = np.array([groups.index(f"{m}:{lv}") for m, lv in zip(method, level.tolist())], dtype=np.int16)
    agg = _aggregate(mem_ent, mem_comm, link_a, link_b, link_n, gnum, n_e, n_c)

    ix = ExploreIndex(
        key=key, comm_ids=[r[0] for r in comms], comm_method=method, comm_level=level,
        comm_parent=np.array([ci.get(r[3], -1) if r[3] != r[0] else -1 for r in comms], dtype=np.int32),
        comm_size=size, comm_title=[_clean(r[5]) for r in comms],
        ent_ids=[r[0] for r in ents], ent_title=[_clean(r[1]) for r in ents], ent_type=[_clean(r[2]) for r in ents],
        ent_layer=np.array([r[3] or 0 for r in ents], dtype=np.int16),
        ent_weight=np.array([r[4] or 0.0 for r in ents], dtype=np.float32),
        mem_start=mem_start, mem_ent=mem_ent, link_a=link_a, link_b=link_b, link_n=link_n,
        up_a=up[:, 0].copy(), up_b=up[:, 1].copy(), groups=groups,
        agg_group=agg[0], agg_a=agg[1], agg_b=agg[2], agg_n=agg[3])
    ix.seconds = time.perf_counter() - t0
    return ix


def _count_pairs(ab: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected (a < b) pairs with their multiplicity."""
    if not len(ab):
        z = np.zeros(0, dtype=np.int32)
        return z, z.copy(), z.copy()
    lo, hi = np.minimum(ab[:, 0], ab[:, 1]), np.maximum(ab[:, 0], ab[:, 1])
    keys, counts = np.unique(lo * n + hi, return_counts=True)
    return (keys // n).astype(np.int32), (keys % n).astype(np.int32), counts.astype(np.int32)


def _aggregate(mem_ent, mem_comm, link_a, link_b, link_n, gnum, n_e: int, n_c: int):
    """Per group (method, level): Cg = Mgᵀ L Mg, kept above the diagonal (a < b)."""
    L = sparse.coo_matrix((link_n.astype(np.int64), (link_a, link_b)), shape=(n_e, n_e)).tocsr()
    L = (L + L.T).tocsr()
    M = sparse.csr_matrix((np.ones(len(mem_ent), dtype=np.int64), (mem_ent, mem_comm)), shape=(n_e, n_c))
    out: list[tuple[np.ndarray, ...]] = []
    for g in np.unique(gnum):
        cols = np.flatnonzero(gnum == g)
        Mg = M[:, cols]
        C = (Mg.T @ (L @ Mg)).tocoo()
        keep = C.row < C.col
        out.append((np.full(int(keep.sum()), g, dtype=np.int16), cols[C.row[keep]].astype(np.int32),
                    cols[C.col[keep]].astype(np.int32), C.data[keep].astype(np.int32)))
    if not out:
        z = np.zeros(0, dtype=np.int32)
        return np.zeros(0, dtype=np.int16), z, z.copy(), z.copy()
    return tuple(np.concatenate([o[i] for o in out]) for i in range(4))


def _clean(s: str | None) -> str:
    return (s or "").replace(_SEP, " ")


# -- the derived file ---------------------------------------------------------------------------------------------
def index_path(cache_dir: Path, ws_id: int, key: str) -> Path:
    return Path(cache_dir) / f"explore-ws{ws_id}-f{FORMAT}-{key}.npz"


def save_index(ix: ExploreIndex, path: Path) -> None:
    """Write atomically (a temporary file renamed), so concurrent readers see the whole file or none; the folder
    (STRATA_HOME/derived) 0700, the file 0600 as mkstemp makes it (core/secrets.py)."""
    private_dir(path.parent)
    data = {k: getattr(ix, k) for k in _ARRAYS}
    data.update({k: np.frombuffer(_SEP.join(getattr(ix, k)).encode("utf-8"), dtype=np.uint8) for k in _STRINGS})
    data["n_strings"] = np.array([len(getattr(ix, k)) for k in _STRINGS], dtype=np.int64)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_index(path: Path, key: str) -> ExploreIndex:
    t0 = time.perf_counter()
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in _ARRAYS}
        counts = z["n_strings"].tolist()
        strings: dict[str, Any] = {}  # the list[str] fields of ExploreIndex, by name
        for k, n in zip(_STRINGS, counts):
            raw = z[k].tobytes().decode("utf-8")
            strings[k] = raw.split(_SEP) if n else []
    ix = ExploreIndex(key=key, **arrays, **strings, source="file")
    ix.seconds = time.perf_counter() - t0
    return ix


def load_index(store, ws_id: int, cache_dir: Path | None = None) -> ExploreIndex:
    """The index of the workspace's current build: read from `cache_dir` when computed before, else computed (and
    written there, older files of the workspace removed)."""
    key = fingerprint(store, ws_id)
    if cache_dir is None:
        return compute_index(store, ws_id, key)
    path = index_path(cache_dir, ws_id, key)
    if path.exists():
        try:
            return read_index(path, key)
        except (OSError, ValueError, KeyError):
            path.unlink(missing_ok=True)
    ix = compute_index(store, ws_id, key)
    try:
        save_index(ix, path)
        for old in Path(cache_dir).glob(f"explore-ws{ws_id}-*.npz"):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only home: the index still serves this process
    return ix
