"""Other CPUs, seen from this one: the embedder's invariance under each oneDNN ISA this CPU allows.

oneDNN picks its kernels by the CPU (AMX, AVX-512 with bfloat16, AVX-512, AVX2), and ONEDNN_MAX_CPU_ISA caps the
choice, so a machine with AMX can run the kernels of each older CPU; ATEN_CPU_CAPABILITY does the same for torch's own
vectorised kernels (attention). Each combination runs in its own process (both are read once, when the library
loads): the runtime's self-check must pass, and a text's vector must be the same bits alone, in any company and at any
place, on both fast runtimes. A cap above what the CPU has just means the CPU's best, so every row runs anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ISAS = [("default", {}), ("AVX512_CORE_BF16", {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}),
        ("AVX512_CORE", {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}),
        ("AVX2", {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"})]
SCRIPT = r'''
import random, sys
import numpy as np
from core.backends.embedders import MiniLMEmbedder
sys.path.insert(0, "tests/unit")
from test_embedders import TEXTS
e = MiniLMEmbedder(runtime=sys.argv[1], cache_dir=sys.argv[2])
texts = TEXTS + [f"{t} (variant {i})" for i, t in enumerate(TEXTS[1:12])] + [f"entity {i}" for i in range(70)]
whole = e.embed(texts)  # loading ran the runtime's self-check: a failure raised BackendError
rng = random.Random(7)
for _ in range(8):
    picked = rng.sample(range(len(texts)), rng.randint(2, len(texts) - 1))
    assert np.array_equal(e.embed([texts[i] for i in picked]), whole[picked]), "in company"
for i in range(0, len(texts), 2):
    assert np.array_equal(e.embed([texts[i]])[0], whole[i]), f"alone: {texts[i]!r}"
order = list(range(len(texts)))[::-1]
assert np.array_equal(e.embed([texts[i] for i in order]), whole[order]), "another place"
print("INVARIANT", e.runtime)
'''


@pytest.mark.parametrize("runtime", ["torch-bf16", "onnx"])
@pytest.mark.parametrize("isa,env", ISAS, ids=[i for i, _ in ISAS])
def test_invariance_under_each_isa(isa, env, runtime, tmp_path_factory):
    cache = tmp_path_factory.getbasetemp() / "isa_minilm_cache"
    full = {k: v for k, v in os.environ.items() if k not in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")}
    full.update(env, PYTHONPATH=str(ROOT), ONEDNN_VERBOSE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    full.pop("STRATA_MINILM_RUNTIME", None)
    p = subprocess.run([sys.executable, "-c", SCRIPT, runtime, str(cache)], cwd=ROOT, env=full, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0 and f"INVARIANT {runtime}" in p.stdout, (p.stdout[-1500:], p.stderr[-3000:])
    if runtime == "torch-bf16":  # the cap took effect: oneDNN says which ISA it runs
        said = next((line for line in p.stdout.splitlines() if ",isa:" in line), "")
        assert said, "oneDNN said which ISA it runs"
        if isa in ("AVX512_CORE", "AVX2"):
            assert "AMX" not in said and "bfloat16" not in said, said
