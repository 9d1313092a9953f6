"""The language-call cache: every backend's calls, keyed by a hash of everything that decides the reply.

A rebuild with the same backend, model, prompts and options costs no model time: the reply comes from the
`LLMCall` table. Only validated replies are put, so a cached row is always usable. Backends take
`cache: CallCache | None`; None means no caching.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from core.models import LLMCall
from core.store import Store


def canonical_json(value: Any) -> str:
    """Key-sorted, whitespace-free JSON: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


class CallCache:
    def __init__(self, store: Store):
        self.store = store
        self._guard = threading.Lock()
        self._flights: dict[str, list] = {}  # key -> [lock, callers holding or waiting for it]

    @contextmanager
    def flight(self, key: str) -> Iterator[None]:
        """One call per key at a time in this process: a second caller of the same key (two units of one build with
        the same material, on two hosts at once) waits for the first, then finds its reply cached, instead of
        asking the model again."""
        with self._guard:
            entry = self._flights.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._guard:
                entry[1] -= 1
                if entry[1] == 0:
                    self._flights.pop(key, None)

    @staticmethod
    def key(
        backend: str,
        model: str,
        task: str,
        prompt: str,
        schema: dict[str, Any] | None,
        options: dict[str, Any],
    ) -> str:
        """SHA-256 (hex) of the canonical JSON of every input of the call."""
        payload = {
            "backend": backend,
            "model": model,
            "task": task,
            "prompt": prompt,
            "schema": schema,
            "options": options,
        }
        return hashlib.sha256(canonical_json(payload).encode("utf-8", "surrogatepass")).hexdigest()

    def get(self, key: str) -> str | None:
        row = self.store.cached_call(key)
        return None if row is None else row.response

    def put(
        self,
        key: str,
        backend: str,
        model: str,
        task: str,
        request: dict[str, Any],
        response: str,
        ms: float,
    ) -> None:
        self.store.save_call(
            LLMCall(key=key, backend=backend, model=model, task=task, request=request, response=response, ms=float(ms))
        )
