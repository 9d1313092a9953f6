"""The dense reference row of every retrieval set under each MiniLM runtime: what the default `exact` runtime (the same
vectors on every CPU) costs or gains against the float-kernel runtimes it replaced, in recall, before any graph.

    python -m bench.dense_runtimes                     # every set, runtimes exact, torch-bf16, onnx

Each passage is embedded as `title + "\\n" + text`, each question alone, ranked by cosine (bench/retrieval.py's
reference row). Also the cosine of each passage's vector to the float32 model's (sentence-transformers' maths, the
plain-torch graph in float32) and the seconds each runtime took to embed the set. Writes bench/results/dense-runtimes.json; nothing is
chosen on these figures (the held-out set `elements` is reported like the others).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from bench.retrieval import dense_inputs, dense_ranking, recall_rows, set_dir

ROOT = Path(__file__).resolve().parent.parent
SETS = ("hotpotqa", "2wikimultihopqa", "multihoprag_small", "factbook", "elements")
RUNTIMES = ("exact", "torch-bf16", "onnx")


def float32_vectors(texts: list[str]) -> np.ndarray:
    """The float32 model's unit vectors (minilm_bert in float32, batches padded per width as every runtime pads)."""
    import torch

    from core.backends.minilm_bert import build_bert
    from core.backends.minilm_runtime import Runtime, bundled_model_dir

    rt = Runtime(bundled_model_dir())
    model = build_bert(bundled_model_dir())
    out = np.empty((len(texts), 384), dtype=np.float32)
    for idx, ids, mask in rt.batches(texts):
        with torch.inference_mode():
            out[idx] = model(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()[: len(idx)]
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--runtimes", default=",".join(RUNTIMES))
    args = ap.parse_args()
    from core.backends.embedders import MiniLMEmbedder

    res: dict = {"command": "python -m bench.dense_runtimes " + " ".join(sys.argv[1:]), "sets": {}}
    embedders = {r: MiniLMEmbedder(runtime=r, cache_dir=ROOT / "bench" / "out" / "models") for r in
                 args.runtimes.split(",")}
    for name in args.sets.split(","):
        texts, ids, questions, gold = dense_inputs(set_dir(name))
        reference = float32_vectors(texts)
        row: dict = {"passages": len(texts), "queries": len(questions)}
        for runtime, emb in embedders.items():
            emb.embed(["warm up"])
            t0 = time.perf_counter()
            ranked, docs = dense_ranking(emb, texts, ids, questions)
            seconds = time.perf_counter() - t0
            cos = (docs * reference).sum(axis=1)
            row[runtime] = {**recall_rows(ranked, gold), "embed_s": round(seconds, 1),
                            "cosine_to_float32_min": round(float(cos.min()), 6),
                            "cosine_to_float32_mean": round(float(cos.mean()), 6)}
            print(name, runtime, row[runtime], flush=True)
        res["sets"][name] = row
    from bench.machine import commit, machine

    res |= {"machine": machine(), "commit": commit(), "date": time.strftime("%Y-%m-%d")}
    (ROOT / "bench" / "results" / "dense-runtimes.json").write_text(json.dumps(res, indent=1) + "\n")
    print("wrote bench/results/dense-runtimes.json")


def report(res: dict) -> list[str]:
    """The section of docs/BENCHMARKS.md: R@2/5/10 per set and runtime, the cosine to float32, the seconds."""
    out = ["## The dense reference row under each MiniLM runtime", "",
           "| set | runtime | R@2 | R@5 | R@10 | cosine to float32 (min / mean) | passages and questions embedded in |",
           "|---|---|---:|---:|---:|---|---:|"]
    for name, row in res.get("sets", {}).items():
        for runtime, r in row.items():
            if isinstance(r, dict):
                out.append(f"| {name} | {runtime} | {r['recall@2']:.3f} | {r['recall@5']:.3f} | {r['recall@10']:.3f} | "
                           f"{r['cosine_to_float32_min']:.6f} / {r['cosine_to_float32_mean']:.6f} | "
                           f"{r['embed_s']:.1f} s |")
    if res:
        out += ["", f"* command: `{res['command']}`", f"* machine: {res['machine']}, commit {res['commit']}, "
                f"date {res['date']}", ""]
    return out


if __name__ == "__main__":
    main()
