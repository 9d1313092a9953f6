"""The `exact` MiniLM runtime (core/backends/minilm_exact.py): the arithmetic its by-construction argument rests on,
its distance from the float32 model, and the same bits under every kernel this CPU can be told to run, and on the
CPU that recorded the fingerprint below.

The cross-kernel runs each start a process (every library reads its settings once, when it loads): OpenBLAS told to
use the kernels of older CPUs (OPENBLAS_CORETYPE: SSE3, AVX, AVX2, AVX-512 with bfloat16), numpy's own SIMD loops
capped at AVX2 and at SSE4.2 (NPY_DISABLE_CPU_FEATURES), one BLAS thread or two, and oneDNN at each ISA this CPU
allows below its own (AVX512-BF16, AVX-512, AVX2 with torch's kernels too; the runtime must not depend on them)."""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.backends.minilm_exact import (
    GELU_RANGE,
    NORM_BUDGET,
    ExactBert,
    exp_nonpositive,
    gelu_table,
    scale_rows,
    tree_sum,
)
from core.backends.minilm_runtime import bundled_model_dir

ROOT = Path(__file__).resolve().parents[2]
# sha256 of the float32 vectors of FINGERPRINT_TEXTS, recorded on an AMD EPYC (AVX-512, no AMX) on 2026-11-29. The
# vectors depend on the documents only, so every CPU must give these bits; change it only with the runtime's
# arithmetic (core/backends/minilm_exact.py), and say so in the commit.
FINGERPRINT = "e71fc13995080f0de7c6985ca1bb084114625e78660700b7ad0a15bd1789ee2c"


def fingerprint_texts() -> list[str]:
    from test_embedders import TEXTS

    return TEXTS + [f"{t} (variant {i})" for i, t in enumerate(TEXTS[1:12])] + [f"entity {i}" for i in range(40)]


# -- the arithmetic -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 8, 32, 384, 1536, 250])
def test_tree_sum_adds_in_one_fixed_order(k):
    rng = np.random.default_rng(k)
    x = (rng.standard_normal((5, k)) * 10.0 ** rng.integers(-3, 4, (5, k))).astype(np.float32)
    got = tree_sum(x)
    # the same order written out as a recursion over Python scalars: upper half onto lower, odd last onto first
    def by_hand(v: list[np.float32]) -> np.float32:
        v = list(v)
        while len(v) > 1:
            if len(v) % 2:
                v[0] = np.float32(v[0] + v[-1])
                v = v[:-1]
            h = len(v) // 2
            v = [np.float32(v[i] + v[i + h]) for i in range(h)]
        return v[0]

    assert np.array_equal(got, np.array([by_hand(list(r)) for r in x], dtype=np.float32))
    before = x.copy()
    tree_sum(x)
    assert np.array_equal(x, before)  # the input is left alone unless it is scratch


def _hostile_rows(k: int) -> np.ndarray:
    rng = np.random.default_rng(k)
    rows = [rng.standard_normal(k), np.ones(k), np.zeros(k), rng.standard_normal(k) * 1e-30,
            np.r_[1e4, rng.standard_normal(k - 1) * 1e-3], -np.ones(k) * 3e5, rng.standard_t(1, k)]
    return np.array(rows, dtype=np.float32)


@pytest.mark.parametrize("k", [32, 256, 384, 1536])
def test_scaled_rows_are_integers_within_the_budget_and_close(k):
    x = _hostile_rows(k)
    q, s = scale_rows(x)
    assert np.array_equal(q, np.rint(q))
    squares = (q.astype(np.int64) ** 2).sum(axis=1)  # exact
    assert squares.max() <= int(NORM_BUDGET) ** 2, squares
    assert np.all(np.abs(q * s - x) <= s * 0.5001 + 1e-35)
    assert np.array_equal(q[2], np.zeros(k))  # a zero row stays zero


def test_products_of_scaled_rows_are_exact_in_float32():
    """Cauchy-Schwarz: any partial sum stays within 2^24, so float32 BLAS gives the int64 product bit for bit."""
    for k, seed in ((384, 1), (1536, 2), (32, 3), (256, 4)):
        rng = np.random.default_rng(seed)
        a, _ = scale_rows(np.r_[_hostile_rows(k), rng.standard_normal((60, k)).astype(np.float32)])
        b, _ = scale_rows(np.r_[_hostile_rows(k), rng.standard_normal((90, k)).astype(np.float32)])
        exact = a.astype(np.int64) @ b.astype(np.int64).T
        assert np.abs(exact).max() <= 2**24
        assert np.array_equal((a @ b.T).astype(np.int64), exact)


def test_exp_of_nonpositive_numbers():
    x = np.r_[-np.linspace(0, 80, 100_001), -np.inf, -1e30].astype(np.float32)
    got = exp_nonpositive(x.copy())
    want = np.exp(np.maximum(x.astype(np.float64), -80.0))
    assert np.all(np.abs(got / want - 1) < 5e-6)


def test_the_gelu_table_is_gelu():
    table = gelu_table()
    n = len(table) // 2
    z = np.arange(-n, n + 1) * (GELU_RANGE / n)
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in z])
    assert np.abs(table - want).max() < 1e-6


# -- the model ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exact_model() -> ExactBert:
    return ExactBert(bundled_model_dir())


def test_gelu_of_any_input(exact_model):
    z = np.r_[np.linspace(-12, 12, 20_001), 50.0, -50.0].astype(np.float32)
    got = exact_model.gelu_of(z)
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in z.astype(np.float64)])
    assert np.abs(got - want).max() < 1.5e-4


def test_vectors_are_within_a_hair_of_the_float32_model(exact_model):
    import torch

    from core.backends.minilm_bert import build_bert
    from core.backends.minilm_runtime import Runtime, _unit, pad_rows

    texts = [t if t.strip() else "(empty)" for t in fingerprint_texts()]
    encs = [e.ids for e in Runtime(bundled_model_dir())._tok.encode_batch(texts)]
    ids, mask = pad_rows(encs)
    with torch.inference_mode():
        ref = _unit(build_bert(bundled_model_dir())(torch.from_numpy(ids), torch.from_numpy(mask)).numpy())
    got = exact_model.forward(ids, mask)
    cos = (got * ref).sum(axis=1)
    assert cos.min() >= 0.9999, cos.min()
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)


def test_a_texts_vector_does_not_depend_on_the_rows_beside_it(exact_model):
    from core.backends.minilm_runtime import Runtime, pad_rows

    rt = Runtime(bundled_model_dir())
    encs = [e.ids for e in rt._tok.encode_batch(["Marie Curie", "The Tidewater Bridge crosses the Salt River."])]
    alone = exact_model.forward(*pad_rows(encs[:1], 8))
    together = exact_model.forward(*pad_rows(encs, 16))
    assert np.array_equal(alone[0], exact_model.forward(*pad_rows([encs[0], encs[0], encs[0]], 8))[1])
    assert np.array_equal(together[1], exact_model.forward(*pad_rows(encs[1:], 16))[0])


# -- the same bits under every kernel -------------------------------------------------------------------------------

SCRIPT = r'''
import hashlib, sys
from tests.net import forbid_network
forbid_network("while embedding")
sys.path.insert(0, "tests/unit")
from core.backends.embedders import MiniLMEmbedder
from test_minilm_exact import fingerprint_texts
e = MiniLMEmbedder(runtime="exact")
texts = fingerprint_texts()
v = e.embed(texts)
single = [e.embed([t])[0] for t in texts[::5]]
import numpy as np
assert all(np.array_equal(a, b) for a, b in zip(single, v[::5])), "alone"
print("VECTORS " + hashlib.sha256(v.tobytes()).hexdigest() + " " + e.runtime)
'''
NO_AVX512 = "X86_V4 AVX512_ICL AVX512_SPR"  # what this numpy dispatches above AVX2 (np.show_runtime)
SETTINGS = [
    ("default", {}),
    ("one-blas-thread", {"OPENBLAS_NUM_THREADS": "1", "STRATA_TASK_THREADS": "1"}),
    ("openblas-sse3", {"OPENBLAS_CORETYPE": "Prescott"}),
    ("openblas-avx", {"OPENBLAS_CORETYPE": "Sandybridge"}),
    ("openblas-avx2", {"OPENBLAS_CORETYPE": "Haswell"}),
    ("openblas-avx512-bf16", {"OPENBLAS_CORETYPE": "Cooperlake"}),
    ("numpy-sse4", {"NPY_DISABLE_CPU_FEATURES": "X86_V3 " + NO_AVX512}),
    ("onednn-avx512-bf16", {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}),
    ("onednn-avx512", {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}),
    ("avx2-everywhere", {"NPY_DISABLE_CPU_FEATURES": NO_AVX512, "OPENBLAS_CORETYPE": "Haswell",
                         "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}),
]
CLEARED = ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "NPY_DISABLE_CPU_FEATURES", "ONEDNN_MAX_CPU_ISA",
           "ATEN_CPU_CAPABILITY", "STRATA_TASK_THREADS", "STRATA_MINILM_RUNTIME")


def vectors_under(env: dict) -> str:
    full = {k: v for k, v in os.environ.items() if k not in CLEARED}
    full.update(env, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=full, capture_output=True, text=True, timeout=600)
    line = next((x for x in p.stdout.splitlines() if x.startswith("VECTORS ")), "")
    assert p.returncode == 0 and line.endswith(" exact"), (p.stdout[-1500:], p.stderr[-3000:])
    return line.split()[1]


@pytest.fixture(scope="module")
def default_bits() -> str:
    return vectors_under({})


@pytest.mark.parametrize("name,env", SETTINGS[1:], ids=[n for n, _ in SETTINGS[1:]])
def test_the_same_bits_under_every_kernel(name, env, default_bits):
    assert vectors_under(env) == default_bits, name


def test_the_same_bits_as_the_cpu_that_recorded_them(default_bits):
    assert default_bits == FINGERPRINT, ("this CPU gives other vectors than the recorded ones: the graph would "
                                         f"differ from one built elsewhere ({default_bits})")


def test_the_fingerprint_texts_are_unchanged():
    """The fingerprint is of these texts: a change to test_embedders.TEXTS must not move it silently."""
    digest = hashlib.sha256("\x00".join(fingerprint_texts()).encode()).hexdigest()
    assert digest == FINGERPRINT_TEXTS_SHA, digest


FINGERPRINT_TEXTS_SHA = "1505a4b1863f7e882817a07ea8ee5a6d32c9ba1894b8e0fe98f6cc5f47b27df6"
