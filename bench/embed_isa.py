"""Do the embedder's vectors depend on the CPU's kernels? Each oneDNN ISA this CPU allows (`ONEDNN_MAX_CPU_ISA`,
and torch's `ATEN_CPU_CAPABILITY` with AVX2) embeds the same texts in its own process; each is compared with the
default's bits. tests/unit/test_embedder_isa.py checks that under each ISA a vector does not depend on its batch; this
asks whether the ISAs agree with each other (a graph built on another CPU is the same only if they do).

    python -m bench.embed_isa --runtime torch-bf16

Prints one JSON line per ISA: equal bits or not, and the largest difference of a component.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from tests.unit.test_embedder_isa import ISAS  # the same CPU settings the invariance test runs under

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = r'''
import sys
import numpy as np
sys.path.insert(0, "tests/unit")
from core.backends.embedders import MiniLMEmbedder
from test_embedders import TEXTS
e = MiniLMEmbedder(runtime=sys.argv[1], cache_dir=sys.argv[2])
np.save(sys.argv[3], e.embed(TEXTS + [f"entity {i}: a description of something" for i in range(50)]))
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runtime", default="torch-bf16", choices=["exact", "torch-bf16", "onnx"])
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="strata-isa-"))
    got: dict[str, np.ndarray] = {}
    for name, extra in ISAS:
        out = tmp / f"{name}.npy"
        env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", **extra)
        subprocess.run([sys.executable, "-c", SCRIPT, args.runtime, str(tmp / "models"), str(out)], cwd=ROOT, env=env,
                       check=True)
        got[name] = np.load(out)
        ref = got["default"]
        print(json.dumps({"runtime": args.runtime, "isa": name, "same_bits": bool(np.array_equal(got[name], ref)),
                          "max_abs_diff": float(np.abs(got[name] - ref).max())}))


if __name__ == "__main__":
    main()
