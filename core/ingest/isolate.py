"""Parsing uploads where a hostile file cannot take the app down with it.

`load_uploads` parses the files of one upload one by one in a child process (`python -m core.ingest.isolate`, a
fresh interpreter, not a fork of the app) whose address space is capped (`resource.setrlimit(RLIMIT_AS)`,
`ingest.parse_memory_bytes`) and whose every file has `ingest.parse_timeout_s`. A file that runs past its time is
refused and the child killed; a file that makes the child die (a parser crash, the memory cap) is refused; either
way a new child parses the rest of the upload. Files go in as bytes, results come back as JSON (never a pickle: a
child that a parser bug took over must not run code in the app); a file's refusals come back counted and grouped
(core/ingest/refusals.py), so a reply is bounded whatever the file held. The upload's budget
(`ingest.upload_budget_bytes`) is counted here too, before any parsing.
"""

from __future__ import annotations

import json
import os
import select
import struct
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from core.config import IngestSettings
from core.ingest.formats import fmt_bytes
from core.ingest.limits import over_limit
from core.ingest.loaders import LoadedDoc, Result, load_bytes, safe_filename
from core.ingest.refusals import Refusals

START_TIMEOUT_S = 120.0  # a child's interpreter and imports (not counted in a file's parse time)
_HEADER = struct.Struct(">Q")
_ROOT = Path(__file__).resolve().parents[2]


class _ChildGone(Exception):
    """The child ended (or stopped answering) before it sent a whole reply."""


class _Child:
    """One parsing process: send a file, get its documents and refusals back."""

    def __init__(self, settings: IngestSettings):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")])))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "core.ingest.isolate", settings.model_dump_json()],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=str(_ROOT), env=env,
        )
        try:
            self._read(time.monotonic() + START_TIMEOUT_S)  # "ready": imports done
        except (TimeoutError, _ChildGone, ValueError):
            self.close(kill=True)
            raise _ChildGone from None

    def parse(self, name: str, data: bytes, timeout_s: float) -> dict:
        assert self.proc.stdin is not None
        header = json.dumps({"name": name}).encode()
        try:
            self.proc.stdin.write(_HEADER.pack(len(header)) + header + _HEADER.pack(len(data)))
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise _ChildGone from None
        return self._read(time.monotonic() + timeout_s)

    def _read(self, deadline: float) -> dict:
        size = _HEADER.unpack(self._exactly(_HEADER.size, deadline))[0]
        return json.loads(self._exactly(size, deadline))

    def _exactly(self, n: int, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = bytearray()
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            block = os.read(fd, min(n - len(buf), 1 << 20))
            if not block:
                raise _ChildGone
            buf += block
        return bytes(buf)

    def close(self, kill: bool = False) -> int | None:
        """End the child (at once when `kill`); its exit status."""
        if kill:
            self.proc.kill()
        else:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            for fh in (self.proc.stdin, self.proc.stdout):
                if fh is not None and not fh.closed:
                    fh.close()


def _crashed(status: int | None, settings: IngestSettings) -> str:
    how = ("it did not start" if status is None else f"signal {-status}" if status < 0 else f"exit status {status}")
    return (f"the parser crashed ({how}); the file may need more memory than allowed: "
            f"{fmt_bytes(settings.parse_memory_bytes)} limit (ingest.parse_memory_bytes; raise STRATA_PARSE_MEMORY_MB)")


def _from_json(reply: dict) -> Result:
    return [LoadedDoc(**d) for d in reply["docs"]], Refusals.from_json(reply["refusals"])


def _refused(name: str, reason: str) -> Result:
    return [], Refusals.one(safe_filename(name), reason)


def load_uploads(files: list[tuple[str, bytes]], settings: IngestSettings) -> list[Result]:
    """One (documents, refusals) per uploaded (name, bytes), in order; files past the upload's budget are refused
    unread; the others are parsed in a child process (in this one when `settings.isolate` is off)."""
    results: list[Result] = []
    todo: list[tuple[int, str, bytes]] = []
    total = 0
    for i, (name, data) in enumerate(files):
        if total + len(data) > settings.upload_budget_bytes:
            results.append(_refused(name, over_limit(
                "upload over its budget", f"{fmt_bytes(total + len(data))} with this file",
                fmt_bytes(settings.upload_budget_bytes), "upload_budget_bytes")))
            continue
        total += len(data)
        results.append(([], Refusals()))
        todo.append((i, name, data))
    if not settings.isolate:
        for i, name, data in todo:
            results[i] = load_bytes(name, data, settings)
        return results
    child: _Child | None = None
    try:
        for i, name, data in todo:
            try:
                if child is None:
                    child = _Child(settings)
                results[i] = _from_json(child.parse(name, data, settings.parse_timeout_s))
            except TimeoutError:
                if child is not None:
                    child.close(kill=True)
                child = None
                results[i] = _refused(name, over_limit(
                    "parsing took too long", f"over {settings.parse_timeout_s:g} s",
                    f"{settings.parse_timeout_s:g} s", "parse_timeout_s"))
            except (_ChildGone, ValueError, KeyError, TypeError):  # died, or a reply that is not ours
                status = child.close(kill=True) if child is not None else None
                child = None
                results[i] = _refused(name, _crashed(status, settings))
    finally:
        if child is not None:
            child.close()
    return results


# ------------------------------------------------------------------------------------------------------ the child
def _limit_memory(limit: int) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _serve(settings: IngestSettings) -> None:
    """Read files from stdin, write each one's result to the real stdout (fd 1 is kept for the replies: anything a
    library prints goes to stderr)."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer

    def reply(obj: dict) -> None:
        body = json.dumps(obj).encode()
        out.write(_HEADER.pack(len(body)) + body)
        out.flush()

    _limit_memory(settings.parse_memory_bytes)
    reply({"ready": True})
    while True:
        head = inp.read(_HEADER.size)
        if len(head) < _HEADER.size:
            return
        meta = json.loads(inp.read(_HEADER.unpack(head)[0]))
        data = inp.read(_HEADER.unpack(inp.read(_HEADER.size))[0])
        docs, refusals = load_bytes(meta["name"], data, settings)
        del data
        reply({"docs": [asdict(d) for d in docs], "refusals": refusals.to_json()})


if __name__ == "__main__":
    _serve(IngestSettings.model_validate_json(sys.argv[1]))
