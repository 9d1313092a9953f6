"""The first question after a server start, as an analyst asks it: the Ask page opened straight away (a deep link),
the question typed after `--pause` seconds, and the time from the click on Ask to HiRAG's best-evidence card (the
test driver's clock). Run it with and without the warm-up (`STRATA_WARM_UP=0`) to see what it saves.

    python -m bench.first_question --home /tmp/ev-home --workspace one --pause 4

Copies the home (the original is never written) and serves it as bench/page_times.py does; prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench.page_times import ARGS, QUESTION, serve


def main() -> None:
    from playwright.sync_api import sync_playwright

    from tests.net import free_port

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--pause", type=float, default=4.0, help="seconds between the page's drawing and the question")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="strata-first-"))
    shutil.copytree(args.home, tmp / "home")
    port = free_port()
    proc = serve(tmp / "home", port)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            pg = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
            pg.goto(f"http://127.0.0.1:{port}/ask?workspace={args.workspace}")
            pg.get_by_label("Question").wait_for(state="visible", timeout=120_000)
            time.sleep(args.pause)
            pg.get_by_label("Question").fill(QUESTION)
            t0 = time.perf_counter()
            pg.locator("[data-testid='stFormSubmitButton'] button", has_text="Ask").click()
            pg.locator(".st-key-evidence_0").wait_for(state="visible", timeout=120_000)
            took = time.perf_counter() - t0
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"pause_s": args.pause, "warm_up": os.environ.get("STRATA_WARM_UP", "1") != "0",
                      "first_answer_s": round(took, 2)}))


if __name__ == "__main__":
    main()
