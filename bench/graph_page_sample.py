"""Graph page timing on the 15-document sample, in a real browser (a measurement, not a test).

    python -m bench.graph_page_sample              # 3 server starts, 5 warm sessions each

The sample is built once into a temporary STRATA_HOME (`python -m core build`), then `streamlit run app.py` is
started there several times. In each start the first browser session is the "cold" one (the page's modules
imported and its caches filled on this open), the others are "warm". A session opens the app at its root URL,
waits for the Workspaces page, clicks "Graph" in the sidebar and records, against the page's clock at the click:
`title` when the page's title is shown, `nodes` when the canvas frame's vis-network holds the drawing, `drawn` at
its first paint (times recorded by ui/graph_component/index.html). "After the page" is drawn - title. Results go
to bench/results/graph_page_sample.json and the section "Graph page on the sample" of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

from bench.graph_page import CANVAS, app_page, start_server, stop_server, wait_view
from bench.machine import machine

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Graph page on the sample"


def session(browser, url: str) -> dict:
    with app_page(browser, url) as (pg, errors):
        t0 = pg.evaluate("Date.now()")
        pg.locator("[data-testid='stSidebarNav'] a", has_text="Graph").first.click()
        pg.locator("h1", has_text="Graph").wait_for(timeout=60_000)
        title = (pg.evaluate("Date.now()") - t0) / 1000
        canvas = pg.locator(CANVAS)
        canvas.wait_for(state="attached", timeout=60_000)
        nav = wait_view(pg, canvas.element_handle().content_frame(), None, t0)
        return {"title_s": title, **nav, "after_page_s": nav["drawn_s"] - title, "errors": errors}


def run(starts: int, runs: int) -> dict:
    from playwright.sync_api import sync_playwright

    home = Path(tempfile.mkdtemp(prefix="strata-graph-sample-"))
    env = dict(os.environ, STRATA_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    subprocess.run([sys.executable, "-m", "core", "build", "--workspace", "sample", str(ROOT / "data" / "sample")],
                   cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    out: dict = {"starts": []}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                         args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            try:
                for k in range(starts):
                    proc, url = start_server(home, home / "server.log")
                    try:
                        sessions = [session(browser, url) for _ in range(1 + runs)]
                    finally:
                        stop_server(proc)
                    print(k, json.dumps(sessions), flush=True)
                    out["starts"].append(sessions)
            finally:
                browser.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return out


def _med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s (max {max(xs):.2f} s)"


def report(res: dict, command: str) -> list[str]:
    cold = [s[0] for s in res["starts"]]
    warm = [x for s in res["starts"] for x in s[1:]]
    lines = [SECTION, "",
             "From the click on \"Graph\" in the sidebar to the drawing, in a real browser (Debian chromium through "
             "Playwright, headless, every request off the machine aborted), on the sample workspace (15 documents; "
             "the page opens on its nodes: 164 entities, communities and documents). *title*: the page's title is "
             "shown; *nodes*: the drawing is in the canvas frame's vis-network data set; *drawn*: its first paint; "
             "*after the page*: drawn minus title (target: under 1.5 s). *cold*: the first session after a server "
             "start (the page's modules imported, its caches filled); *warm*: the sessions after it.", "",
             f"* command: `{command}`", f"* machine: {res.get('machine', machine())}",
             f"* date: {res.get('date', date.today().isoformat())}",
             "* 1-minute load average before / after: " + " / ".join(f"{x:.2f}" for x in res["load_average"]), "",
             "| sessions | title | nodes | drawn | after the page |", "|---|---:|---:|---:|---:|"]
    for label, ss in ((f"cold, median of {len(cold)} server starts", cold), (f"warm, median of {len(warm)}", warm)):
        lines.append(f"| {label} | " + " | ".join(_med([s[k] for s in ss]) for k in
                                                 ("title_s", "nodes_s", "drawn_s", "after_page_s")) + " |")
    errors = sorted({e for s in cold + warm for e in s["errors"]})
    lines += ["", "Before this change the Nodes view was a pyvis page of about 1 MB (vis-network inlined) built on the "
              "server for every drawing; it now draws in the same canvas component as the Communities view, whose "
              "vis-network is a static file the browser caches, from a layout placed on the server.", "",
              f"JavaScript errors: {'none' if not errors else '; '.join(errors)}."]
    return lines


def main() -> None:
    from bench.graph_page import write_section

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5, help="warm sessions per server start")
    args = ap.parse_args()
    command = "python -m bench.graph_page_sample" + (f" --starts {args.starts}" if args.starts != 3 else "") + (
        f" --runs {args.runs}" if args.runs != 5 else "")
    load_before = os.getloadavg()[0]
    res = run(args.starts, args.runs)
    res.update(load_average=[round(load_before, 2), round(os.getloadavg()[0], 2)], command=command,
               machine=machine(), date=date.today().isoformat())
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "graph_page_sample.json").write_text(json.dumps(res, indent=1))
    write_section(report(res, command), SECTION)
    print("\n".join(report(res, command)))


if __name__ == "__main__":
    main()
