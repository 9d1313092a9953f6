"""Time the Quality page's work on a built workspace: community metrics per method and level, what-if variant runs,
the comparison, and (with --promote) a promote. The workspace home is copied to a temporary folder first, so the
source (e.g. bench/out/generated) is only read.

    .venv/bin/python -m bench.quality --home bench/out/generated --workspace generated [--promote] [--out f.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from datetime import date
from pathlib import Path

from bench.machine import machine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", required=True, type=Path)
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--promote", action="store_true", help="also promote the resolution-2 variant (in the copy)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if os.environ.get("STRATA_CHROMA_URL"):  # the copy would share (and a promote would change) the server's vectors
        ap.error("bench.quality copies the home with its embedded vectors; unset STRATA_CHROMA_URL")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    work = Path(tempfile.mkdtemp(prefix="strata_quality_"))
    try:
        t = time.perf_counter()
        shutil.copytree(a.home, work / "home")
        command = (f"python -m bench.quality --home {a.home} --workspace {a.workspace}"
                   + (" --promote" if a.promote else "") + (f" --out {a.out}" if a.out else ""))
        out: dict = {"workspace": a.workspace, "command": command, "machine": machine(),
                     "date": date.today().isoformat(), "copy_s": round(time.perf_counter() - t, 2)}
        out |= _measure(work / "home", a.workspace, a.promote)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(out, indent=2)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")


def _measure(home: Path, name: str, do_promote: bool) -> dict:
    from core.config import Settings
    from core.pipeline.factory import open_index
    from core.quality import variants as V
    from core.quality.compare import compare
    from core.quality.data import build_settings, load_base, load_levels
    from core.quality.metrics import level_metrics
    from core.quality.promote import promote, promote_context
    from core.store import Store

    settings = Settings()
    settings.storage.home = home
    store = Store(settings.storage.db_url)
    ws = store.require_workspace(name)
    index = open_index(settings, ws.name, ws.embedder)
    bs = build_settings(store, ws.id, settings)
    out: dict = {"metrics": {}, "variants": {}}
    t = time.perf_counter()
    base = load_base(store, index, ws.id)
    out["load_graph_and_vectors_s"] = round(time.perf_counter() - t, 2)
    out["entities"], out["links"] = len(base.ids), int(len(base.pairs))
    for method in ("leiden", "attributed", "hirag"):
        t = time.perf_counter()
        levels = load_levels(store, index, ws.id, method, bs, base)
        row = {"load_levels_s": round(time.perf_counter() - t, 2), "levels": {}}
        for ld in levels:
            m = level_metrics(ld, bs.quality)
            row["levels"][str(ld.level)] = {"communities": len(ld.groups), "metrics_s": round(m.seconds, 3),
                                            "modularity": round(m.figures["modularity"], 4)}
        out["metrics"][method] = row
    d = V.defaults(store, ws.id, settings)
    for vname, vs in [("default", d), ("resolution-2", V.VariantSettings(**{**d.__dict__, "resolution": 2.0})),
                      ("knn", V.VariantSettings(**{**d.__dict__, "knn": True}))]:
        t = time.perf_counter()
        last = list(V.run_variant(store, index, ws, vname, vs, settings, base=base))[-1]
        out["variants"][vname] = {"run_s": round(time.perf_counter() - t, 2),
                                  "communities_per_level": last.counts["communities_per_level"],
                                  "steps_s": last.counts["steps_s"]}
    t = time.perf_counter()
    rows = compare(store, index, ws, list(out["variants"]), settings, base=base)
    out["compare_s"] = round(time.perf_counter() - t, 2)
    out["nmi"] = {f"{r['partition']}@{r['level']}": round(r["nmi"], 4) for r in rows if r["partition"] != V.CURRENT}
    if do_promote:
        from core.backends.embedders import MiniLMEmbedder

        ctx = promote_context(store, ws, settings, MiniLMEmbedder())
        steps: dict[str, float] = {}
        t = last_t = time.perf_counter()
        phase = "start"
        for p in promote(ctx, "resolution-2"):
            now = time.perf_counter()
            head = p.message.split(":")[0] if ":" in p.message else "promote"
            steps[phase] = round(steps.get(phase, 0.0) + now - last_t, 2)
            phase, last_t = head, now
        out["promote_s"] = round(time.perf_counter() - t, 2)
        out["promote_steps_s"] = steps
    return out


if __name__ == "__main__":
    main()
