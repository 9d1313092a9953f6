"""Is a run's holder still alive? A lease holder is named `host:pid:start.nonce` (core/pipeline/lease.py: the host name,
the process id, the process's start time in clock ticks since boot, and a nonce per claim). On the host that ran it,
a holder whose process is gone (no such pid, a zombie, or the pid reused by a younger process) is known dead at once,
without waiting for its lease to run out; on any other host only the lease tells.

Hosts sharing a database must have distinct host names (containers get their own by default).
"""

from __future__ import annotations

import os
import socket


def host_name() -> str:
    return socket.gethostname()


def start_ticks(pid: int) -> str | None:
    """When process `pid` started (field 22 of /proc/PID/stat, ticks since boot), None where /proc has no such
    process or there is no /proc."""
    stat = _stat(pid)
    return stat[19] if stat is not None and len(stat) > 19 else None


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2:].split()


def holder_token(nonce: str) -> str:
    """This process's name as a lease holder."""
    pid = os.getpid()
    return f"{host_name()}:{pid}:{start_ticks(pid) or 0}.{nonce}"


def holder_gone(token: str | None) -> bool:
    """True when `token` names a process of this host that no longer runs (see the module doc); False when it runs,
    when it is another host's, or when the token does not say (None, an older format)."""
    if not token:
        return False
    parts = token.split(":")
    if len(parts) != 3 or parts[0] != host_name():
        return False
    try:
        pid = int(parts[1])
    except ValueError:
        return False
    if os.path.isdir("/proc/self"):
        stat = _stat(pid)
        if stat is None or stat[0] in ("Z", "X"):  # gone, or a zombie nobody reaped yet
            return True
        started = parts[2].split(".", 1)[0] if "." in parts[2] else ""
        return bool(started) and started != "0" and len(stat) > 19 and stat[19] != started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists (another user's, say)
        return False
    return False
