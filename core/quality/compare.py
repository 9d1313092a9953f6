"""Comparing what-if variants (core/quality/variants.py) with the current Leiden partition: one row per (partition,
level) with the level's figures and NMI / ARI against the current partition (core/quality/metrics.py).

Figures are measured on the graph the build clustered, whatever graph a variant clustered, so partitions compare on
one footing; the current partition's `own_modularity` is the one its stage (or the promoted variant) recorded. NMI
and ARI compare level views: each entity's community at that level or its deepest one above, so past a partition's
last level they compare its finest partition.
"""

from __future__ import annotations

import numpy as np
from sqlmodel import select

from core.config import Settings
from core.models import Community, Workspace
from core.quality.data import EntityBase, Group, build_settings, load_base, stored_groups
from core.quality.metrics import ari, level_labels, nmi
from core.quality.variants import CURRENT, figures_by_level, get_variant, variant_groups


def compare(store, index, ws: Workspace, names: list[str], settings: Settings, base: EntityBase | None = None,
            current_figures: dict[str, dict] | None = None) -> list[dict]:
    """One row per (partition, level): the level's figures and NMI / ARI against the current partition."""
    assert ws.id is not None  # a row read from or written to the store has its key
    ws_id: int = ws.id
    settings = build_settings(store, ws_id, settings)
    base = (base or load_base(store, index, ws_id)).extracted()
    n = len(base.ids)
    parts: dict[str, tuple[list[Group], dict]] = {}
    cur = stored_groups(store, ws_id, "leiden", {e: i for i, e in enumerate(base.ids)})
    parts[CURRENT] = (cur, current_figures if current_figures is not None else figures_by_level(base, cur, settings))
    for name in names:
        v = get_variant(store, ws, name)
        parts[name] = (variant_groups(base, v), v.metrics or {})
    levels = sorted({g.level for gs, _ in parts.values() for g in gs})

    def view(gs: list[Group], level: int) -> np.ndarray:
        return level_labels(n, np.array([g.level for g in gs], dtype=np.int64), [g.members for g in gs], level)

    ref = {lv: view(cur, lv) for lv in levels}
    with store.session() as s:  # the stage (or the promoted variant) recorded its modularity on its own graph
        own = {int(lv): (d or {}).get("modularity_level") for lv, d in s.exec(select(Community.level, Community.data)
               .where(Community.workspace_id == ws.id, Community.method == "leiden"))}
    rows = []
    for name, (gs, figs) in parts.items():
        for lv in levels:
            lab = ref[lv] if name == CURRENT else view(gs, lv)
            f = dict(figs.get(str(lv)) or {})
            if name == CURRENT and f:
                f["own_modularity"] = own.get(lv)
            rows.append({"partition": name, "level": lv, "communities": int(f.get("communities", 0)),
                         **{k: f.get(k) for k in ("modularity", "own_modularity", "coverage", "conductance_mean",
                                                  "coherence_mean", "calinski_harabasz", "cluster_sparsity",
                                                  "singleton_share", "tiny_share")},
                         "nmi": nmi(ref[lv], lab), "ari": ari(ref[lv], lab)})
    return rows
