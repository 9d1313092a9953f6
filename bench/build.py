"""Offline build benchmark: wall time per stage and peak memory of the build process.

    python -m bench.build --name sample data/sample
    python -m bench.build --name hotpotqa ../shared/eval/hotpotqa/corpus.jsonl
    python -m bench.build --name generated --generate 1000000 --seed 7

Each run builds into a fresh STRATA_HOME (bench/out/<name>) with `python -m core build` in a child process,
reads the stage timings back with `python -m core stats --json` (and the stage messages, edge counts from the
database), and writes bench/results/build-<name>.json. With STRATA_DATABASE_URL set the build goes to that
database (PostgreSQL) instead of STRATA_HOME/strata.db: its workspace <name> is deleted first (unless --keep) and
the figures are read from there. `--generate N` first writes a seeded corpus of about N
tokens with bench/gen_corpus.py into a temporary folder and builds that. Peak memory is the largest resident set
of the build process and its children together, sampled every 0.1 s, and never below the kernel's own peak of the
largest single process (ru_maxrss); CPU seconds (user + system, all threads) are sampled with it and credited
to the stage running at the time, which tells a stage's own work apart from waiting on a busy machine.
`--profile FILE` runs the build under cProfile (slower; for finding hot spots, not for the recorded figures).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from bench.machine import commit, machine

ROOT = Path(__file__).resolve().parent.parent


class Sampler:
    """Samples, from a thread, the summed RSS of a process and all its descendants (`.peak`, bytes) and their CPU
    time, attributed to the build stage running at that moment (read from the workspace database): `.cpu_s`. With
    `timeline`, every sample is also kept in `.timeline` as (seconds since start, stage, units done, RSS bytes)."""

    def __init__(self, pid: int, db: str, workspace: str, every_s: float = 0.1, timeline: bool = False):
        self.pid, self.db, self.workspace, self.every_s, self.peak = pid, db, workspace, every_s, 0
        self.cpu_s: dict[str, float] = {}
        self.peak_of: dict[str, int] = {}  # stage -> peak summed RSS while it ran, bytes
        self.timeline: list[tuple[float, str, int, int]] | None = [] if timeline else None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._engine = None

    def _stage(self) -> tuple[str, int]:
        """The running stage of the workspace's latest run and its units done (("", 0) before or between)."""
        sql = ("SELECT s.stage, s.done FROM stagerun s JOIN workspace w ON w.id = s.workspace_id WHERE w.name = {mark} "
               "AND s.status = 'running' ORDER BY s.id DESC LIMIT 1")
        if self.db.startswith("sqlite:///"):  # read-only and never creating the file before the build does
            path = Path(self.db[len("sqlite:///"):])
            if not path.exists():
                return "", 0
            try:
                con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.5)
                try:
                    row = con.execute(sql.format(mark="?"), (self.workspace,)).fetchone()
                finally:
                    con.close()
            except sqlite3.Error:
                return "", 0
            return (row[0], row[1]) if row else ("", 0)
        from sqlalchemy import create_engine, text
        from sqlalchemy.exc import SQLAlchemyError

        try:
            if self._engine is None:
                self._engine = create_engine(self.db, pool_size=1, pool_pre_ping=True)
            with self._engine.connect() as conn:
                row = conn.execute(text(sql.format(mark=":ws")), {"ws": self.workspace}).fetchone()
        except SQLAlchemyError:  # tables not made yet, server busy: no stage this sample
            return "", 0
        return (row[0], row[1]) if row else ("", 0)

    def _run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        cpu: dict[int, float] = {}
        t0 = time.perf_counter()
        while not self._stop.is_set():
            total = 0
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            spent = 0.0
            for p in procs:
                try:
                    total += p.memory_info().rss
                    t = p.cpu_times()
                    now = t.user + t.system
                except psutil.Error:
                    continue
                spent += now - cpu.get(p.pid, 0.0)
                cpu[p.pid] = now
            stage, done = self._stage()
            key = stage or "(outside stages)"
            self.cpu_s[key] = self.cpu_s.get(key, 0.0) + spent
            self.peak = max(self.peak, total)
            self.peak_of[key] = max(self.peak_of.get(key, 0), total)
            if self.timeline is not None:
                self.timeline.append((round(time.perf_counter() - t0, 2), stage, done, total))
            self._stop.wait(self.every_s)

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        if self._engine is not None:
            self._engine.dispose()


def database_url(home: Path) -> str:
    """The build's database: STRATA_DATABASE_URL, else the SQLite file under the bench home."""
    return os.environ.get("STRATA_DATABASE_URL") or f"sqlite:///{home / 'strata.db'}"


def drop_workspace(url: str, name: str) -> None:
    """Delete workspace `name` from a shared database (a fresh SQLite home needs nothing)."""
    from core.store import Store

    store = Store(url)
    ws = store.get_workspace(name)
    if ws is not None:
        store.delete_workspace(ws)
    store.close()


def _db_figures(url: str, name: str) -> tuple[dict[str, int], dict[str, str]]:
    """Edge counts by kind and each stage's last message of the workspace's latest finished run."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as con:
            ws = con.execute(text("SELECT id FROM workspace WHERE name = :n"), {"n": name}).scalar()
            edges = dict(con.execute(text("SELECT kind, count(*) FROM edge WHERE workspace_id = :ws GROUP BY kind "
                                          "ORDER BY kind"), {"ws": ws}).fetchall())
            run = con.execute(text("SELECT max(id) FROM buildrun WHERE workspace_id = :ws AND status = 'done'"),
                              {"ws": ws}).scalar()
            msgs = dict(con.execute(text("SELECT stage, message FROM stagerun WHERE run_id = :r ORDER BY ordinal"),
                                    {"r": run}).fetchall()) if run is not None else {}
    finally:
        engine.dispose()
    return edges, msgs


def run_build(name: str, paths: list[str], home: Path, command: str | None = None, profile: str | None = None,
              backend: str = "offline") -> dict:
    command = command or " ".join(["python -m bench.build --name", name, *paths])
    env = dict(os.environ, STRATA_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               ANONYMIZED_TELEMETRY="False", STRATA_BACKEND=backend)
    prof = ["-m", "cProfile", "-o", str(Path(profile).resolve())] if profile else []
    cmd = [sys.executable, *prof, "-m", "core", "build", "--quiet", "--workspace", name, *paths]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = database_url(home)
    with Sampler(proc.pid, url, name) as peak:
        out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"build failed: {err[-3000:]}")
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    stats = json.loads(subprocess.run([sys.executable, "-m", "core", "stats", "--workspace", name, "--json"],
                                      cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout)
    edges, messages = _db_figures(url, name)
    stages = stats["stages"]
    return {
        "name": name,
        "command": command,
        "machine": machine(),
        "database": url.split(":", 1)[0].split("+", 1)[0],  # sqlite, postgresql
        "wall_s": round(wall, 1),
        "setup_s": round(wall - sum(stages.values()), 1),  # interpreter, model load, ingest of the files
        "peak_rss_mib": round(max(peak.peak / 2**20, peak_kb / 1024), 0),
        "stages_s": stages,
        "stages_cpu_s": {k: round(v, 1) for k, v in peak.cpu_s.items()},  # user + system, all threads
        "stages_peak_rss_mib": {k: round(v / 2**20) for k, v in peak.peak_of.items()},
        "stage_messages": messages,
        "nodes": stats["nodes"],
        "edges": edges,
        "communities": stats["communities"],
        "modularity": stats["modularity"],
        "layers": stats["layers"],
        "stop_reason": stats["stop_reason"],
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit(),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--keep", action="store_true", help="reuse bench/out/<name> (default: build afresh)")
    ap.add_argument("--generate", type=int, default=0, metavar="TOKENS",
                    help="build a generated corpus of about this many tokens (bench/gen_corpus.py)")
    ap.add_argument("--seed", type=int, default=7, help="seed of the generated corpus")
    ap.add_argument("--profile", help="write a cProfile of the build process to this file")
    ap.add_argument("--out", help="results file (default bench/results/build-<name>.json)")
    ap.add_argument("--backend", choices=["offline", "ollama", "openai"], default="offline",
                    help="language backend of the build (a model server: OLLAMA_HOST / STRATA_OPENAI_BASE_URL)")
    ap.add_argument("paths", nargs="*")
    args = ap.parse_args()
    if not args.paths and not args.generate:
        ap.error("give paths to build, or --generate TOKENS")
    home = ROOT / "bench" / "out" / args.name
    if home.exists() and not args.keep:
        shutil.rmtree(home)
    if os.environ.get("STRATA_DATABASE_URL") and not args.keep:
        drop_workspace(os.environ["STRATA_DATABASE_URL"], args.name)
    if os.environ.get("STRATA_CHROMA_URL") and not args.keep:  # a Chroma server keeps the last build's vectors
        from core.index.chroma import drop_server_workspace

        drop_server_workspace(os.environ["STRATA_CHROMA_URL"], args.name)
    command = " ".join(["python -m bench.build --name", args.name, *args.paths]) + (
        f" --backend {args.backend}" if args.backend != "offline" else "")
    corpus: dict = {}
    tmp = None
    paths = list(args.paths)
    if args.generate:
        from bench.gen_corpus import generate, write_corpus

        command += f" --generate {args.generate} --seed {args.seed}"
        tmp = Path(tempfile.mkdtemp(prefix="strata-gen-"))
        t0 = time.perf_counter()
        corpus = write_corpus(generate(args.generate, args.seed), tmp, args.seed, args.generate)
        corpus["generate_s"] = round(time.perf_counter() - t0, 1)
        paths.append(str(tmp / "corpus.jsonl"))
    try:
        result = run_build(args.name, paths, home, command, args.profile, args.backend)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    if corpus:
        result["corpus"] = corpus
    result["vectors"] = "chroma server" if os.environ.get("STRATA_CHROMA_URL") else "embedded"
    out = Path(args.out) if args.out else ROOT / "bench" / "results" / f"build-{args.name}.json"
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
