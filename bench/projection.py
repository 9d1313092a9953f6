"""The 10M-token build projected from measured builds of the generated corpus (issue 36).

    python -m bench.projection bench/results/build-generated-dask-s31.json bench/results/build-generated-2m.json \
        bench/results/build-generated-4m.json --tokens 10000000

Each stage's wall time, CPU seconds and peak memory (of every process of the build together, while the stage ran)
is fitted as a power of the corpus size, y = a * tokens^b, by least squares on the logarithms of the builds given
(two builds: the line through both). The exponent says how the stage grows: 1 linear, above 1 faster than its input
(a global step whose cost or memory grows faster than the corpus is the one to block or stream). The projection is
an extrapolation of those fits, no more; it is printed as a Markdown table and written to bench/results/projection.json.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results" / "projection.json"


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(a, b) of y = a * x^b, least squares on log y = log a + b log x; points with y <= 0 are left out."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2:
        return (ys[-1] if ys else 0.0), 0.0
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    b = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx else 0.0
    return math.exp(my - b * mx), b


def project(builds: list[dict], tokens: int) -> dict:
    """Per stage: the measured figures, the exponent of each fit and the projected wall, CPU and peak at `tokens`."""
    xs = [float(b["corpus"]["tokens"]) for b in builds]
    stages = [s for s in builds[-1]["stages_s"] if all(s in b["stages_s"] for b in builds)]
    rows = {}
    for s in stages:
        row: dict = {}
        for name, field in (("wall_s", "stages_s"), ("cpu_s", "stages_cpu_s"), ("peak_mib", "stages_peak_rss_mib")):
            ys = [float(b.get(field, {}).get(s, 0.0)) for b in builds]
            a, e = fit(xs, ys)
            row[name] = {"measured": ys, "exponent": round(e, 2), "projected": round(a * tokens ** e, 1)}
        rows[s] = row
    total = [float(b["wall_s"]) for b in builds]
    a, e = fit(xs, total)
    peak = [float(b["peak_rss_mib"]) for b in builds]
    pa, pe = fit(xs, peak)
    return {"tokens": xs, "target_tokens": tokens, "stages": rows,
            "wall_s": {"measured": total, "exponent": round(e, 2), "projected": round(a * tokens ** e, 1),
                       "sum_of_stages": round(sum(r["wall_s"]["projected"] for r in rows.values()), 1)},
            "peak_mib": {"measured": peak, "exponent": round(pe, 2), "projected": round(pa * tokens ** pe, 1)},
            "builds": [b.get("command", "") + f" (commit {b.get('commit', '?')})" for b in builds]}


def table(p: dict) -> list[str]:
    sizes = " / ".join(f"{t / 1e6:.3g}M" for t in p["tokens"])
    lines = [f"| stage | wall s ({sizes}) | exponent | wall s at {p['target_tokens'] / 1e6:g}M | CPU s ({sizes}) | "
             f"exponent | peak MiB ({sizes}) | exponent | peak MiB at {p['target_tokens'] / 1e6:g}M |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s, r in p["stages"].items():
        w, c, m = r["wall_s"], r["cpu_s"], r["peak_mib"]
        lines.append(f"| {s} | {' / '.join(f'{v:,.0f}' for v in w['measured'])} | {w['exponent']} | "
                     f"{w['projected']:,.0f} | {' / '.join(f'{v:,.0f}' for v in c['measured'])} | {c['exponent']} | "
                     f"{' / '.join(f'{v:,.0f}' for v in m['measured'])} | {m['exponent']} | {m['projected']:,.0f} |")
    w, m = p["wall_s"], p["peak_mib"]
    lines.append(f"| **build** | {' / '.join(f'{v:,.0f}' for v in w['measured'])} | {w['exponent']} | "
                 f"{w['projected']:,.0f} (stages summed: {w['sum_of_stages']:,.0f}) | | | "
                 f"{' / '.join(f'{v:,.0f}' for v in m['measured'])} | {m['exponent']} | {m['projected']:,.0f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", nargs="+", type=Path, help="bench/results/build-*.json of the generated corpus")
    ap.add_argument("--tokens", type=int, default=10_000_000)
    args = ap.parse_args()
    builds = sorted((json.loads(p.read_text()) for p in args.builds), key=lambda b: b["corpus"]["tokens"])
    p = project(builds, args.tokens)
    OUT.write_text(json.dumps(p, indent=1))
    print("\n".join(table(p)))


if __name__ == "__main__":
    main()
