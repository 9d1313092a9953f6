"""Each model host's real speed over a time span (a build's run): the calls it answered, the tokens it read and
wrote, and its tokens per second, from the call cache's rows (core/backends/model_backend.py records each reply's
host, token counts and seconds in `LLMCall.request`).

Reading and writing speeds: where the server timed both itself (Ollama's prompt_eval/eval durations,
llama-server's `timings`), tokens over its own seconds. Otherwise (llama-cpp-python, vLLM, a hosted API: only the
token counts) a least-squares fit of each request's seconds = prompt tokens / read speed + reply tokens / write speed
+ a fixed cost, with non-negative terms; where the calls do not tell the two apart (too few, or the fit gives no
term for one of them), the write speed is reply tokens over the requests' whole seconds (a lower bound) and the read
speed is unknown. A reply from the cache costs nothing and is not counted: a rebuild that replays every call shows
no host at all.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from scipy.optimize import nnls
from sqlmodel import col, select

from core.models import LLMCall
from core.store import Store

MIN_FIT = 4  # requests a fit needs


@dataclass
class HostSpeed:
    host: str
    calls: int
    tokens_in: int
    tokens_out: int
    seconds: float  # of the requests, summed (requests in parallel overlap)
    read_per_s: float | None  # prompt tokens read per second of one request, None when unknown
    write_per_s: float | None  # reply tokens written per second of one request
    how: str  # "server's timings", "fit", "reply tokens / request seconds"


def speed(host: str, usages: list[dict[str, Any]]) -> HostSpeed:
    """The speed of one host from its replies' usage records ({"in", "out", "s", and maybe "in_s", "out_s"})."""
    tin = sum(int(u.get("in") or 0) for u in usages)
    tout = sum(int(u.get("out") or 0) for u in usages)
    secs = sum(float(u.get("s") or 0.0) for u in usages)
    base = dict(host=host, calls=len(usages), tokens_in=tin, tokens_out=tout, seconds=secs)
    timed = [u for u in usages if u.get("in_s") and u.get("out_s")]
    if timed and len(timed) == len(usages):
        read = sum(int(u.get("in") or 0) for u in timed) / max(1e-9, sum(float(u["in_s"]) for u in timed))
        write = sum(int(u.get("out") or 0) for u in timed) / max(1e-9, sum(float(u["out_s"]) for u in timed))
        return HostSpeed(**base, read_per_s=read, write_per_s=write, how="server's timings")  # type: ignore[arg-type]
    if len(usages) >= MIN_FIT:
        a = np.array([[float(u.get("in") or 0), float(u.get("out") or 0), 1.0] for u in usages])
        y = np.array([float(u.get("s") or 0.0) for u in usages])
        coef, _ = nnls(a, y)
        if coef[0] > 1e-6 and coef[1] > 1e-6:
            return HostSpeed(**base, read_per_s=1.0 / coef[0], write_per_s=1.0 / coef[1],  # type: ignore[arg-type]
                             how="fit")
    return HostSpeed(**base, read_per_s=None, write_per_s=tout / secs if secs > 0 else None,  # type: ignore[arg-type]
                     how="reply tokens / request seconds")


def host_speeds(store: Store, since: datetime, until: datetime | None = None) -> list[HostSpeed]:
    """Every host that answered a call (not from the cache) between `since` and `until` (default: now), by
    host."""
    q = select(LLMCall.request).where(col(LLMCall.created_at) >= since)
    if until is not None:
        q = q.where(col(LLMCall.created_at) <= until)
    by_host: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with store.session() as s:
        for request in s.exec(q):
            usage = (request or {}).get("usage") if isinstance(request, dict) else None
            if isinstance(usage, dict) and (request or {}).get("host"):
                by_host[str(request["host"])].append(usage)
    return [speed(h, u) for h, u in sorted(by_host.items())]
