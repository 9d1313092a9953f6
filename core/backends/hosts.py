"""Several model servers sharing one build's calls: the `HostPool` both model backends and both served embedders
call through (core/backends/ollama_client.py and openai_client.py configure it with their client and how their
errors read, a `Dialect`).

Each host has its own client and `concurrency` slots. A call takes the least-busy healthy host (ties go round the
hosts in turn, so even one caller at a time spreads its calls over all of them). A host whose request fails in a
transient way (5xx, timeout, refused connection) is marked down for `HOST_DOWN_S` and the call goes on at once on
another healthy host, which does not use up a retry; with no other host up it is retried on the same host after a
doubling pause (unless the client already retried it itself, as the `openai` client does). A malformed reply is
asked again at once, on any host. Whatever is left becomes one `BackendError` naming the host and the model.

The calls are deterministic (temperature 0) and the call cache (core/backends/cache.py) keys them by the kind of
endpoint, model and prompt, never by host, so a build spread over several hosts gives what one host gives.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from core.backends.replies import MalformedReply
from core.protocols import BackendError

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.25  # first pause after a transient failure on the same host; doubles per retry, capped at 4 s
HOST_DOWN_S = 30.0  # a failed host is passed over this long while another host is up, then tried again

T = TypeVar("T")
C = TypeVar("C")


@dataclass
class Dialect:
    """How one kind of server's errors read: `label` names it in messages ("Ollama"); `describe(exc, timeout_s)`
    says what went wrong; `retryable(exc)` is True (transient), False (give up) or None (not a request failure: a
    bug, let it propagate); `fatal(exc, host, model)` is a full message for an error that needs the user (a missing
    model), else None; `client_retries(exc)` is True when the client already retried that failure itself."""

    label: str
    describe: Callable[[BaseException, float], str]
    retryable: Callable[[BaseException], bool | None]
    fatal: Callable[[BaseException, str, str], str | None]
    client_retries: Callable[[BaseException], bool] = lambda exc: False


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
                 timeout_s: float, dialect: Dialect):
        if not urls:
            raise ValueError("a host pool needs at least one host")
        self.hosts: list[Host[C]] = [Host(u, make_client(u)) for u in urls]
        self.limit = max(1, int(concurrency))
        self.retries = max(0, int(retries))
        self.timeout_s = float(timeout_s)
        self.dialect = dialect
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
    def run(self, what: str, model: str, attempt: Callable[[Host[C], int, bool], T]) -> T:
        """Call `attempt(host, i, after_malformed)` until it returns: at most retries + 1 tries, plus one move to
        another host per host that fails."""
        d = self.dialect
        tries = self.retries + 1
        moves = len(self.hosts) - 1
        problem, url = "", self.host
        after_malformed = False
        i = 0
        while True:
            host = self._acquire()
            url = host.url
            try:
                result = attempt(host, i, after_malformed)
                self._revive(host)
                return result
            except MalformedReply as exc:
                problem, after_malformed = f"malformed reply: {exc}", True
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
                    raise BackendError(f"{d.label} at {host.url} refused to {what} with model {model!r}: {reason}") \
                        from None
                problem, after_malformed = reason, False
                if moves and self._fail_over(host):
                    moves -= 1
                    log.warning("%s at %s failed to %s (%s): %s; going on on another host", d.label, host.url, what,
                                model, problem)
                    continue
                if d.client_retries(exc):  # the client already made retries + 1 tries of this request
                    raise BackendError(f"{d.label} at {host.url} failed to {what} with model {model!r} after {tries} "
                                       f"attempt{'s' if tries > 1 else ''}: {problem}") from None
            finally:
                self._release(host)
            i += 1
            if i >= tries:
                break
            log.warning("%s %s (%s) attempt %d/%d failed: %s", d.label, what, model, i, tries, problem)
            if not after_malformed:
                time.sleep(min(4.0, RETRY_BACKOFF_S * 2 ** (i - 1)))
        raise BackendError(f"{d.label} at {url} failed to {what} with model {model!r} after {tries} attempt"
                           f"{'s' if tries > 1 else ''}: {problem}")


def require_all(statuses: list[EndpointStatus]) -> list[EndpointStatus]:
    """The statuses when every host is ready, else a BackendError with the not-ready hosts' messages on one line."""
    bad = [st for st in statuses if not st.ok]
    if bad:
        raise BackendError(" ".join(st.message for st in bad))
    return statuses
