"""Graph page timing on the 1M-token workspace, in a real browser (a measurement, not a test).

    python -m bench.graph_page                     # bench/out/generated, 5 warm sessions per server start
    python -m bench.graph_page --home bench/out/generated --runs 5

The workspace database is copied (SQLite backup API) into a temporary STRATA_HOME, so nothing under bench/out
changes, and `streamlit run app.py` is started there with STRATA_SAMPLE=0 (no sample workspace is created or
built beside it). Debian's chromium (Playwright, every request off the machine aborted) then, in a fresh browser
session each time, opens the app, clicks "Graph" in the sidebar and waits for the canvas frame to hold nodes
(`network.body.data.nodes.length > 0`); then clicks a community super-node where the canvas draws it and waits for
its members. Each session opens a different top-level community (the largest first), so every opening is a
cache miss on the server; two more sessions per start raise the node cap to its maximum (1,500) and open the two
largest communities.

The server is started twice: the first start has no derived index yet (`STRATA_HOME/derived`, computed on the
first open of the Graph page: that is the "first-ever" figure); the second start finds it (the "cold" figure: the
first session after a server start, Python modules and caches empty); the other sessions are "warm". Times come
from the frame itself (epoch milliseconds recorded by ui/graph_component/index.html against the page's clock at
the click): `nodes` when the new view is in vis-network's data set, `drawn` at its first paint; `seen` is when
Playwright's polling saw it (an upper bound). Results go to bench/results/graph_page.json and the section
"Graph page on the 1M-token workspace" of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from urllib.parse import urlparse

from bench.machine import machine

ROOT = Path(__file__).resolve().parent.parent
CANVAS = "iframe[title='ui.graph_canvas.strata_graph']"
SECTION = "## Graph page on the 1M-token workspace"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def start_server(home: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, STRATA_HOME=str(home), STRATA_SAMPLE="0", STRATA_BACKEND="offline", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", ANONYMIZED_TELEMETRY="False")
    env.pop("STRATA_DATABASE_URL", None)  # the app reads the SQLite copy under `home`, never a shared database
    with open(log, "ab") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.address", "127.0.0.1",
                                 "--server.port", str(port), "--server.headless", "true",
                                 "--browser.gatherUsageStats", "false"], cwd=ROOT, env=env, stdout=fh,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 90
    while not _healthy(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_server(proc)
            raise RuntimeError(f"the server did not start; see {log}")
        time.sleep(0.3)
    return proc, url


def stop_server(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session and group (start_new_session)
        proc.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)


def offline_only(route) -> None:
    u = urlparse(route.request.url)
    if u.scheme in ("data", "blob", "about") or u.hostname in ("127.0.0.1", "localhost"):
        route.continue_()
    else:
        route.abort()


def wait_view(pg, frame, old_view: str | None, t0: int) -> dict:
    """Wait for a new view in the canvas; its timings relative to `t0` (page clock, ms)."""
    cond = "window.network && window.network.body.data.nodes.length > 0 && window.strataTimes.nodes"
    if old_view is not None:
        cond += f" && window.strataView !== {json.dumps(old_view)}"
    frame.wait_for_function(f"() => {cond}", timeout=120_000, polling=10)
    seen = pg.evaluate("Date.now()")
    frame.wait_for_function("() => window.strataDrawn", timeout=120_000, polling=10)
    t = frame.evaluate("() => window.strataTimes")
    return {"nodes_s": (t["nodes"] - t0) / 1000, "drawn_s": (t["drawn"] - t0) / 1000, "seen_s": (seen - t0) / 1000,
            "n": frame.evaluate("() => window.network.body.data.nodes.length")}


@contextlib.contextmanager
def app_page(browser, url: str) -> Iterator[tuple]:
    """A fresh browser session (every request off the machine aborted) on the app's first page, settled; yields
    (page, the JavaScript errors it raises)."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
    ctx.route("**/*", offline_only)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    try:
        pg.goto(url)
        pg.locator("h1", has_text="Workspaces").wait_for(timeout=120_000)
        pg.wait_for_timeout(1500)  # let the first page settle
        yield pg, errors
    finally:
        ctx.close()


def session(browser, url: str, rank: int, cap_max: bool = False) -> dict:
    """One fresh browser session: the app, then Graph from the sidebar, then the `rank`-th largest super-node."""
    with app_page(browser, url) as (pg, errors):
        t0 = pg.evaluate("Date.now()")
        pg.locator("[data-testid='stSidebarNav'] a", has_text="Graph").first.click()
        canvas = pg.locator(CANVAS)
        canvas.wait_for(state="attached", timeout=120_000)
        frame = canvas.element_handle().content_frame()
        nav = wait_view(pg, frame, None, t0)
        if cap_max:  # the node cap slider to its maximum (End key on its thumb)
            view = frame.evaluate("() => window.strataView")
            slider = pg.get_by_role("slider").first
            slider.focus()
            pg.keyboard.press("End")
            assert slider.evaluate("e => e.value === e.max"), "the node cap is not at its maximum"
            pg.wait_for_timeout(3000)  # the rerun it causes (the overview's 60 super-nodes are below either cap)
            assert frame.evaluate("() => window.strataView") == view, "the overview changed with the cap"
        frame.wait_for_function("() => window.strataStable === true", timeout=60_000)
        nodes = frame.evaluate("() => window.network.body.data.nodes.get().map(n => [n.id, n.members || 0])")
        target = sorted(nodes, key=lambda n: (-n[1], n[0]))[rank % len(nodes)]
        canvas.scroll_into_view_if_needed()
        pos = frame.evaluate(f"() => window.network.canvasToDOM(window.network.getPositions([{json.dumps(target[0])}])"
                             f"[{json.dumps(target[0])}])")
        box = canvas.bounding_box()
        view = frame.evaluate("() => window.strataView")
        t0 = pg.evaluate("Date.now()")
        pg.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])
        opened = wait_view(pg, frame, view, t0)
        opened["members"] = target[1]
        return {"nav": nav, "open": opened, "errors": errors}


def run(home: Path, runs: int) -> dict:
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="strata-graph-bench-"))
    src, dst = sqlite3.connect(home / "strata.db"), sqlite3.connect(tmp / "strata.db")
    src.backup(dst)
    src.close()
    names = [r[0] for r in dst.execute("SELECT name FROM workspace")]
    dst.close()
    if names != ["generated"]:  # the app opens on the only workspace there is
        raise SystemExit(f"expected one workspace named 'generated' in {home}, found {names}")
    log = tmp / "server.log"
    out: dict = {"phases": {}}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                         args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            try:
                rank = 0
                for phase in ("first start (no derived index)", "second start (derived index on disk)"):
                    proc, url = start_server(tmp, log)
                    try:
                        results = []
                        for i in range(1 + runs):
                            results.append(session(browser, url, rank))
                            rank += 1
                            print(phase, i, json.dumps(results[-1]), flush=True)
                        # the cap at its maximum: the two largest communities, drawn to the full cap
                        big = [session(browser, url, j, cap_max=True) for j in range(2)]
                        print(phase, "cap max", json.dumps(big), flush=True)
                        out["phases"][phase] = {"sessions": results, "cap_max": big}
                    finally:
                        stop_server(proc)
            finally:
                browser.close()
        out["derived_files"] = [p.name for p in (tmp / "derived").glob("*.npz")]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the copy of the database (about 0.5 GB)
    return out


def _stats(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s / {max(xs):.2f} s" if xs else "–"


def report(res: dict, command: str) -> list[str]:
    lines = [SECTION, "",
             "Time from a click to the drawing, in a real browser (Debian chromium through Playwright, headless, every "
             "request off the machine aborted), on a copy of the `generated` workspace (~246k nodes, 1.7M edges; "
             "leiden levels 0-3 with 59 / 981 / 5,311 / 4,038 communities). *nodes*: the new view is in the canvas "
             "frame's vis-network data set (`network.body.data.nodes.length > 0`); *drawn*: its first paint; "
             "*seen*: when Playwright's polling saw it. Navigation: from the click on \"Graph\" in the sidebar "
             "(the page opens on the 60 top communities as super-nodes); opening: from the click on a super-node "
             "in the canvas to its child communities and members (node cap 500, the default; then 1,500, the "
             "maximum), a different community each session, so each opening is computed on the server.", "",
             f"* command: `{command}`", f"* machine: {res.get('machine', machine())}",
             f"* date: {res.get('date', date.today().isoformat())}",
             "* 1-minute load average before / after the run (other work on the machine): "
             + " / ".join(f"{x:.2f}" for x in res.get("load_average", [])), "",
             "| server | session | navigation: nodes | drawn | seen | opening: nodes | drawn | seen | nodes drawn |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for phase, data in res["phases"].items():
        first, warm, big = data["sessions"][0], data["sessions"][1:], data["cap_max"]
        rows = [("first session", [first])] + ([(f"warm, median / max of {len(warm)}", warm)] if warm else [])
        rows += [(f"warm, cap 1,500, median / max of {len(big)}", big)]
        for label, ss in rows:
            cells = []
            for part in ("nav", "open"):
                for k in ("nodes_s", "drawn_s", "seen_s"):
                    xs = [s[part][k] for s in ss]
                    cells.append(f"{xs[0]:.2f} s" if len(xs) == 1 else _stats(xs))
            n = sorted({s["open"]["n"] for s in ss})
            lines.append(f"| {phase} | {label} | " + " | ".join(cells) + f" | {', '.join(map(str, n))} |")
    errors = sorted({e for d in res["phases"].values() for s in d["sessions"] + d["cap_max"] for e in s["errors"]})
    lines += ["", "Why the first figures differ: on the first server start the Graph page computes the explorer's "
              "index of the workspace (community sizes, memberships, entity links and the aggregated links between "
              "communities, one pass over the membership and relationship edges, about 2 s here) and writes it to "
              "`STRATA_HOME/derived`; every later start reads that file (tens of milliseconds). The first session "
              "after any start also imports the page's modules and fills Streamlit's caches. After that, a "
              "navigation re-renders cached views and an opening reads only the opened community's rows.",
              "", f"JavaScript errors: {'none' if not errors else '; '.join(errors)}."]
    return lines


def write_section(lines: list[str], section: str = SECTION) -> None:
    """Replace `section` of docs/BENCHMARKS.md with `lines` (or append it)."""
    path = ROOT / "docs" / "BENCHMARKS.md"
    text = path.read_text()
    start = text.find(section)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"
    else:
        end = text.find("\n## ", start + len(section))
        text = text[:start] + "\n".join(lines) + "\n" + (text[end:] if end >= 0 else "")
    path.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, default=ROOT / "bench" / "out" / "generated")
    ap.add_argument("--runs", type=int, default=5, help="warm sessions per server start")
    args = ap.parse_args()
    command = "python -m bench.graph_page" + (f" --runs {args.runs}" if args.runs != 5 else "")
    load_before = os.getloadavg()[0]
    res = run(args.home, args.runs)
    res["load_average"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    res.update(command=command, machine=machine(), date=date.today().isoformat())
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "graph_page.json").write_text(json.dumps(res, indent=1))
    write_section(report(res, command))
    print("\n".join(report(res, command)))


if __name__ == "__main__":
    main()
