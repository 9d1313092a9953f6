"""Shared fixtures of the real-browser tests: `streamlit run app.py` on 127.0.0.1 and a free port (`app_server` on
a copy of the session's built sample, `fresh_app_server` on a fresh STRATA_HOME where the sample builds on first
start; one per test module), Debian's chromium driven by Playwright (`browser`), and a page whose every request that
leaves the machine is aborted (`page`). The server and every build worker it started are
stopped at the end of the module."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import psutil
import pytest

from tests.net import free_port

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
# A page switch on a busy 2-core CI machine (a build worker running beside the server) can take longer than
# Playwright's 5 s default; every expectation without its own timeout waits this long instead.
EXPECT_TIMEOUT_MS = 30_000


# -- the server ---------------------------------------------------------------------------------------------------

def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            return r.status == 200 and r.read().decode().strip() == "ok"
    except OSError:
        return False


def _ours(proc: psutil.Process, home: Path) -> bool:
    """A process started for this test: its STRATA_HOME is our temporary home."""
    try:
        env_home = proc.environ().get("STRATA_HOME")
    except (psutil.Error, OSError):
        return False
    return env_home is not None and Path(env_home).resolve() == home.resolve()


def _strata_processes(server: subprocess.Popen, home: Path) -> list[psutil.Process]:
    """The server, everything it started (build workers run in sessions of their own, so a process-group kill
    misses them), and any process whose environment names our STRATA_HOME or whose pid a BuildRun row recorded."""
    found: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(server.pid)
        found[root.pid] = root
        for child in root.children(recursive=True):
            found[child.pid] = child
    # Workers outlive a dead server (re-parented to init): find them by the pid their BuildRun recorded and by a
    # scan of every process for our STRATA_HOME; a pid counts only while its process has that environment.
    candidates: set[int] = set()
    db = home / "strata.db"
    if db.exists():
        with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(db, timeout=5)) as con:
            candidates |= {pid for (pid,) in con.execute("select pid from buildrun where pid is not null")}
    candidates |= set(psutil.pids())
    for pid in candidates - set(found) - {os.getpid()}:
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(pid)
            if _ours(p, home):
                found[pid] = p
    return list(found.values())


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except (psutil.Error, OSError):
        return []


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _stop(server: subprocess.Popen, home: Path) -> None:
    procs = _strata_processes(server, home)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.pid, signal.SIGTERM)  # the server's own group (start_new_session=True)
    for p in procs:  # workers: each leads its own session and group
        with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
            if p.pid != server.pid and os.getpgid(p.pid) == p.pid:
                os.killpg(p.pid, signal.SIGTERM)
            else:
                p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=10)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.pid, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=10)
    with contextlib.suppress(subprocess.TimeoutExpired):
        server.wait(timeout=10)
    left = [p for p in _strata_processes(server, home) if _alive(p)]
    assert not left, f"processes survived the teardown: {[(p.pid, _cmdline(p)) for p in left]}"


def _launch(home: Path, env_extra: dict[str, str], args: tuple[str, ...] = (),
            port: int | None = None) -> tuple[subprocess.Popen, str, Path]:
    """`streamlit run app.py` on 127.0.0.1 and `port` (else a free one) with STRATA_HOME `home` and `env_extra`,
    answering its health check: (the server, its URL, its log)."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    env.pop("FORWARDED_ALLOW_IPS", None)
    env.update(STRATA_HOME=str(home), STRATA_BACKEND="offline", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               ANONYMIZED_TELEMETRY="False", STREAMLIT_BROWSER_GATHER_USAGE_STATS="false",
               # the Ask page's background warm-up shares the server's interpreter lock with the page's reruns just
               # as these tests click (tests/ui/test_ask_page.py checks it; bench/first_question.py times it)
               STRATA_WARM_UP="0")
    env.update(env_extra)
    log_path = home / "server.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.address", "127.0.0.1",
             "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false", *args],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + 90
    while not healthy(url):
        if server.poll() is not None or time.monotonic() > deadline:
            _stop(server, home)
            raise AssertionError(f"streamlit did not answer its health check (exit {server.returncode}):\n"
                                 f"{log_path.read_text()[-3000:]}")
        time.sleep(0.3)
    return server, url, log_path


@pytest.fixture(scope="module")
def app_server(tmp_path_factory, sample_built):
    """`streamlit run app.py` on a free port, on a private copy of the sample built once per test session
    (tests/conftest.py `sample_built`: the same documents, offline backend and default settings as the first start's
    build, whose result it is); yields (base url, home, log path). A module that watches the first start's build
    itself takes `fresh_app_server` (each module's own sample build cost about a minute of CI)."""
    from tests.ui.conftest import sample_copy

    home, store = sample_copy(tmp_path_factory, sample_built, "strata_e2e")
    store.engine.dispose()  # the server is the copy's one user
    server, url, log_path = _launch(home, {})
    try:
        yield url, home, log_path
    finally:
        _stop(server, home)


@pytest.fixture(scope="module")
def fresh_app_server(tmp_path_factory):
    """`streamlit run app.py` on a free port with a fresh STRATA_HOME (the sample builds on first start); yields
    (base url, home, log path)."""
    home = tmp_path_factory.mktemp("strata_e2e")
    server, url, log_path = _launch(home, {})
    try:
        yield url, home, log_path
    finally:
        _stop(server, home)


@contextlib.contextmanager
def serve_app(home: Path, env_extra: dict[str, str], args: tuple[str, ...] = (), port: int | None = None):
    """`streamlit run app.py` with `env_extra` and no sample (STRATA_SAMPLE=0) unless it says otherwise; yields its
    URL; the server and any worker it started are stopped at the end."""
    server, url, _log = _launch(home, {"STRATA_SAMPLE": "0", **env_extra}, args, port)
    try:
        yield url
    finally:
        _stop(server, home)


# -- the browser --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=EXPECT_TIMEOUT_MS)

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    """A page whose every request off this machine is aborted; screenshots on failure."""
    blocked: list[str] = []

    def offline(route):
        url = route.request.url
        parsed = urlparse(url)
        if parsed.scheme in ("data", "blob", "about") or parsed.hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            blocked.append(url)
            route.abort()

    ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
    ctx.route("**/*", offline)
    pg = ctx.new_page()
    pg.set_default_timeout(EXPECT_TIMEOUT_MS)
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.blocked = blocked  # type: ignore[attr-defined]
    pg.js_errors = errors  # type: ignore[attr-defined]
    yield pg
    if blocked:
        print("requests aborted (not local):", *sorted(set(blocked))[:20], sep="\n  ")
    ctx.close()


def new_page(browser, headers: dict[str, str] | None = None):
    """A page in a fresh context (its own cookies): requests off this machine aborted."""
    def offline(route):
        parsed = urlparse(route.request.url)
        if parsed.scheme in ("data", "blob", "about") or parsed.hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            route.abort()

    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, extra_http_headers=headers or {})
    ctx.route("**/*", offline)
    pg = ctx.new_page()
    pg.set_default_timeout(EXPECT_TIMEOUT_MS)
    return pg


def open_page(pg, title: str, attempts: int = 3) -> None:
    """Open a page from the sidebar navigation and wait for its title. The Build page reruns itself once when a
    build ends, and a click landing during that rerun can be dropped by Streamlit; a user clicks again, so do we."""
    from playwright.sync_api import expect

    heading = pg.locator("h1", has_text=title)
    for i in range(attempts):
        pg.locator("[data-testid='stSidebarNav'] a", has_text=title).first.click()
        try:
            expect(heading).to_be_visible(timeout=15_000)
            return
        except AssertionError:
            if i == attempts - 1:
                raise


# The sample's build on first start, on a busy 2-core machine. STRATA_E2E_BUILD_TIMEOUT_S raises it for a run with a
# slow embedder runtime forced (torch-bf16 where the CPU only emulates bfloat16: about 150 s for its embed stage).
BUILD_TIMEOUT_MS = int(float(os.environ.get("STRATA_E2E_BUILD_TIMEOUT_S", "180")) * 1000)


def wait_for_sample_build(pg, url: str) -> None:
    """Open the Build page and wait until the sample's first-start build has finished (fail at once if it failed
    or stopped)."""
    import re

    from playwright.sync_api import expect

    pg.goto(url.rstrip("/") + "/build")
    expect(pg.locator("h1", has_text="Build")).to_be_visible(timeout=60_000)
    done = pg.locator("[data-testid='stAlert']").filter(
        has_text=re.compile(r"Build \d+ finished|Build failed|stopped without finishing"))
    expect(done.first).to_be_visible(timeout=BUILD_TIMEOUT_MS)
    assert re.search(r"Build \d+ finished", done.first.inner_text()), done.first.inner_text()


ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


def shot(pg, name: str) -> Path:
    """A screenshot of the whole app into tests/e2e/artifacts/NAME.png (Streamlit scrolls inside its own container,
    so a full-page shot is one viewport: the viewport grows for it instead). Never raises: a failed screenshot must
    not hide the failure it documents."""
    out = ARTIFACTS / f"{name}.png"
    with contextlib.suppress(Exception):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        size = pg.viewport_size
        pg.set_viewport_size({"width": size["width"], "height": 2400})
        pg.wait_for_timeout(300)
        pg.screenshot(path=str(out))
        pg.set_viewport_size(size)
    return out


def assert_page_clean(pg) -> None:
    """No Streamlit exception box on the page and no JavaScript error so far."""
    from playwright.sync_api import expect

    expect(pg.locator("[data-testid='stException']")).to_have_count(0)
    assert not pg.js_errors, pg.js_errors


CANVAS = "iframe[title='ui.graph_canvas.strata_graph']"  # the canvas component every graph is drawn in


def canvas_frame(pg, locator: str = CANVAS, timeout_s: float = 60.0):
    """The frame of the first canvas matching `locator`, once its vis-network holds a drawing.

    The frame is looked up again on every try: a rerun that lands after a page switch can replace the component's
    iframe, and a handle to the old one never sees a drawing (it is detached)."""
    import time

    from playwright.sync_api import Error as PlaywrightError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            handle = pg.locator(locator).first.element_handle(timeout=10_000).content_frame()
            if handle is not None and not handle.is_detached():
                handle.wait_for_function("() => window.network && window.network.body.data.nodes.length > 0",
                                         timeout=5_000)
                return handle
        except PlaywrightError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"no drawing in {locator} after {timeout_s:.0f} s")
        pg.wait_for_timeout(250)


def canvas_nodes(pg, locator: str = CANVAS) -> list[dict]:
    """What the canvas draws: each node's id, kind, label, role and whether it is highlighted as gold."""
    return canvas_frame(pg, locator).evaluate(
        "() => window.network.body.data.nodes.get().map(n => ({id: n.id, kind: n.kind, label: n.label, "
        "role: n.role, gold: !!n.gold}))")


def first_clickable(pg, node_ids: list[str], locator: str = CANVAS) -> str:
    """The first of `node_ids` that a click at its drawn place reaches (not covered by another node)."""
    import json

    frame = canvas_frame(pg, locator)
    frame.wait_for_function("() => window.strataStable === true", timeout=30_000)
    for node_id in node_ids:
        if frame.evaluate(f"() => window.network.getNodeAt(window.network.canvasToDOM(window.network.getPositions("
                          f"[{json.dumps(node_id)}])[{json.dumps(node_id)}])) === {json.dumps(node_id)}"):
            return node_id
    raise AssertionError(f"none of {len(node_ids)} nodes can be clicked: each is covered by another")


def _drawn_at(frame, node_id: str) -> dict:
    import json

    return frame.evaluate(f"() => window.network.canvasToDOM(window.network.getPositions([{json.dumps(node_id)}])"
                          f"[{json.dumps(node_id)}])")


def on_top(pg, node_id: str, locator: str = CANVAS) -> bool:
    """Whether a click where the settled canvas draws `node_id` lands on it (no other node drawn over it)."""
    import json

    frame = canvas_frame(pg, locator)
    frame.wait_for_function("() => window.strataStable === true", timeout=30_000)
    return frame.evaluate(f"(p) => window.network.getNodeAt(p) === {json.dumps(node_id)}", _drawn_at(frame, node_id))


def click_node(pg, node_id: str, locator: str = CANVAS) -> None:
    """Click `node_id` where the canvas draws it, once the drawing has settled."""
    frame = canvas_frame(pg, locator)
    canvas = pg.locator(locator).first
    canvas.scroll_into_view_if_needed()
    assert on_top(pg, node_id, locator)
    pos = _drawn_at(frame, node_id)
    box = canvas.bounding_box()
    pg.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])
