"""The command line: `python -m core build|ask|eval|stats|history|export|workspaces|share|audit|worker`, the
app's engine.

Exit status: 0 on success, 1 when the work failed (build error, unreachable model server), 2 on bad arguments or a
missing workspace (the reason on one line to stderr), 5 when a run finished with failed units (README.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core import access
from core.backends.servers import backend_kind, embedder_kind, require_servers
from core.cli_access import add_parsers as add_access_parsers
from core.cli_evaluate import add_parsers as add_evaluate_parsers
from core.config import Settings
from core.pipeline.failures import EXIT_FAILED_UNITS, print_failed
from core.protocols import BackendError
from core.secrets import redacted_output
from core.store import Store, StoreError, check_workspace_name


class UsageError(Exception):
    pass


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its one-line reason
        return 2 if exc.code else 0
    try:
        settings = Settings.from_env()
    except ValidationError as exc:
        err = exc.errors()[0]
        print(f"error: bad setting {'.'.join(map(str, err['loc']))}: {err['msg']}", file=sys.stderr)
        return 2
    if getattr(args, "backend", None):
        settings.backend.kind = args.backend
    store = Store(settings.storage.db_url)
    with redacted_output(settings):  # no secret of the settings reaches the output (core/secrets.py)
        try:
            return args.func(args, settings, store)
        except (UsageError, StoreError, ValueError, KeyError, FileNotFoundError) as exc:
            print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
            return 2
        except BackendError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("interrupted; the next build resumes where this one stopped", file=sys.stderr)
            return 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m core", description="Strata: hierarchical graph RAG engine")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="ingest files or folders into a workspace and build its graph")
    b.add_argument("--workspace", required=True)
    b.add_argument("--backend", choices=["offline", "ollama", "openai"])
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    b.add_argument("paths", nargs="*", type=Path, help="files, folders or zip archives to add first")
    b.set_defaults(func=cmd_build)
    ad = sub.add_parser("add", help="add files or folders to a workspace and update its graph (only new documents "
                                    "are extracted)")
    ad.add_argument("--workspace", required=True)
    ad.add_argument("--backend", choices=["offline", "ollama", "openai"])
    ad.add_argument("--quiet", action="store_true", help="no progress bars")
    ad.add_argument("paths", nargs="+", type=Path, help="files, folders or zip archives to add")
    ad.set_defaults(func=cmd_build)
    de = sub.add_parser("delete", help="delete documents and what only they supported, then update the graph")
    de.add_argument("--workspace", required=True)
    de.add_argument("--document", nargs="+", required=True, help="document id, external id, title or file name")
    de.add_argument("--quiet", action="store_true", help="no step lines")
    de.set_defaults(func=cmd_delete)

    a = sub.add_parser("ask", help="ask a question of a built workspace")
    a.add_argument("--workspace", required=True)
    a.add_argument("--strategy", default="hirag")
    a.add_argument("--backend", choices=["offline", "ollama", "openai"], help="answer backend (default: the build's)")
    a.add_argument("--json", action="store_true")
    a.add_argument("question")
    a.set_defaults(func=cmd_ask)

    e = sub.add_parser("eval", help="recall@k and latency of strategies over a queries file")
    e.add_argument("--workspace", required=True)
    e.add_argument("--queries", required=True, type=Path)
    e.add_argument("--k", default="2,5,10")
    e.add_argument("--strategies", default="")
    e.add_argument("--limit", type=_non_negative, default=0, help="only the first N queries")
    e.add_argument("--backend", choices=["offline", "ollama", "openai"],
                   help="backend of the strategies' language steps (default: the build's), as `ask` uses it")
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=cmd_eval)

    s = sub.add_parser("stats", help="what a workspace holds")
    s.add_argument("--workspace", required=True)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_stats)

    h = sub.add_parser("history", help="the questions asked of a workspace, newest first, or all of them as JSON")
    h.add_argument("--workspace", required=True)
    h.add_argument("--json", action="store_true", help="every question with its answer and full retrieval result")
    h.add_argument("--limit", type=_non_negative, default=20)
    h.set_defaults(func=cmd_history)

    x = sub.add_parser("export", help="export the graph (graphml, gexf, json), the communities with their reports "
                                      "(csv), one community's report (md, with --community) or the query traces")
    x.add_argument("--workspace", required=True)
    x.add_argument("--format", required=True, help="graphml, gexf, json, csv, md or traces")
    x.add_argument("--community", help="the community whose report --format md writes")
    x.add_argument("--max-text", type=_non_negative, default=0,
                   help="graph formats: cut node text to this many characters (default 0: whole)")
    x.add_argument("out", help="file to write ('-' for standard output)")
    x.set_defaults(func=cmd_export)

    add_access_parsers(sub)  # workspaces, share, audit
    add_evaluate_parsers(sub)  # evaluate

    k = sub.add_parser("worker", help="run queued builds and jobs: one (--run ID) or, long-running, any (--serve)")
    one = k.add_mutually_exclusive_group(required=True)
    one.add_argument("--run", type=int, help="claim and run this run (exit 3 when another live worker holds it)")
    one.add_argument("--serve", action="store_true",
                     help="claim the oldest queued run, or one whose worker went silent, of any workspace; repeat")
    k.add_argument("--poll", type=float, default=None, help="--serve: seconds between looks when idle (default 2)")
    k.set_defaults(func=cmd_worker)
    return p


def _non_negative(v: str) -> int:
    n = int(v)
    if n < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return n


def cmd_build(args, settings: Settings, store: Store) -> int:
    from core.pipeline.engine import engine_for
    from core.pipeline.factory import make_context
    from core.pipeline.runner import create_run, run_build
    from core.pipeline.runs import active_run, busy_message
    from core.workspace import ingest_paths

    check_workspace_name(args.workspace)
    require_servers(settings)  # fail fast (exit 1) when a model server is down, before anything is created
    if settings.storage.chroma_url:  # likewise for a Chroma server (VectorStoreUnavailable: exit 1, one line)
        from core.index.chroma import connect_server, settings_auth

        connect_server(settings.storage.chroma_url, *settings_auth(settings.storage).pair)
    ws = store.create_workspace(args.workspace)
    assert ws.id is not None  # a row read from or written to the store has its key
    access.adopt(store, ws, access.service_user(settings).name)  # a new one belongs to the service identity
    busy = active_run(store, ws)
    if busy is not None:  # one build or job (core/worker.py) of a workspace at a time
        raise UsageError(busy_message(busy, on=ws.build_version))
    if args.paths:
        rep = ingest_paths(store, ws, args.paths, settings)
        for line in rep.refusals.lines():  # one per reason, a few names each (core/ingest/refusals.py)
            print(f"refused {line}", file=sys.stderr)
        print(rep.summary(), file=sys.stderr)
    if not store.documents(ws.id):
        raise UsageError(f"workspace {ws.name!r} has no documents; pass files or folders to add")
    with engine_for(settings, store, ws.id) as engine:  # units on a local cluster unless small (engine.py)
        ctx = make_context(store, ws, settings, engine=engine)
        run = create_run(store, ws, settings)
        assert run.id is not None  # a row read from or written to the store has its key
        before = store.counts(ws.id)
        bars: dict[str, Any] = {}  # tqdm bars (tqdm ships no types)
        from tqdm import tqdm  # (pinned in requirements.txt)
        failed = False
        try:
            print(f"units run on: {engine.describe()}", file=sys.stderr)
            for ev in run_build(ctx, run.id):
                if args.quiet or not ev.stage:
                    continue
                bar = bars.get(ev.stage)
                if bar is None:
                    bar = bars[ev.stage] = tqdm(total=max(ev.total, 1), desc=f"{ev.stage:<12}", unit="", leave=True,
                                                file=sys.stderr, dynamic_ncols=True)
                if ev.total and bar.total != ev.total:
                    bar.total = ev.total
                bar.n = ev.done
                bar.set_postfix_str(ev.message[:50], refresh=True)
                if ev.status in ("done", "failed", "cancelled"):
                    bar.close()
                failed = failed or ev.status == "failed"
        except BackendError:
            raise
        except Exception as exc:
            print(f"error: build failed in a stage: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        counts = store.counts(ws.id)
        changed = {k: counts.get(k, 0) - before.get(k, 0) for k in sorted(set(counts) | set(before))
                   if counts.get(k, 0) != before.get(k, 0)}
        out = {"workspace": ws.name, "run": run.id, "counts": counts, "changed": changed,
               "failed_units": print_failed(store, ws.id, run.id, sys.stderr)}  # units the next build retries
        print(json.dumps(out))
        return 1 if failed else EXIT_FAILED_UNITS if out["failed_units"] else 0


def cmd_delete(args, settings: Settings, store: Store) -> int:
    """List the documents and what only they support, then delete them (a "delete" run, core/pipeline/delete.py)."""
    from core.pipeline.delete import delete_documents, find_documents, preview

    ws = store.require_workspace(args.workspace)
    assert ws.id is not None  # a stored workspace
    docs, missing = find_documents(store, ws.id, args.document)
    if missing:
        raise UsageError(f"no document {', '.join(map(repr, missing))} in workspace {ws.name!r}")
    for d in docs:
        print(f"deleting {d.id}  {d.title}", file=sys.stderr)
    print(f"only they support: {json.dumps(preview(store, ws.id, [d.id for d in docs]))}", file=sys.stderr)
    failed = False
    for ev in delete_documents(store, ws, settings, [d.id for d in docs]):
        if ev.status in ("done", "failed") and not args.quiet:
            print(f"[{ev.stage or 'delete'}] {ev.status} {ev.message}", file=sys.stderr)
        failed = failed or ev.status == "failed"
    print(json.dumps({"workspace": ws.name, "deleted": [d.id for d in docs], "counts": store.counts(ws.id)}))
    return 1 if failed else EXIT_FAILED_UNITS if print_failed(store, ws.id, ev.run_id, sys.stderr) else 0


def _resources(args, settings: Settings, store: Store):
    from core.pipeline.factory import workspace_embedder
    from core.workspace import open_resources

    ws = store.require_workspace(args.workspace)
    if ws.build_version == 0:
        raise UsageError(f"workspace {ws.name!r} has not been built yet (python -m core build --workspace {ws.name})")
    settings.embed.embedder = embedder_kind(ws.embedder)  # type: ignore[assignment]
    return open_resources(store, ws, settings, workspace_embedder(settings, ws.name, strict=False))


def cmd_ask(args, settings: Settings, store: Store) -> int:
    from core.pipeline.factory import make_backend
    from core.retrieval.base import get_strategy
    from core.workspace import ask

    get_strategy(args.strategy)  # unknown names fail before any loading
    res = _resources(args, settings, store)
    if not args.backend:
        settings.backend.kind = backend_kind(res.ws.backend)  # type: ignore[assignment]
    require_servers(settings)
    r, a = ask(res, make_backend(settings, store), args.question, args.strategy)
    if args.json:
        d = r.to_dict()
        out = {"answer": a.text, "strategy": r.strategy, "question": r.question, "sections": d["sections"],
               "sources": d["sources"], "path": d["path"], "trace": d["trace"]}
        print(json.dumps(out, ensure_ascii=False))
        return 0
    print(a.text)
    for name in ("local", "bridge", "global"):
        items = r.sections[name]
        print(f"\n== {name} ({len(items)})")
        for it in items[:5]:
            print(f"  - [{it.kind}] {it.title} ({it.score:.3f})")
    print("\n== sources")
    for i, s in enumerate(r.sources, 1):
        print(f"  [{i}] {s.title} ({s.score:.3f})")
    return 0


def cmd_eval(args, settings: Settings, store: Store) -> int:
    from core.eval import evaluate, iter_rows, load_queries
    from core.retrieval.base import get_strategy, strategy_names

    try:
        ks = sorted({int(k) for k in args.k.split(",") if k.strip()})
    except ValueError:
        raise UsageError(f"--k takes comma-separated whole numbers, not {args.k!r}") from None
    if not ks or min(ks) < 1:
        raise UsageError("--k needs at least one number >= 1")
    names = [s.strip() for s in args.strategies.split(",") if s.strip()] or strategy_names()
    for n in names:
        get_strategy(n)
    if not args.queries.exists():
        raise UsageError(f"no queries file at {args.queries}")
    queries = load_queries(args.queries, args.limit or None)
    res = _resources(args, settings, store)
    settings.retrieval.max_sources = max(settings.retrieval.max_sources, max(ks))
    if not args.backend:
        settings.backend.kind = backend_kind(res.ws.backend)  # type: ignore[assignment]
    llm = None
    if settings.backend.kind != "offline":
        from core.pipeline.factory import make_backend
        from core.workspace import retrieval_llm

        require_servers(settings)
        llm = retrieval_llm(make_backend(settings, store))
    result = evaluate(res, queries, names, ks, llm=llm)
    if args.json:
        print(json.dumps(result))
    else:
        for row in iter_rows(result, ks):
            print("  ".join(f"{c:>10}" for c in row))
    return 0


def cmd_stats(args, settings: Settings, store: Store) -> int:
    from core.stats import format_stats, workspace_stats

    ws = store.require_workspace(args.workspace)
    st = workspace_stats(store, ws)
    if args.json:
        print(json.dumps(st))
    else:
        print(format_stats(st))
    return 0


def cmd_history(args, settings: Settings, store: Store) -> int:
    from core.history import export_json, list_queries

    ws = store.require_workspace(args.workspace)
    assert ws.id is not None  # a row read from or written to the store has its key
    if args.json:
        print(export_json(store, ws.id))
        return 0
    for q in list_queries(store, ws.id, args.limit or 20):
        print(f"{q.created_at:%Y-%m-%d %H:%M:%S}  {q.strategy:<20} {q.ms:8.1f} ms  {q.question}"
              + (f"  (asked by {q.asked_by})" if q.asked_by else ""))
    return 0


def cmd_export(args, settings: Settings, store: Store) -> int:
    import os
    import tempfile

    from core.export import EXPORT_FORMATS, GRAPH_FORMATS, communities_csv, community_markdown, traces_json, write_graph

    fmt = args.format.lower()
    formats = (*EXPORT_FORMATS, "md", "traces")
    if fmt not in formats:
        raise UsageError(f"unknown format {args.format!r}: use one of {', '.join(formats)}")
    if (fmt == "md") != bool(args.community):
        raise UsageError("--format md needs --community ID" if fmt == "md" else "--community goes with --format md")
    ws = store.require_workspace(args.workspace)
    assert ws.id is not None  # a row read from or written to the store has its key
    if ws.build_version == 0 and fmt != "traces":
        raise UsageError(f"workspace {ws.name!r} has not been built yet (python -m core build --workspace {ws.name})")
    if fmt == "md":
        community_markdown(store, ws.id, args.community)  # an unknown community fails before any file is made
    if args.out == "-":
        out, path, tmp = sys.stdout.buffer, None, None
    else:
        path = Path(args.out)
        if path.is_dir():
            raise UsageError(f"cannot write {path}: it is a folder")
        try:  # a temporary file beside the target: nothing half-written ever carries the target's name
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent.resolve())
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes it private; the export gets the usual permissions
        out = os.fdopen(fd, "wb")
    counts: dict = {}
    try:
        if fmt in GRAPH_FORMATS:
            counts = write_graph(store, ws.id, fmt, out, max_text=args.max_text)
        elif fmt == "csv":
            out.write(communities_csv(store, ws.id))
        elif fmt == "md":
            out.write(community_markdown(store, ws.id, args.community).encode("utf-8"))
        else:
            out.write(traces_json(store, ws.id))
        out.flush()
        if tmp:
            assert path is not None  # a temporary file is made only for a target path
            out.close()
            os.replace(tmp, path)
    except BaseException:
        if tmp:
            out.close()
            Path(tmp).unlink(missing_ok=True)
        raise
    if path is not None:
        what = f"{counts['nodes']:,} nodes, {counts['edges']:,} edges" if counts else fmt
        print(f"wrote {path} ({what}, {path.stat().st_size:,} bytes)", file=sys.stderr)
    return 0


def cmd_worker(args, settings: Settings, store: Store) -> int:
    """Exit status of `--run`: see core/worker.py `run_worker` (3: not claimed, 4: taken over, 5: failed units)."""
    from core.worker import run_worker, serve

    if args.serve:
        return serve(store, settings.worker.lease_s, args.poll or settings.worker.poll_s)
    return run_worker(store, args.run, settings.worker.lease_s)


if __name__ == "__main__":
    sys.exit(main())
