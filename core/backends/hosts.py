"""Several model servers sharing one build's calls: the `HostPool` both model backends and both served embedders
call through (core/backends/ollama_client.py and openai_client.py configure it with their client and how their
errors read, a `Dialect`). The pool alone retries: neither client retries by itself, so attempts and pauses are
counted once.

Each host has its own client and `concurrency` slots. A call takes the least-busy healthy host (ties go round the
hosts in turn, so even one caller at a time spreads its calls over all of them). A host whose request fails in a
transient way (5xx, 429, an overloaded server, a timeout, a refused connection, an unreadable body) is marked down
for `HOST_DOWN_S` and the call goes on at once on another healthy host, which does not use up an attempt; with no
other host up (one host, or all of them overloaded) it is retried on the same host after a pause. The pause is
exponential backoff with full jitter, `backoff_pause`: uniform in [0, min(BACKOFF_MAX_S, backoff_s * 2^(k-1))]
before the k-th retry; and at least what the server asked for in `Retry-After` (seconds or an HTTP date, or
`retry-after-ms`), up to RETRY_AFTER_MAX_S. A reply that came but is malformed (not JSON, not the schema after
repair, nested too deep to read) is asked again at once, on any host. A call makes at most `retries` + 1 attempts
(plus one move per other host); whatever is left becomes one `BackendError` naming the host and the model.

Why `retries` = 12 by default (BackendSettings.retries): a server whose replies fail independently 30 % of the time
fails all 13 attempts of a call with p = 0.3^13 = 1.6e-7, so a build of 5,000 calls loses one in about 1,200
builds (with 3 attempts, as before, one call in 37 failed). Worst case of one call, all attempts failing: 13
timeouts (a stall costs `timeout_s`; 120 s by default: 26 min) plus 12 pauses of at most max(BACKOFF_MAX_S,
RETRY_AFTER_MAX_S) = 60 s each (12 min; without Retry-After the pauses add up to at most 120.5 s), plus one timeout
per move to another host. A refused connection costs no timeout: a dead lone server fails a call in about a minute.

The calls are deterministic (temperature 0) and the call cache (core/backends/cache.py) keys them by the kind of
endpoint, model and prompt, never by host, so a build spread over several hosts gives what one host gives.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timezone
from typing import Any, Generic, TypeVar

from core.backends.replies import MalformedReply
from core.protocols import BackendError
from core.secrets import redact_url

log = logging.getLogger(__name__)

BACKOFF_MAX_S = 15.0  # cap of the doubling pause between two attempts on the same host (before jitter)
RETRY_AFTER_MAX_S = 60.0  # a server's Retry-After is waited up to this long (the `openai` client's own limit)
HOST_DOWN_S = 30.0  # a failed host is passed over this long while another host is up, then tried again

T = TypeVar("T")
C = TypeVar("C")


def backoff_pause(retry: int, base_s: float, cap_s: float = BACKOFF_MAX_S, rng: random.Random | None = None) -> float:
    """The pause before the `retry`-th retry (1, 2, ...): full jitter, uniform in [0, min(cap_s, base_s *
    2^(retry-1))], so callers that failed together do not come back together."""
    ceiling = min(float(cap_s), float(base_s) * 2.0 ** min(max(retry, 1) - 1, 60))
    return (rng or random).uniform(0.0, max(0.0, ceiling))


def retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """The wait in seconds an error reply's headers ask for: `retry-after-ms`, else `Retry-After` as seconds or as
    an HTTP date (from `now`, default the clock); None when they ask for none or it cannot be read."""
    if not headers:
        return None
    lower = {str(k).lower(): str(v).strip() for k, v in headers.items()}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        if not lower.get(name):
            continue
        try:
            value = float(lower[name]) * scale
        except ValueError:
            continue
        if math.isfinite(value):
            return max(0.0, value)
    try:
        when = email.utils.parsedate_to_datetime(lower.get("retry-after") or "")
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass
class Dialect:
    """How one kind of server's errors read: `label` names it in messages ("Ollama"); `describe(exc, timeout_s)`
    says what went wrong; `retryable(exc)` is True (transient), False (give up) or None (not a request failure: a
    bug, let it propagate); `fatal(exc, host, model)` is a full message for an error that needs the user (a missing
    model), else None; `retry_after(exc)` is the wait in seconds the error reply asked for (its Retry-After), else
    None."""

    label: str
    describe: Callable[[BaseException, float], str]
    retryable: Callable[[BaseException], bool | None]
    fatal: Callable[[BaseException, str, str], str | None]
    retry_after: Callable[[BaseException], float | None] = lambda exc: None


@dataclass
class Host(Generic[C]):
    """One server: its base URL, its client, the requests in flight, until when it is passed over, and what was
    learnt about it (`notes`, e.g. which structured-output mode it accepts)."""

    url: str
    client: C
    inflight: int = 0
    down_until: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class EndpointStatus:
    """Is a server up, and does it serve the models a build needs? (`check` of either client; never raises.)"""

    reachable: bool
    host: str
    models: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.reachable and not self.missing


class HostPool(Generic[C]):
    """The hosts of one backend or embedder, their slots, and the retry and failover policy (module docstring)."""

    def __init__(self, urls: Sequence[str], make_client: Callable[[str], C], *, concurrency: int, retries: int,
                 timeout_s: float, dialect: Dialect, backoff_s: float = 0.5):
        if not urls:
            raise ValueError("a host pool needs at least one host")
        self.hosts: list[Host[C]] = [Host(u, make_client(u)) for u in urls]
        self.limit = max(1, int(concurrency))
        self.retries = max(0, int(retries))
        self.timeout_s = float(timeout_s)
        self.backoff_s = max(0.0, float(backoff_s))
        self.dialect = dialect
        self._rng = random.Random()  # the jitter: unseeded on purpose, callers that fail together part ways
        self._cond = threading.Condition()
        self._turn = 0

    @property
    def host(self) -> str:
        """The first host's URL (the only one, with one host)."""
        return self.hosts[0].url

    @property
    def client(self) -> C:
        """The first host's client."""
        return self.hosts[0].client

    # -- slots -------------------------------------------------------------------------------------------------
    def _acquire(self) -> Host[C]:
        """A slot on the least-busy host among those up (all of them when none is), waiting while they are full."""
        with self._cond:
            while True:
                now = time.monotonic()
                up = [h for h in self.hosts if h.down_until <= now]
                usable = up or [min(self.hosts, key=lambda h: h.down_until)]
                free = [h for h in usable if h.inflight < self.limit]
                if free:
                    least = min(h.inflight for h in free)
                    ties = [h for h in free if h.inflight == least]
                    host = ties[self._turn % len(ties)]
                    self._turn += 1
                    host.inflight += 1
                    return host
                self._cond.wait(timeout=0.5)  # a slot is released, or a down mark runs out

    def _release(self, host: Host[C]) -> None:
        with self._cond:
            host.inflight -= 1
            self._cond.notify_all()

    def _fail_over(self, host: Host[C]) -> bool:
        """Mark `host` down when another host is up (True: go on there); False when it is the only one up."""
        with self._cond:
            now = time.monotonic()
            if not any(h is not host and h.down_until <= now for h in self.hosts):
                return False
            host.down_until = now + HOST_DOWN_S
            self._cond.notify_all()
            return True

    def _revive(self, host: Host[C]) -> None:
        if host.down_until:
            with self._cond:
                host.down_until = 0.0

    # -- calls -------------------------------------------------------------------------------------------------
    def pause(self, retry: int, asked: float | None = None) -> float:
        """The pause before the `retry`-th retry on the same host: the jittered backoff, and at least the server's
        Retry-After (`asked`, up to RETRY_AFTER_MAX_S)."""
        backoff = backoff_pause(retry, self.backoff_s, BACKOFF_MAX_S, self._rng)
        return max(backoff, min(asked or 0.0, RETRY_AFTER_MAX_S))

    def run(self, what: str, model: str, attempt: Callable[[Host[C], int, bool], T]) -> T:
        """Call `attempt(host, i, after_malformed)` until it returns: at most retries + 1 tries, plus one move to
        another host per host that fails (module docstring)."""
        d = self.dialect
        tries = self.retries + 1
        moves = len(self.hosts) - 1
        problem, url = "", self.host
        after_malformed = False
        asked: float | None = None
        i = 0
        while True:
            host = self._acquire()
            url = host.url
            slot = cluster_slot(host.url, self.limit)
            try:
                result = attempt(host, i, after_malformed)
                self._revive(host)
                return result
            except MalformedReply as exc:
                problem, after_malformed, asked = f"malformed reply: {exc}", True, None
            except RecursionError:  # json or pydantic gave up on a reply (or its body) nested too deep
                problem, after_malformed, asked = "malformed reply: nested too deep to read", True, None
            except BackendError:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below; unknown errors propagate
                retry = d.retryable(exc)
                if retry is None:
                    raise
                message = d.fatal(exc, host.url, model)
                if message:
                    raise BackendError(message) from None
                reason = d.describe(exc, self.timeout_s)
                if not retry:
                    raise BackendError(f"{d.label} at {redact_url(host.url)} refused to {what} with model {model!r}: "
                                       f"{reason}") \
                        from None
                problem, after_malformed, asked = reason, False, d.retry_after(exc)
                if moves and self._fail_over(host):
                    moves -= 1
                    log.warning("%s at %s failed to %s (%s): %s; going on on another host", d.label, redact_url(host.url), what,
                                model, problem)
                    continue
            finally:
                if slot is not None:
                    slot.release()
                self._release(host)
            i += 1
            if i >= tries:
                break
            wait = 0.0 if after_malformed else self.pause(i, asked)
            log.warning("%s %s (%s) attempt %d/%d failed: %s; trying again in %.2f s", d.label, what, model, i, tries,
                        problem, wait)
            if wait:
                time.sleep(wait)
        raise BackendError(f"{d.label} at {redact_url(url)} failed to {what} with model {model!r} after {tries} attempt"
                           f"{'s' if tries > 1 else ''}: {problem}")


_SLOTS: dict[tuple[str, int], Any] = {}
_SLOTS_LOCK = threading.Lock()


def cluster_slot(url: str, limit: int) -> Any:
    """In a Dask worker (a build's unit, core/pipeline/engine.py): a lease of the cluster's semaphore of model host
    `url`, so `limit` calls at most are in flight on it across all workers of the cluster (released by the caller);
    elsewhere None (this process's own slots are the limit)."""
    try:
        from distributed import Semaphore, get_worker

        get_worker()
    except (ImportError, ValueError):
        return None
    with _SLOTS_LOCK:
        sem = _SLOTS.get((url, limit))
        if sem is None:
            sem = _SLOTS[(url, limit)] = Semaphore(max_leases=limit, name=f"strata-host:{redact_url(url)}:{limit}")
    sem.acquire()
    return sem


def require_all(statuses: list[EndpointStatus]) -> list[EndpointStatus]:
    """The statuses when every host is ready, else a BackendError with the not-ready hosts' messages on one line."""
    bad = [st for st in statuses if not st.ok]
    if bad:
        raise BackendError(" ".join(st.message for st in bad))
    return statuses
