"""How much text a build embeds, per vector collection: the tokens MiniLM runs (each text padded to its width
bucket, at most 256 tokens), read from a built workspace.

    python -m bench.embed_volume --home bench/out/generated-s35d --workspace generated-s35d

Each collection's texts are rebuilt from the database as the build embeds them (core/index/embedding.py: chunks and
statements with their document's title where the build gives them one, entities as "name: description", reports as
title and summary, topics as title, summary and statements) and tokenised with the bundled tokenizer; "padded" is
what the forwards compute (core/backends/minilm_runtime.py `bucket_width`). Results in
bench/results/embed-volume-<workspace>.json.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
from sqlmodel import col, select

from bench.machine import commit, machine
from core.backends.minilm_runtime import MAX_TOKENS, bucket_width, bundled_model_dir
from core.config import Settings
from core.index.embedding import node_text_for_embedding, statement_rows, topic_text
from core.models import Community, Document, Edge, Node
from core.pipeline.report_material import REPORTED
from core.store import Store

RESULTS = Path(__file__).resolve().parent / "results"


def texts_of(store: Store, ws_id: int, titled: bool) -> dict[str, list[str]]:
    """collection -> the texts embedded into it."""
    out: dict[str, list[str]] = {}
    with store.session() as s:
        titles = dict(s.exec(select(Document.id, Document.title).where(Document.workspace_id == ws_id)).all())
        nodes = s.exec(select(Node.id, Node.kind, Node.title, Node.text, Node.document_id)
                       .where(Node.workspace_id == ws_id)).all()
        members = s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws_id, Edge.kind == "in_topic")).all()
        reports = s.exec(select(Community.title, Community.summary).where(
            Community.workspace_id == ws_id, col(Community.method).in_(REPORTED))).all()
    text_of = {i: x or "" for i, k, _, x, _ in nodes if k == "statement"}
    in_topic: dict[str, list[str]] = defaultdict(list)
    for sid, tid in sorted(members):
        in_topic[tid].append(text_of.get(sid, ""))
    for i, kind, title, text, doc in nodes:
        if kind == "chunk":
            out.setdefault(kind, []).append(node_text_for_embedding(kind, title, text or "",
                                                                    titles.get(doc, "") if titled else ""))
        elif kind == "entity":
            out.setdefault(kind, []).append(node_text_for_embedding(kind, title, (text or "")[:1000]))
        elif kind == "topic":
            out.setdefault(kind, []).append(topic_text(title, text or "", in_topic.get(i, [])))
        elif kind in ("attribute", "high_level", "overview"):
            out.setdefault(kind, []).append(node_text_for_embedding(kind, title, text or ""))
    out["statement"] = [t for _, t, _ in statement_rows(store, ws_id, titled=titled)]
    out["community"] = [node_text_for_embedding("community", t, x) for t, x in reports if x]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", required=True, help="the build's STRATA_HOME")
    ap.add_argument("--workspace", required=True)
    args = ap.parse_args()
    from tokenizers import Tokenizer

    settings = Settings.from_env()
    settings.storage.home = Path(args.home)
    store = Store(settings.storage.db_url)
    ws = store.require_workspace(args.workspace)
    assert ws.id is not None
    tok = Tokenizer.from_file(str(bundled_model_dir() / "tokenizer.json"))
    tok.enable_truncation(MAX_TOKENS)
    tok.no_padding()
    rows, total = {}, 0
    for kind, texts in sorted(texts_of(store, ws.id, settings.embed.title_prefix).items()):
        lens = np.array([len(e.ids) for e in tok.encode_batch(texts)] or [0])
        padded = int(sum(bucket_width(int(n)) for n in lens)) if texts else 0
        rows[kind] = {"texts": len(texts), "tokens": int(lens.sum()), "padded": padded,
                      "mean": round(float(lens.mean()), 1), "at_256": round(float(np.mean(lens >= MAX_TOKENS)), 3)}
        total += padded
        print(f"{kind:12s} {len(texts):8,d} texts {int(lens.sum()):11,d} tokens {padded:11,d} padded "
              f"(mean {lens.mean():.0f}, {np.mean(lens >= MAX_TOKENS):.0%} cut at {MAX_TOKENS})")
    print(f"{'total':12s} {total:41,d} padded")
    out = {"command": f"python -m bench.embed_volume --home {args.home} --workspace {args.workspace}",
           "machine": machine(), "commit": commit(), "collections": rows, "padded_total": total}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"embed-volume-{args.workspace}.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
