"""HiRAG's layers on other CPUs, seen from this one: the UMAP reduction and the clustering of a layer give the same bits
whatever kernels this process is told to run (core/algorithms/layer_reduce.py says why by construction).

Each setting runs in its own process, since every library reads it once, when it loads: numba told to compile for
the host or for an AVX2 CPU (the module pins it to one generic target anyway), numpy's SIMD dispatch capped at AVX2
(NPY_DISABLE_CPU_FEATURES), OpenBLAS's kernels of an AVX2 CPU (OPENBLAS_CORETYPE=Haswell), oneDNN capped at AVX2. The
process also forbids every network connection: the reduction downloads nothing. A process that imported numba with
other settings first is refused, not silently run on this CPU's kernels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = r'''
import hashlib, json, sys
from tests.net import forbid_network
forbid_network("during the reduction")
import numpy as np
sys.path.insert(0, "tests/unit")
from core.algorithms.layer_reduce import exact_knn, umap_reduce
from core.algorithms.layers import cluster_layer
from core.config import LayerSettings
from test_layers import blobs

x, _ = blobs(700, 384, 5, spread=4.0, seed=12)  # touching blobs: the layout and the mixture have choices to make
idx, dist = exact_knn(x, 15)
z = umap_reduce(x, 2, 42)
c = cluster_layer(x, LayerSettings(), 0, None)
from numba.core import config
print("RESULT " + json.dumps({
    "knn": hashlib.sha256(idx.tobytes() + dist.tobytes()).hexdigest(),
    "umap": hashlib.sha256(z.tobytes()).hexdigest(),
    "clusters": hashlib.sha256(json.dumps(c.clusters).encode()).hexdigest(),
    "k": c.n_components, "cs": c.sparsity, "numba_cpu": str(config.CPU_NAME)}))
'''
AVX2_NUMPY = "X86_V4 AVX512_ICL AVX512_SPR"  # what this numpy dispatches above AVX2 (np.show_runtime)
SETTINGS = [
    ("default", {}),
    ("numba-host", {"NUMBA_CPU_NAME": "host"}),
    ("numba-haswell", {"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": "+avx2,+fma,+sse4.2"}),
    ("avx2-everywhere", {"NUMBA_CPU_NAME": "haswell", "NPY_DISABLE_CPU_FEATURES": AVX2_NUMPY,
                         "OPENBLAS_CORETYPE": "Haswell", "ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}),
]
CLEARED = ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "NUMBA_NUM_THREADS", "NPY_DISABLE_CPU_FEATURES",
           "OPENBLAS_CORETYPE", "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")


def _run(code: str, env: dict) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in CLEARED}
    full.update(env, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True, text=True,
                          timeout=1200)


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    out = {}
    for name, env in SETTINGS:
        p = _run(SCRIPT, env)
        line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
        assert p.returncode == 0 and line, (name, p.stdout[-1500:], p.stderr[-3000:])
        out[name] = json.loads(line[len("RESULT "):])
    return out


def test_the_same_bits_under_every_cpu_setting(results):
    base = results["default"]
    assert base["numba_cpu"] == "generic" and base["k"] >= 2 and 0 < base["cs"] < 1
    for name, r in results.items():
        assert r["numba_cpu"] == "generic", name  # the module pinned numba whatever the process was told
        assert {k: r[k] for k in ("knn", "umap", "clusters", "k", "cs")} == \
            {k: base[k] for k in ("knn", "umap", "clusters", "k", "cs")}, name


def test_numba_imported_first_with_other_settings_is_refused():
    code = ("import numba\nimport numpy as np\nfrom core.algorithms.layer_reduce import umap_reduce\n"
            "try:\n    umap_reduce(np.random.default_rng(0).normal(size=(20, 8)), 2, 1)\n"
            "except RuntimeError as e:\n    print('REFUSED', e)\n")
    p = _run(code, {"NUMBA_CPU_NAME": "host"})
    assert p.returncode == 0 and "REFUSED numba was imported before" in p.stdout, (p.stdout, p.stderr[-2000:])
