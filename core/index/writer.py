"""Which embedder wrote a workspace's vectors: its name, the runtime that computed them and their dimension, kept
in every vector collection's metadata (`strata_embedder`, `strata_runtime`, `strata_dim`).

The bundled MiniLM gives each text the same vector bit for bit whatever batch it is in, but its runtimes differ
from one another (bfloat16 against float32 matmuls: up to ~3e-3), and a workspace extended with other vectors than
it was built with would no longer equal its rebuild. So a build, an added document, a merge or a re-embed writes
with the runtime the collections record (core/pipeline/factory.py chooses it), and `VectorIndex.upsert` refuses a
writer that differs, with one line saying why and what to do (`WriterMismatch`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.protocols import BackendError

KEYS = {"embedder": "strata_embedder", "runtime": "strata_runtime", "dim": "strata_dim"}


class WriterMismatch(BackendError):
    """Vectors of another embedder, runtime or dimension would be written into a workspace's collections."""


@dataclass(frozen=True)
class Writer:
    embedder: str  # the embedder's name, as in collection names ("minilm", "ollama-nomic-embed-text")
    runtime: str  # MiniLM's runtime ("exact", "torch-bf16", "onnx", "sentence-transformers"), "server" for a model server's
    dim: int

    def meta(self) -> dict[str, Any]:
        return {KEYS["embedder"]: self.embedder, KEYS["runtime"]: self.runtime, KEYS["dim"]: int(self.dim)}

    @classmethod
    def from_meta(cls, meta: dict | None) -> Writer | None:
        """The writer recorded in a collection's metadata, or None (a collection from before it was recorded)."""
        meta = meta or {}
        if not all(k in meta for k in KEYS.values()):
            return None
        return cls(str(meta[KEYS["embedder"]]), str(meta[KEYS["runtime"]]), int(meta[KEYS["dim"]]))

    def __str__(self) -> str:
        return f"{self.embedder} ({self.runtime} runtime, {self.dim} dimensions)"


def without_writer(meta: dict | None) -> dict[str, Any]:
    """A collection's metadata less the writer keys and chromadb's `hnsw:` settings (fixed at creation)."""
    return {k: v for k, v in (meta or {}).items() if k not in KEYS.values() and not k.startswith("hnsw:")}


def mismatch(workspace: str, recorded: Writer, here: Writer | str) -> WriterMismatch:
    """The one-line refusal: the workspace's vectors came from `recorded`; this host would write `here` (a Writer,
    or why the recorded runtime cannot run here)."""
    if isinstance(here, Writer):
        why = f"this host would write {here}"
    else:
        why = f"the {recorded.runtime} runtime cannot run on this host ({here})"
    fix = (f"unset STRATA_MINILM_RUNTIME (or set it to {recorded.runtime}) and run on a host where that runtime loads"
           if recorded.embedder == "minilm" else "configure the same embedding model")
    return WriterMismatch(f"workspace {workspace!r} holds vectors written by {recorded}, but {why}: {fix}, or build "
                          f"its documents into a new workspace here")
