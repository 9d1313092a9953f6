"""HiRAG's layers of a built workspace, clustering by clustering: what the BIC scan saw (measurement only).

    python -m bench.layers_diagnosis --home bench/out/hotpotqa --workspace hotpotqa [--full] [--only0] [--n-init 5]

Runs the layers stage's clustering again (`core.algorithms.layers.cluster_layer`, the same deterministic code and
seed) on the stored vectors, each layer's entities in the stage's order (layer 0 by id; layer i + 1 the summary
entities of layer i + 1 in the order they were stored, then the single-member clusters' entities carried up,
sorted), and prints one JSON line per layer: entities, the k chosen, the BIC scan HiRAG's 0.1 % early stop ran,
cluster sizes, singletons and CS (a rerun gives the build's CS: it checks the reconstruction). `--full` also fits
every k up to min(n, max_components) - 1 without the early stop and gives the lowest-BIC k and its CS. `--n-init`
and `--rel-tol` change `core.algorithms.layer_gmm`'s N_INIT / REL_TOL in this process only (the layers above layer
0 are then still the stored ones, built with the defaults: only layer 0's row answers "what would this setting do").
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", type=Path, required=True, help="STRATA_HOME of the built workspace (SQLite)")
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--full", action="store_true", help="also scan every k without the early stop")
    ap.add_argument("--only0", action="store_true", help="layer 0 only")
    ap.add_argument("--n-init", type=int, default=None)
    ap.add_argument("--rel-tol", type=float, default=None)
    args = ap.parse_args()

    import core.algorithms.layer_gmm as gmm
    from core.algorithms.layer_reduce import umap_reduce
    from core.algorithms.layers import cluster_layer, cluster_sparsity, is_plateau
    from core.config import Settings
    from core.pipeline.factory import open_index
    from core.store import Store

    if args.n_init is not None:
        gmm.N_INIT = args.n_init
    if args.rel_tol is not None:
        gmm.REL_TOL = args.rel_tol
    settings = Settings.from_env({"STRATA_HOME": str(args.home)})
    cfg = settings.layers
    ws = Store(settings.storage.db_url).get_workspace(args.workspace)
    if ws is None:
        raise SystemExit(f"no workspace {args.workspace!r} in {args.home}")
    index = open_index(settings, ws.name, ws.embedder or "minilm")
    db = sqlite3.connect(args.home / "strata.db")

    def layer_ids(layer: int) -> list[str]:
        order = "id" if layer == 0 else "rowid"  # the stage stores a layer's summary entities in its own order
        return [r[0] for r in db.execute(f"select id from node where workspace_id = ? and kind = 'entity' and "
                                         f"layer = ? order by {order}", (ws.id, layer))]

    ids = layer_ids(0)
    vec_of = index.vectors("entity", ids)
    ids = [i for i in ids if i in vec_of]
    previous: float | None = None
    layer = 0
    print(json.dumps({"n_init": gmm.N_INIT, "rel_tol": gmm.REL_TOL}), flush=True)
    while len(ids) >= cfg.min_entities and layer < cfg.max_layers:
        t0 = time.perf_counter()
        x = np.vstack([vec_of[i] for i in ids]).astype(np.float64)
        c = cluster_layer(x, cfg, layer, previous)
        sizes = sorted((len(m) for m in c.clusters), reverse=True)
        row: dict = {"layer": layer, "entities": len(ids), "k": c.n_components, "clusters": len(c.clusters),
                     "cs": round(c.sparsity, 4), "memberships": sum(sizes), "sizes_top5": sizes[:5],
                     "singletons": sizes.count(1), "bic_scan": [(k, round(b, 1)) for k, b in c.bic]}
        if args.full and len(ids) > 3:
            from threadpoolctl import threadpool_limits

            with threadpool_limits(limits=1):
                z = umap_reduce(x, min(cfg.reduce_dim, len(ids) - 2), cfg.seed)
                bics = {k: float(gmm.fit_gmm(z, k, cfg.seed).bic(z)) for k in range(1, min(len(ids), cfg.max_components))}
                best = min(bics, key=lambda k: (bics[k], k))
                probs = gmm.fit_gmm(z, best, cfg.seed).predict_proba(z)
            member = probs >= cfg.membership_threshold
            member[np.arange(len(ids)), probs.argmax(axis=1)] = True
            cl = {tuple(np.flatnonzero(member[:, j]).tolist()) for j in range(best) if member[:, j].any()}
            row.update(full_scan_k=best, full_scan_cs=round(cluster_sparsity([list(t) for t in cl], len(ids)), 4),
                       full_scan_bic=[(k, round(b, 1)) for k, b in sorted(bics.items())])
        row["seconds"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(row), flush=True)
        multi = [m for m in c.clusters if len(m) >= 2]
        if args.only0 or is_plateau(c.sparsity, previous, c.n, cfg) or not multi or (len(c.clusters) == 1 and len(multi[0]) == len(ids)):
            break
        new_ids = layer_ids(layer + 1)
        if not new_ids:
            break
        vec_of.update(index.vectors("entity", new_ids))
        previous = c.sparsity
        ids = new_ids + sorted({ids[m[0]] for m in c.clusters if len(m) == 1})
        layer += 1


if __name__ == "__main__":
    main()
