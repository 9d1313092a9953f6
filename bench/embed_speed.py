"""The embedder alone, as the embed stage drives it: texts of a generated corpus (its chunks' texts, its sentences as
statements, the names in them as entities) embedded in the parts `embed_missing` hands the embedder, on one runtime.

    python -m bench.embed_speed --tokens 200000 --runtime torch-bf16
    PYTHONPATH=/path/to/other/checkout python -m bench.embed_speed ...   # the same texts through another checkout

Writes bench/results/embed-speed-<runtime>[-<label>].json: texts, tokens, seconds, tokens per second per kind, and
the shapes of the forwards run (rows × width → count). `python -m bench.report` renders them side by side. Run it on
a quiet machine: it measures wall time on every core the embedder uses.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def texts_of(tokens: int, seed: int) -> dict[str, list[str]]:
    """Chunk-like passages (about 300 tokens), sentence statements and capitalised names, sorted by length as
    embed_missing sorts them, each kind's duplicates removed."""
    from bench.gen_corpus import generate

    rows = generate(tokens, seed)
    chunks, sentences, names = [], [], []
    for r in rows:
        words = r["text"].split()
        chunks += [f"{r['title']}\n" + " ".join(words[i : i + 220]) for i in range(0, len(words), 180)]
        sentences += [f"{r['title']}: {s}" for s in re.split(r"(?<=[.!?])\s+", r["text"]) if len(s) > 20]
        names += re.findall(r"(?:[A-Z][a-z]+ )+[A-Z][a-z]+", r["text"])
    out = {}
    for kind, texts in (("chunk", chunks), ("statement", sentences), ("entity", names)):
        out[kind] = sorted(dict.fromkeys(texts), key=lambda t: (len(t), t))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--runtime", default="torch-bf16")
    ap.add_argument("--label", default="", help="names the checkout measured (e.g. before)")
    ap.add_argument("--batch-size", type=int, default=64, help="settings.embed.batch_size")
    args = ap.parse_args()
    from core.backends.embedders import MiniLMEmbedder
    from core.backends.minilm_runtime import bucket_width

    emb = MiniLMEmbedder(runtime=args.runtime, cache_dir=ROOT / "bench" / "out" / "models")
    emb.embed(["warm up"])
    rt = emb._rt  # noqa: SLF001 - a benchmark reads the runtime's shapes
    shapes: Counter = Counter()
    real = rt.forward

    def counting(ids, mask):
        shapes[f"{ids.shape[0]}x{ids.shape[1]}"] += 1
        return real(ids, mask)

    rt.forward = counting
    step = max(args.batch_size * 16, 256)  # embed_missing's part
    kinds = texts_of(args.tokens, args.seed)
    res: dict = {"command": "python -m bench.embed_speed " + " ".join(sys.argv[1:]), "runtime": emb.runtime,
                 "label": args.label, "kinds": {}}
    total_s = 0.0
    for kind, texts in kinds.items():
        n_tokens = sum(len(e.ids) for e in rt._tok.encode_batch(texts))  # noqa: SLF001
        t0 = time.perf_counter()
        for off in range(0, len(texts), step):
            emb.embed(texts[off : off + step])
        s = time.perf_counter() - t0
        total_s += s
        padded = sum(bucket_width(len(e.ids)) for e in rt._tok.encode_batch(texts))  # noqa: SLF001
        res["kinds"][kind] = {"texts": len(texts), "tokens": n_tokens, "padded_tokens": padded, "seconds": round(s, 2),
                              "tokens_per_s": round(n_tokens / s)}
        print(kind, res["kinds"][kind], flush=True)
    res["seconds"] = round(total_s, 2)
    res["forwards"] = dict(shapes.most_common(12))
    from bench.machine import commit, machine

    res |= {"machine": machine(), "commit": commit(), "date": time.strftime("%Y-%m-%d")}
    name = f"embed-speed-{emb.runtime}" + (f"-{args.label}" if args.label else "")
    (ROOT / "bench" / "results" / f"{name}.json").write_text(json.dumps(res, indent=1) + "\n")
    print(f"{total_s:.1f} s in all; wrote bench/results/{name}.json")


def report(rows: list[dict]) -> list[str]:
    """The section of docs/BENCHMARKS.md: one row per (runtime, checkout, kind)."""
    out = ["## The embedder alone: each runtime, each checkout, each machine", "",
           "| runtime | checkout | machine | kind | texts | tokens | seconds | tokens/s |",
           "|---|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        for kind, k in r["kinds"].items():
            out.append(f"| {r['runtime']} | {r['label'] or r['commit']} | {r['machine']}, {r['date']} | {kind} | "
                       f"{k['texts']:,} | {k['tokens']:,} | {k['seconds']:.1f} | {k['tokens_per_s']:,} |")
    if rows:
        out += ["", "* commands: " + "; ".join(f"`{r['command']}`" for r in rows), ""]
    return out


if __name__ == "__main__":
    main()
