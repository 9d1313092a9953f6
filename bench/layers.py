"""HiRAG summary layers of a built workspace: per layer, what Algorithm 1 (hirag.txt §4.1, §5.4) recorded and how
big the summary entities are.

    python -m bench.layers --home DIR --workspace NAME [--json]

Per layer: entities, the GMM's k and the distinct clusters it gave, cluster sparsity CS (Eq. 17), its change rate,
the stop reason where the build stopped, summary entities made from it, entities of single-member clusters carried up
to the next layer as they are (HiRAG's code), and the size distribution of those
summary entities (members per summary entity, i.e. `summarizes` edges into it: min / median / p90 / max); plus the
layers stage's wall time. Read-only: it opens the workspace's database under DIR and changes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from pathlib import Path

import numpy as np


def _sizes(values: list[int]) -> dict | None:
    if not values:
        return None
    a = np.asarray(values)
    return {"n": len(values), "min": int(a.min()), "median": float(np.median(a)),
            "p90": float(np.percentile(a, 90)), "max": int(a.max())}


def layer_figures(home: Path, workspace: str) -> dict:
    os.environ["STRATA_HOME"] = str(home)
    from sqlmodel import select

    from core.config import Settings
    from core.models import Edge, Node
    from core.stats import workspace_stats
    from core.store import Store

    settings = Settings.from_env()
    store = Store(settings.storage.db_url)
    ws = store.require_workspace(workspace)
    st = workspace_stats(store, ws)
    with store.session() as s:
        layer_of = dict(s.exec(select(Node.id, Node.layer).where(Node.workspace_id == ws.id, Node.kind == "entity",
                                                                 Node.layer > 0)).all())
        members = Counter(s.exec(select(Edge.dst).where(Edge.workspace_id == ws.id,
                                                        Edge.kind == "summarizes")).all())
    by_layer: dict[int, list[int]] = {}
    for sid, layer in layer_of.items():
        by_layer.setdefault(layer, []).append(members.get(sid, 0))
    rows = []
    for r in st["layers"]:
        row = dict(r)
        row["summary_sizes"] = _sizes(by_layer.get(r["layer"] + 1, []))  # the summary entities built from it
        rows.append(row)
    return {"workspace": workspace, "layers": rows, "stop_reason": st["stop_reason"],
            "layers_stage_s": st["stages"].get("layers"), "entities_per_layer": st["nodes"].get("entity", {})}


def format_figures(f: dict) -> str:
    out = [f"workspace {f['workspace']}: layers stage {f['layers_stage_s']} s",
           f"{'layer':>5} {'entities':>9} {'k':>7} {'clusters':>9} {'CS_i':>7} {'change':>8} {'summaries':>9}"
           f" {'carried':>7}  members per summary entity (min/median/p90/max)"]
    for r in f["layers"]:
        cs, rate, sz = r.get("cluster_sparsity"), r.get("change_rate"), r.get("summary_sizes")
        out.append(f"{r['layer']:>5} {r['entities']:>9,} {r.get('global_clusters') or 0:>7,} "
                   f"{r.get('clusters') or 0:>9,} {'-' if cs is None else f'{cs:.4f}':>7} "
                   f"{'-' if rate is None else f'{100 * rate:.1f}%':>8} {r.get('summary_entities') or 0:>9,} "
                   f"{r.get('carried') or 0:>7,}  "
                   + ("-" if not sz else f"{sz['min']}/{sz['median']:g}/{sz['p90']:g}/{sz['max']}"))
        if r.get("stop_reason"):
            out.append(f"      stopped here: {r['stop_reason']}")
    if f["stop_reason"] and not any(r.get("stop_reason") for r in f["layers"]):
        out.append(f"stopped: {f['stop_reason']}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True, type=Path, help="the STRATA_HOME the workspace was built in")
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    f = layer_figures(args.home, args.workspace)
    print(json.dumps(f) if args.json else format_figures(f))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
