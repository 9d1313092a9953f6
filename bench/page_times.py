"""Each page's first useful drawing, in a real browser, on a built workspace (issue 39's goal: under 2 s each).

    python -m bench.page_times --home bench/out/workspaces-hotpotqa-240/home --workspace first --runs 3

Copies the home (the original is never written), serves `streamlit run app.py` on it, and opens each page in a fresh
browser context (a new session, as a first visit) of Debian's chromium. The clock starts at navigation and stops when
the page's useful element is drawn: Workspaces its documents table, Build its verdict, Hierarchy and Quality their
first chart, Graph its canvas, Evaluate its results table; then Ask with three strategies (HiRAG, GraphRAG local,
dense), from the click on Ask to the three answers' best-evidence cards. Each time is read twice: by the page's own
clock (`WATCH`: the animation frame that first holds the element, before it is painted) and when the test driver's
wait noticed it. The first run of each page after the server starts is reported apart (caches are cold). Results in
bench/results/page-times.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.machine import commit, machine

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "page-times.json"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
PAGES = {  # url path -> what shows the page is useful
    "": "[data-testid='stDataFrame']",
    "build": ".st-key-build_verdict",
    "hierarchy": "[data-testid='stVegaLiteChart'] [role='graphics-symbol']",
    "graph": "iframe",
    "quality": ".st-key-q_plots .vega-embed",
    "evaluate": "[data-testid='stDataFrame']",
}
QUESTION = "What team was Anna Benson's husband on?"
STRATEGIES = ["GraphRAG local search", "Naive chunk search"]  # beside the default HiRAG
EVIDENCE = ".st-key-evidence_0, .st-key-evidence_1, .st-key-evidence_2"


def serve(home: Path, port: int) -> subprocess.Popen:
    env = dict(os.environ, STRATA_HOME=str(home), STRATA_SAMPLE="0", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("STRATA_DATABASE_URL", None)
    proc = subprocess.Popen([str(ROOT / ".venv" / "bin" / "streamlit"), "run", "app.py", "--server.address",
                             "127.0.0.1", "--server.port", str(port), "--server.headless", "true"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import urllib.request

    for _ in range(300):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1):
                return proc
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the app did not start")


# The page's own clock: at every animation frame (just before the browser paints it) the first moment the wanted
# elements are present with a box, in ms since the navigation began (performance.now()). The test driver's wait
# polls from outside, and on a page whose main thread is busy (the graph's physics settling right after its first
# drawing) it notices the element up to half a second after it was painted: both are reported.
WATCH = """(() => {
  window.__seen = {};
  window.__watch = (name, selector, n) => {
    const tick = () => {
      const els = [...document.querySelectorAll(selector)].filter(e => {
        const b = e.getBoundingClientRect(); return b.width > 0 && b.height > 0; });
      if (els.length >= n) { window.__seen[name] = performance.now(); } else { requestAnimationFrame(tick); }
    };
    requestAnimationFrame(tick);
  };
  document.addEventListener("DOMContentLoaded", () => { if (window.__want) window.__watch("page", ...window.__want); });
  document.addEventListener("click", () => { window.__seen.click = performance.now(); }, true);
})()"""


def _context(browser, want: tuple[str, int] | None = None):
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    ctx.add_init_script((f"window.__want = {json.dumps(list(want))};" if want else "") + WATCH)
    return ctx, ctx.new_page()


def timed_page(browser, url: str, selector: str) -> tuple[float, float]:
    """(seen by the driver, drawn by the page's clock), seconds from the navigation."""
    ctx, pg = _context(browser, (selector, 1))
    t0 = time.perf_counter()
    pg.goto(url)
    pg.locator(selector).first.wait_for(state="visible", timeout=120_000)
    took = time.perf_counter() - t0
    pg.wait_for_function("() => window.__seen.page !== undefined", timeout=120_000)
    drawn = pg.evaluate("() => window.__seen.page") / 1000
    ctx.close()
    return took, drawn


def timed_ask(browser, url: str) -> tuple[float, float]:
    """(seen by the driver, drawn by the page's clock), seconds from the click on Ask to three answers' evidence."""
    ctx, pg = _context(browser)
    pg.goto(url)
    box = pg.locator("[data-testid='stMultiSelect']", has_text="Strategies")
    box.wait_for(state="visible", timeout=120_000)
    for label in STRATEGIES:
        box.locator("input").first.click()
        pg.get_by_role("option", name=label, exact=True).click()
    pg.keyboard.press("Escape")
    pg.get_by_label("Question").fill(QUESTION)
    pg.evaluate(f"() => window.__watch('answers', {json.dumps(EVIDENCE)}, 3)")
    t0 = time.perf_counter()
    pg.locator("[data-testid='stFormSubmitButton'] button", has_text="Ask").click()
    pg.get_by_role("heading", name=re.compile(r"^Answer · ")).nth(2).wait_for(state="visible", timeout=120_000)
    for i in range(3):
        pg.locator(f".st-key-evidence_{i}").wait_for(state="visible", timeout=120_000)
    took = time.perf_counter() - t0
    pg.wait_for_function("() => window.__seen.answers !== undefined", timeout=120_000)
    drawn = pg.evaluate("() => window.__seen.answers - window.__seen.click") / 1000
    ctx.close()
    return took, drawn


def main() -> None:
    from playwright.sync_api import sync_playwright

    from tests.net import free_port

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="strata-pages-"))
    home = tmp / "home"
    shutil.copytree(args.home, home)
    port = free_port()
    proc = serve(home, port)
    base = f"http://127.0.0.1:{port}"
    out: dict[str, dict] = {}
    load = [round(os.getloadavg()[0], 1)]  # the machine is shared: its 1-minute load before and after, reported
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            for path, selector in [*PAGES.items(), ("ask", "")]:
                url = f"{base}/{path}?workspace={args.workspace}"
                both = [timed_ask(browser, url) if path == "ask" else timed_page(browser, url, selector)
                        for _ in range(args.runs + 1)]
                times, drawn = [t for t, _ in both], [d for _, d in both]
                out[path or "workspaces"] = {"first_s": round(times[0], 2),
                                             "median_s": round(statistics.median(times[1:]), 2),
                                             "runs_s": [round(t, 2) for t in times[1:]],
                                             "drawn_first_s": round(drawn[0], 2),
                                             "drawn_median_s": round(statistics.median(drawn[1:]), 2),
                                             "drawn_runs_s": [round(t, 2) for t in drawn[1:]]}
                print(path or "workspaces", out[path or "workspaces"], file=sys.stderr)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    load.append(round(os.getloadavg()[0], 1))
    res = {"command": "python -m bench.page_times " + " ".join(sys.argv[1:]), "machine": machine(),
           "date": time.strftime("%Y-%m-%d"), "commit": commit(), "load_1min": load, "pages": out}
    RESULTS.write_text(json.dumps(res, indent=1))


def report(res: dict) -> list[str]:
    lines = ["## Pages' first useful drawing (issue 39)", "", f"* command: `{res['command']}`",
             f"* machine: {res['machine']}", f"* date: {res['date']}, commit {res['commit']}"
             + (f"; 1-minute load average {res['load_1min'][0]} before, {res['load_1min'][1]} after (a shared "
                "machine)" if res.get("load_1min") else ""),
             "* a fresh browser session per visit; Ask: from the click to three answers' evidence (HiRAG, GraphRAG "
             "local, dense)", "* drawn: the page's own clock (the first animation frame holding the element); seen: "
             "when the test driver's wait noticed it", "",
             "| page | first visit after the server starts (drawn / seen) | median of the next, drawn | seen | runs, "
             "drawn |", "|---|---|---|---|---|"]
    for page, r in res["pages"].items():
        if "drawn_median_s" not in r:  # a measurement from before the page's own clock was read
            lines.append(f"| {page} | – / {r['first_s']} s | – | {r['median_s']} s | – |")
            continue
        lines.append(f"| {page} | {r['drawn_first_s']} / {r['first_s']} s | **{r['drawn_median_s']} s** | "
                     f"{r['median_s']} s | {', '.join(map(str, r['drawn_runs_s']))} |")
    return lines + [""]


if __name__ == "__main__":
    main()
