"""What-if community detection: re-run hierarchical Leiden with other settings into a named variant, compare
variants with the current partition, and promote one to be the partition retrieval uses.

A variant clusters the stage's `leiden` graph, the extracted one (EntityBase.extracted: layer-0 entities and their
relationship links, in the stage's order) with communities.hierarchical_leiden and its own resolution, relationship
weights on/off, maximum cluster size, levels and seed. With KNN augmentation on, every entity with a vector is also linked to its `knn_k` most similar entities
(cosine >= min_similarity; ArchRAG's Aug, core/algorithms/attributed.py) and every link is weighted by attribute
similarity max(cos, EPS) as ArchRAG weighs them, times the link's relationship weight when weights are on
(a KNN-only link has relationship weight 1). The defaults are the last build's settings, so a default variant
reproduces the stored partition exactly (same graph, same vertex and edge order, same seed) while the entity
graph is unchanged since that build (an accepted entity merge changes it).

Storage: one `CommunityVariant` row (settings, metrics per level, the partition as entity ids plus
[level, parent, member indices] per community); the stored `leiden` rows are untouched. Metrics are measured on
the graph the build clustered (relationship weights per the build), whatever graph the variant clustered, so
variants compare on one footing; `own_modularity` is each level's modularity on the variant's own graph.
NMI and ARI (core/quality/metrics.py) compare level views: each entity's community at that level or its deepest
one above, so past a partition's last level they compare its finest partition.

Comparing variants: core/quality/compare.py. Promoting one: core/quality/promote.py. The app runs a variant as a
what-if job in the background worker (core/worker.py, kind "whatif": `start_variant`, planned by `variant_plan`),
with the runner's progress rows and cancel; the job changes no graph row, so it bumps no version.
"""

from __future__ import annotations

import re
import time
from collections.abc import Generator, Iterator
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone

import igraph as ig
import numpy as np
from sqlmodel import col, select

from core import access
from core.access import User
from core.algorithms.attributed import canonical_pairs, edge_weights
from core.algorithms.chnsw import knn_blocks
from core.algorithms.leiden import Hierarchy, hierarchical_leiden
from core.config import CommunitySettings, Settings
from core.ids import owned
from core.models import CommunityVariant, Workspace
from core.pipeline.context import BuildContext, JobPlan, Progress
from core.quality.data import EntityBase, Group, build_settings, leiden_levels, load_base
from core.quality.metrics import LevelData, level_metrics

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.\-]{0,47}$")
CURRENT = "current"


class VariantError(ValueError):
    """A bad variant name or setting, said plainly for the user."""


@dataclass
class VariantSettings:
    resolution: float = 1.0
    use_weights: bool = True
    knn: bool = False
    knn_k: int = 10
    min_similarity: float = 0.5
    max_cluster_size: int = 10
    max_levels: int = 4
    seed: int = 42
    min_component_size: int = 2

    @classmethod
    def from_dict(cls, d: dict) -> "VariantSettings":
        out = cls()
        for f in fields(cls):
            if f.name not in d or d[f.name] is None:
                continue
            v = d[f.name]
            try:
                if f.type in ("bool", bool):
                    if isinstance(v, str):
                        v = v.strip().lower() in ("1", "true", "yes", "on")
                    setattr(out, f.name, bool(v))
                elif f.type in ("int", int):
                    if isinstance(v, float) and not v.is_integer():
                        raise ValueError
                    setattr(out, f.name, int(v))
                else:
                    setattr(out, f.name, float(v))
            except (TypeError, ValueError):
                kind = {"int": "whole number", "float": "number"}.get(str(f.type), str(f.type))
                raise VariantError(f"{f.name.replace('_', ' ')} must be a {kind} (got {v!r})") from None
        return out.check()

    def check(self) -> "VariantSettings":
        def bad(cond: bool, msg: str) -> None:
            if cond:
                raise VariantError(msg)

        bad(not np.isfinite(self.resolution) or not 0 < self.resolution <= 100,
            f"resolution must be above 0 and at most 100 (got {self.resolution:g})")
        bad(self.max_cluster_size < 2, f"max cluster size must be at least 2 (got {self.max_cluster_size})")
        bad(not 1 <= self.max_levels <= 10, f"levels must be between 1 and 10 (got {self.max_levels})")
        bad(not 0 <= self.seed < 2**31, f"seed must be between 0 and 2147483647 (got {self.seed})")
        bad(not 1 <= self.knn_k <= 100, f"KNN neighbours must be between 1 and 100 (got {self.knn_k})")
        bad(not -1 <= self.min_similarity <= 1, f"KNN minimum similarity must be between -1 and 1 "
                                                f"(got {self.min_similarity:g})")
        bad(self.min_component_size < 1, "min component size must be at least 1")
        return self

    def community(self) -> CommunitySettings:
        return CommunitySettings(resolution=self.resolution, max_cluster_size=self.max_cluster_size,
                                 max_levels=self.max_levels, use_weights=self.use_weights or self.knn,
                                 min_component_size=self.min_component_size, seed=self.seed)

    def describe(self) -> str:
        knn = f"KNN k={self.knn_k} ≥{self.min_similarity:g}" if self.knn else "no KNN"
        return (f"resolution {self.resolution:g} · weights {'on' if self.use_weights else 'off'} · {knn} · "
                f"max size {self.max_cluster_size} · {self.max_levels} levels · seed {self.seed}")


def fixed_knn_links(idx: np.ndarray, sims: np.ndarray, k: int, min_similarity: float, n: int) -> np.ndarray:
    """The what-if's own KNN augmentation: each row to its first `k` neighbours with similarity >= min_similarity
    (a knob to try, not ArchRAG's build rule, `core.algorithms.attributed.augmentation_plan`)."""
    idx, sims = idx[:, :k], sims[:, :k]
    ok = (idx >= 0) & (sims >= min_similarity)
    rows = np.broadcast_to(np.arange(len(idx))[:, None], idx.shape)
    return canonical_pairs(np.stack([rows[ok], idx[ok]], axis=1), n)


def defaults(store, ws_id: int, settings: Settings | None = None) -> VariantSettings:
    """The settings of the last build: a variant run with them reproduces the stored partition."""
    s = build_settings(store, ws_id, settings)
    c = s.community
    return VariantSettings(c.resolution, c.use_weights, False, VariantSettings.knn_k, VariantSettings.min_similarity,
                           c.max_cluster_size, c.max_levels, c.seed, c.min_component_size)


def _mine(v: CommunityVariant, ws: Workspace) -> bool:
    def naive(d: datetime) -> datetime:
        return d.astimezone(timezone.utc).replace(tzinfo=None) if d.tzinfo else d

    return naive(v.created_at) >= naive(ws.created_at)


def list_variants(store, ws: Workspace) -> list[CommunityVariant]:
    """The workspace's variants, newest first, without their partitions (loaded by `get_variant`)."""
    assert ws.id is not None  # a row read from or written to the store has its key
    ws_id: int = ws.id
    with store.session() as s:
        rows = s.exec(select(CommunityVariant.id, CommunityVariant.name, CommunityVariant.settings,
                             CommunityVariant.metrics).where(CommunityVariant.workspace_id == ws_id)
                      .add_columns(col(CommunityVariant.build_version), col(CommunityVariant.seconds),
                                   col(CommunityVariant.created_at))
                      .order_by(col(CommunityVariant.created_at).desc(), col(CommunityVariant.id).desc())).all()
    out = [CommunityVariant(id=i, workspace_id=ws_id, name=n, settings=st or {}, metrics=m or {}, build_version=b,
                            seconds=sec, created_at=c) for i, n, st, m, b, sec, c in rows]
    return [v for v in out if _mine(v, ws)]


def get_variant(store, ws: Workspace, name: str) -> CommunityVariant:
    with store.session() as s:
        v = s.exec(select(CommunityVariant).where(CommunityVariant.workspace_id == ws.id,
                                                  CommunityVariant.name == name)).first()
    if v is None or not _mine(v, ws):
        raise VariantError(f"no variant named {name!r}")
    return v


def delete_variant(store, user: User, ws: Workspace, name: str) -> None:
    """Delete variant `name` (access.Refused, logged, unless the user may run what-if variants of `ws`)."""
    access.require(store, user, ws, "whatif")
    v = get_variant(store, ws, name)
    with store.session() as s:
        assert ws.id is not None  # a stored workspace
        s.delete(owned(s, CommunityVariant, ws.id, v.id))
        s.commit()


def check_name(store, ws: Workspace, name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise VariantError("give the variant a name")
    if not NAME.match(name):
        raise VariantError(f"invalid name {name!r}: use 1-48 letters, digits, spaces, '_', '-' or '.', "
                           "starting with a letter or digit")
    if name.lower() == CURRENT:
        raise VariantError(f"{CURRENT!r} is the stored partition; pick another name")
    if any(v.name.lower() == name.lower() for v in list_variants(store, ws)):
        raise VariantError(f"a variant named {name!r} already exists; pick another name or delete it first")
    return name


# ------------------------------------------------------------------------------------------------------ running


def variant_graph(base: EntityBase, vs: VariantSettings) -> Generator[Progress, None, ig.Graph]:
    """The graph a variant clusters (module doc); yields KNN progress, returns the igraph Graph."""
    n = len(base.ids)
    pairs, w = base.pairs, np.maximum(base.weights, 1e-6)
    if vs.knn and base.has_vec.sum() > 1:
        sub = np.flatnonzero(base.has_vec)
        vecs = np.ascontiguousarray(base.vecs[sub])
        idx = np.full((len(sub), vs.knn_k), -1, dtype=np.int64)
        sims = np.full((len(sub), vs.knn_k), -np.inf, dtype=np.float32)
        for start, i, s in knn_blocks(vecs, vs.knn_k):
            idx[start : start + len(i)], sims[start : start + len(s)] = i, s
            yield Progress(start + len(i), len(sub), f"KNN augmentation: {start + len(i):,}/{len(sub):,} entities")
        knn = sub[fixed_knn_links(idx, sims, vs.knn_k, vs.min_similarity, len(sub))]
        old_keys = pairs[:, 0] * n + pairs[:, 1]
        all_pairs = canonical_pairs(np.vstack([pairs, knn]), n)
        keys = all_pairs[:, 0] * n + all_pairs[:, 1]
        order = np.argsort(old_keys)
        at = np.clip(np.searchsorted(old_keys[order], keys), 0, max(len(old_keys) - 1, 0))
        found = (old_keys[order][at] == keys) if len(old_keys) else np.zeros(len(keys), bool)
        rel = np.where(found, w[order][at] if len(w) else 1.0, 1.0) if vs.use_weights else np.ones(len(keys))
        both = base.has_vec[all_pairs[:, 0]] & base.has_vec[all_pairs[:, 1]]
        sim = np.where(both, edge_weights(base.vecs, all_pairs), 1.0)
        pairs, w = all_pairs, np.maximum(sim * rel, 1e-6)
    g = ig.Graph(n=n, edges=pairs.tolist(), directed=False)
    g.es["weight"] = w.tolist() if (vs.use_weights or vs.knn) else [1.0] * len(pairs)
    return g


def groups_of(h: Hierarchy) -> list[Group]:
    return [Group("", "", c.level, np.array(c.members, dtype=np.int64), -1 if c.parent is None else c.parent)
            for c in h.clusters]


def partition_levels(base: EntityBase, groups: list[Group], use_weights: bool) -> list[LevelData]:
    return leiden_levels(base, base.adj(use_weights), groups, method="variant")


def figures_by_level(base: EntityBase, groups: list[Group], settings: Settings) -> dict[str, dict]:
    return {str(ld.level): level_metrics(ld, settings.quality, table=False).figures
            for ld in partition_levels(base, groups, settings.community.use_weights)}


def run_variant(store, index, ws: Workspace, name: str, vs: VariantSettings, settings: Settings,
                base: EntityBase | None = None) -> Iterator[Progress]:
    """Cluster into a new named variant and store it; yields progress, the last event's counts name the variant."""
    assert ws.id is not None  # a row read from or written to the store has its key
    ws_id: int = ws.id
    name = check_name(store, ws, name)
    vs = vs.check()
    t0 = time.perf_counter()
    settings = build_settings(store, ws_id, settings)
    yield Progress(0, 4, "loading the entity graph and its vectors")
    base = (base or load_base(store, index, ws_id)).extracted()
    steps = {"load": time.perf_counter() - t0}
    g = yield from variant_graph(base, vs)
    steps["graph"] = time.perf_counter() - t0 - sum(steps.values())
    yield Progress(1, 4, f"clustering {g.vcount():,} entities, {g.ecount():,} links (hierarchical Leiden)")
    h = hierarchical_leiden(g, vs.community())
    groups = groups_of(h)
    steps["leiden"] = time.perf_counter() - t0 - sum(steps.values())
    yield Progress(2, 4, f"measuring {len(groups):,} communities")
    metrics = figures_by_level(base, groups, settings)
    for lv, m in metrics.items():
        m["own_modularity"] = float(h.modularity.get(int(lv), float("nan")))
    steps["metrics"] = time.perf_counter() - t0 - sum(steps.values())
    part = {"entities": base.ids, "clusters": [[g_.level, g_.parent, g_.members.tolist()] for g_ in groups]}
    with store.session() as s:
        s.add(CommunityVariant(workspace_id=ws_id, name=name, settings=asdict(vs), metrics=metrics, partition=part,
                               build_version=ws.build_version, seconds=round(time.perf_counter() - t0, 3)))
        s.commit()
    steps["store"] = time.perf_counter() - t0 - sum(steps.values())
    secs = time.perf_counter() - t0
    per_level = {lv: int(m["communities"]) for lv, m in metrics.items()}
    yield Progress(4, 4, f"variant {name!r}: {len(groups):,} communities in {secs:.1f} s",
                   {"variant": name, "communities_per_level": per_level, "seconds": round(secs, 3),
                    "steps_s": {k: round(v, 2) for k, v in steps.items()}})


def variant_groups(base: EntityBase, v: CommunityVariant) -> list[Group]:
    """A stored variant's communities over `base`'s vertices (entities gone since are dropped)."""
    part = v.partition or {}
    index_of = {e: i for i, e in enumerate(base.ids)}
    remap = np.array([index_of.get(e, -1) for e in part.get("entities", [])], dtype=np.int64)
    out = []
    for level, parent, members in part.get("clusters", []):
        m = remap[np.asarray(members, dtype=np.int64)] if len(members) else np.zeros(0, np.int64)
        out.append(Group("", "", int(level), np.sort(m[m >= 0]), int(parent)))
    return out


# ------------------------------------------------------------------------------------------------------ as a job


def variant_plan(params: dict) -> JobPlan:
    """A what-if job: one step that runs and stores the variant (params: name, settings)."""
    name = str(params.get("name") or "")
    vs = VariantSettings.from_dict(params.get("settings") or {})

    def run(ctx: BuildContext) -> Iterator[Progress]:
        return run_variant(ctx.store, ctx.index, ctx.ws, name, vs, ctx.settings)

    return JobPlan([("variant", f"What-if run {name!r}", run)], label=f"What-if run {name!r}",
                   done_message=f"variant {name!r} made")
