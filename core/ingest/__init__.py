"""Ingestion: loaders (bytes or paths -> documents or refusals), offline token counting and the chunker."""

from core.ingest.chunking import ChunkSpan, chunk_text
from core.ingest.loaders import SUPPORTED_EXTENSIONS, LoadedDoc, load_bytes, load_path, safe_filename
from core.ingest.refusals import Refusal, RefusalGroup, Refusals
from core.ingest.tokens import count_tokens, token_offsets

__all__ = [
    "SUPPORTED_EXTENSIONS",
    "ChunkSpan",
    "LoadedDoc",
    "Refusal",
    "RefusalGroup",
    "Refusals",
    "chunk_text",
    "count_tokens",
    "load_bytes",
    "load_path",
    "safe_filename",
    "token_offsets",
]
