"""all-MiniLM-L6-v2 computed so that its vectors are the same bits on every x86-64 CPU, by construction: the `exact`
runtime, MiniLMEmbedder's default.

Floating-point results depend on the CPU in two ways only: a sum's rounding depends on the order its terms are added
in (a BLAS kernel, a SIMD width and a thread count each choose an order), and library functions (exp, erf) have
other implementations for other instruction sets. Every single IEEE operation (+ - * / sqrt, rint, comparisons) is
correctly rounded, so the same everywhere. Here every value is made of those operations in a fixed order, and of sums
that are exact whatever their order:

* **Matrix products** (the linear layers, QKᵀ and PV) take integers in and give integers out. Each row of the left
  operand and each column of the right one is scaled to an L2 norm of at most 2^12 (`scale_rows`, weights once at
  load) and rounded to integers. By Cauchy-Schwarz every partial sum of a dot product then has a magnitude of at most
  2^12 · 2^12 = 2^24, and every integer up to 2^24 is exact in binary32: whichever order, blocking, FMA or thread a
  kernel uses, it computes the exact integer. The row and column scales are then applied elementwise. Scaling by the
  L2 norm instead of the largest element gives each element about 200 levels on 384 terms (a max-scaled 8-bit
  product of the same budget gives 73): the vectors are within cosine 0.99995 of the float32 model's (every set).
* **Other sums** (LayerNorm's mean and variance, softmax's denominator, the vector's norm) are taken in one fixed
  order of elementwise adds (`tree_sum`: halves added pairwise), never by a reduction whose order the library picks.
  Pooling adds fixed-point integers (exact in any order).
* **exp** is 2^k times a fixed polynomial (`exp_nonpositive`: Cody-Waite reduction, Horner), and **GELU** is read
  from a table of erf's Taylor series computed the same way, at load.

A text's vector is independent of its batch by construction too: rows are computed apart except in attention,
where padded keys get exactly zero weight and are left out of every scale, and each text is padded to its own width.

The assumptions left: the matrix kernels compute in binary32 or wider (true of every BLAS; numpy's has no bfloat16 or
TF32 mode), and denormals are not flushed differently between machines (numpy and torch leave the CPU's IEEE mode as
it is; a denormal can only arise as the square of an element below 1e-19, which rounds away against the normal-sized
terms of its row unless a whole row is that small). tests/unit/test_minilm_exact.py runs the runtime under each
OpenBLAS kernel, numpy SIMD level and oneDNN ISA this CPU can select and compares the bits, with a fingerprint that
another CPU must reproduce.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from core.backends.minilm_runtime import Runtime, pad_rows
from core.protocols import BackendError

NORM_BUDGET = 4096.0  # 2^12: a product's two operands, each rounded to this L2 norm at most, keep every partial sum <= 2^24
_MARGIN = 1.0 - 1e-4  # float32 rounding in the norm and the scaling, far below this
_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693145751953125)  # 16 significant bits: k * _LN2_HI is exact for |k| < 2^8
_LN2_LO = np.float32(1.428606765330187e-06)
_EXP_POLY = [np.float32(1.0 / f) for f in (120.0, 24.0, 6.0, 2.0, 1.0, 1.0)]  # degree 5 on |r| <= ln2/2: 2.4e-6
_ATTENTION_BLOCK = 1 << 16  # score entries per block of heads (256 KiB of float32)
GELU_STEP = 2.0**-12  # the GELU table's grid over [-GELU_RANGE, GELU_RANGE]
GELU_RANGE = 8.0  # beyond it GELU(z) is z (above) or 0 (below) to within 1e-15


def tree_sum(a: np.ndarray, scratch: bool = False) -> np.ndarray:
    """The sum over the last axis, added in one fixed order: the upper half onto the lower, repeatedly (an odd last
    term onto the first). `scratch`: `a` may be overwritten."""
    a = a if scratch else a.copy()
    n = a.shape[-1]
    while n > 1:
        if n % 2:
            a[..., 0] += a[..., n - 1]
            n -= 1
        h = n // 2
        np.add(a[..., :h], a[..., h:n], out=a[..., :h])
        n = h
    return a[..., 0]


def scale_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(q, s): integers q (as x's float type) with an L2 norm of at most NORM_BUDGET per row (last axis), and the row
    scales s with x ≈ q * s. Rounding moves each element by at most 1/2, the norm by at most √K / 2: the target norm
    leaves that room. A zero row stays zero."""
    k = x.shape[-1]
    norm = np.sqrt(tree_sum(x * x, scratch=True))[..., None]
    norm = np.where(norm > 0, norm, 1).astype(x.dtype)
    target = x.dtype.type((NORM_BUDGET - 0.5 * np.sqrt(k)) * _MARGIN)
    q = np.rint(x * (target / norm))
    return q, norm / target


def exp_nonpositive(x: np.ndarray) -> np.ndarray:
    """exp(x) for x <= 0 in float32 (relative error below 5e-6), from elementwise operations only: 2^k (built from
    its bits) times a polynomial of the remainder. Below -80 it is taken as exp(-80) (1.8e-35, a normal number).
    Overwrites x."""
    np.maximum(x, np.float32(-80.0), out=x)
    k = np.rint(x * _LOG2E)
    x -= k * _LN2_HI
    x -= k * _LN2_LO
    p = np.full_like(x, _EXP_POLY[0])
    for c in _EXP_POLY[1:]:
        p *= x
        p += c
    two_k = ((k.astype(np.int32) + 127) << 23).view(np.float32)  # exactly 2^k, -116 <= k <= 0
    p *= two_k
    return p


def gelu_table() -> np.ndarray:
    """GELU(z) = z/2 · (1 + erf(z/√2)) on the grid of GELU_STEP over ±GELU_RANGE, as float32. erf from its Taylor
    series in float64 for |x| <= 4.5 (80 terms: error below 1e-12), ±1 beyond (erfc(4.5) = 2e-10)."""
    n = int(round(GELU_RANGE / GELU_STEP))
    z = np.arange(-n, n + 1, dtype=np.float64) * GELU_STEP
    x = z / np.sqrt(2.0)
    x2 = x * x
    term = x.copy()
    total = x.copy()
    for i in range(1, 80):
        term = term * (-x2) / i
        total = total + term / (2 * i + 1)
    erf = np.where(np.abs(x) <= 4.5, total * (2.0 / np.sqrt(np.pi)), np.sign(x))
    return (0.5 * z * (1.0 + erf)).astype(np.float32)


class ExactBert:
    """The six BERT layers of config.json with model.safetensors' weights, computed as the module says. `forward`
    returns unit vectors (float32)."""

    def __init__(self, model_dir: Path):
        from safetensors.numpy import load_file

        cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        if cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu":
            raise BackendError(f"unexpected model config: {cfg.get('model_type')}/{cfg.get('hidden_act')}")
        w = {k: v.astype(np.float32) for k, v in load_file(str(model_dir / "model.safetensors")).items()}
        self.hidden, self.heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
        self.eps = np.float32(cfg["layer_norm_eps"])
        e = "embeddings."
        self.word, self.pos = w[e + "word_embeddings.weight"], w[e + "position_embeddings.weight"]
        self.type0 = w[e + "token_type_embeddings.weight"][0]  # token_type_ids are all 0
        self.ln = (w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"])
        self.layers = []
        for i in range(int(cfg["num_hidden_layers"])):
            pre = f"encoder.layer.{i}."
            att = pre + "attention."
            qkv = [w[f"{att}self.{n}.{p}"] for p in ("weight", "bias") for n in ("query", "key", "value")]
            self.layers.append({
                "qkv": self._linear(np.concatenate(qkv[:3]), np.concatenate(qkv[3:])),
                "o": self._linear(w[att + "output.dense.weight"], w[att + "output.dense.bias"]),
                "ln1": (w[att + "output.LayerNorm.weight"], w[att + "output.LayerNorm.bias"]),
                "i": self._linear(w[pre + "intermediate.dense.weight"], w[pre + "intermediate.dense.bias"]),
                "f": self._linear(w[pre + "output.dense.weight"], w[pre + "output.dense.bias"]),
                "ln2": (w[pre + "output.LayerNorm.weight"], w[pre + "output.LayerNorm.bias"]),
            })
        self.gelu = gelu_table()

    @staticmethod
    def _linear(weight: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q, s = scale_rows(weight)  # one scale per output channel
        return np.ascontiguousarray(q.T), s[:, 0], bias

    @staticmethod
    def linear(x: np.ndarray, layer: tuple[np.ndarray, ...]) -> np.ndarray:
        wq, ws, bias = layer
        q, s = scale_rows(x)
        out = q @ wq  # exact: see the module docstring
        out *= s
        out *= ws
        out += bias
        return out

    def layer_norm(self, x: np.ndarray, gain: np.ndarray, bias: np.ndarray) -> np.ndarray:
        n = np.float32(x.shape[-1])
        d = x - (tree_sum(x) / n)[:, None]
        var = tree_sum(d * d, scratch=True) / n
        d /= np.sqrt(var + self.eps)[:, None]
        d *= gain
        d += bias
        return d

    def gelu_of(self, z: np.ndarray) -> np.ndarray:
        """GELU by the nearest point of the table (error below 1.4e-4), z itself above the table, 0 below."""
        n = len(self.gelu) // 2
        i = np.rint(z * np.float32(1.0 / GELU_STEP))
        np.clip(i, -n, n, out=i)
        out = self.gelu[i.astype(np.int32) + n]
        return np.where(z > GELU_RANGE, z, out)

    def attention(self, qkv: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """Softmax attention of (b, s, 3·hidden) projections; `keep` (b, s) marks the real tokens. A padded key's
        score is -inf, so its weight is exp(-80) / sum, which rounds to exactly 0 in PV's integers. Heads are taken
        a few at a time, so that their s x s scores stay in the CPU's cache."""
        b, s, _ = qkv.shape
        h = self.heads
        d = self.hidden // h
        qkv = qkv.reshape(b, s, 3, h, d).transpose(2, 0, 3, 1, 4).reshape(3, b * h, s, d)
        qq, qs = scale_rows(np.ascontiguousarray(qkv[0]))
        kq, ks = scale_rows(np.ascontiguousarray(qkv[1]))
        qs *= np.float32(1.0 / np.sqrt(d))
        ks = ks.transpose(0, 2, 1)
        vkeep = np.repeat(keep, h, axis=0)[:, :, None]
        vq, vs = scale_rows(np.ascontiguousarray(np.where(vkeep, qkv[2], np.float32(0)).transpose(0, 2, 1)))
        vq, vs = vq.transpose(0, 2, 1), vs.transpose(0, 2, 1)  # (b·h, s, d), (b·h, 1, d)
        bias = np.repeat(np.where(keep, np.float32(0), np.float32(-np.inf)), h, axis=0)[:, None, :]
        out = np.empty((b * h, s, d), dtype=np.float32)
        step = max(1, _ATTENTION_BLOCK // (s * s))
        for i in range(0, b * h, step):
            j = slice(i, i + step)
            scores = qq[j] @ kq[j].transpose(0, 2, 1)  # exact
            scores *= qs[j]
            scores *= ks[j]
            scores += bias[j]
            scores -= scores.max(axis=-1, keepdims=True)
            e = exp_nonpositive(scores)
            total = tree_sum(e)[..., None]
            eq, es = scale_rows(e)
            o = eq @ vq[j]  # exact
            o *= es / total
            o *= vs[j]
            out[j] = o
        return out.reshape(b, h, s, d).transpose(0, 2, 1, 3).reshape(b * s, self.hidden)

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        b, s = ids.shape
        keep = mask.astype(bool)
        x = (self.word[ids] + self.pos[:s]) + self.type0
        x = self.layer_norm(x.reshape(b * s, self.hidden), *self.ln)
        for lay in self.layers:
            a = self.attention(self.linear(x, lay["qkv"]).reshape(b, s, -1), keep)
            x = self.layer_norm(x + self.linear(a, lay["o"]), *lay["ln1"])
            y = self.linear(self.gelu_of(self.linear(x, lay["i"])), lay["f"])
            x = self.layer_norm(x + y, *lay["ln2"])
        # mean pooling over the real tokens in fixed point (exact integer sums), then the norm in a fixed order
        fixed = np.where(keep.reshape(b * s, 1), np.rint(x * np.float32(2.0**16)), np.float32(0))
        total = fixed.astype(np.int64).reshape(b, s, self.hidden).sum(axis=1)
        mean = total / (mask.sum(axis=1, dtype=np.int64)[:, None] * 2.0**16)
        norm = np.sqrt(tree_sum(mean * mean, scratch=True))[:, None]
        return (mean / np.maximum(norm, 1e-12)).astype(np.float32)


def _one_blas_thread_here() -> None:
    """Let numpy's OpenBLAS use one thread for the calls of this thread only (`openblas_set_num_threads_local`,
    OpenBLAS >= 0.3.27): the forwards already run one per core, and the process's other work keeps every core. Any
    other BLAS is left as it is (the vectors are the same either way; only the speed differs)."""
    import ctypes

    from threadpoolctl import threadpool_info

    for lib in threadpool_info():
        if lib.get("internal_api") == "openblas":
            try:
                ctypes.CDLL(lib["filepath"]).openblas_set_num_threads_local(1)
            except (OSError, AttributeError):
                pass


class ExactRuntime(Runtime):
    """The `exact` runtime: ExactBert on numpy. A text's vector depends on the text only, so forwards need no fixed
    row count (`rows` stays the base's, the filler copies are not computed) and nothing is normalised again."""

    name = "exact"
    batch_tokens = 1024

    def __init__(self, model_dir: Path):
        super().__init__(model_dir)
        self._model = ExactBert(model_dir)

    def shaped(self, encs: list[list[int]], width: int) -> tuple[np.ndarray, np.ndarray]:
        return pad_rows(encs, width)

    def _init_worker(self) -> None:
        _one_blas_thread_here()

    def check_invariance(self) -> str:
        """'': a row's vector does not depend on the rows beside it by construction (the module docstring), so the
        base's check (4 s of forwards at every load) is not run here; tests/unit/test_embedders.py and
        tests/unit/test_minilm_exact.py check it under every kernel this CPU can select."""
        return ""

    def forward(self, ids, mask):
        return self._model.forward(ids, mask)

    def normalise(self, out: np.ndarray) -> np.ndarray:
        return out
