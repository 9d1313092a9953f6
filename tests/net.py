"""What the tests' own servers (PostgreSQL, Chroma, Streamlit, nginx) share: a free TCP port on 127.0.0.1, and how
one is stopped."""

from __future__ import annotations

import socket
import subprocess


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def forbid_network(what: str) -> None:
    """Make every outgoing connection of this process raise (the subprocess scripts that check nothing is
    downloaded call it first)."""

    def refused(*a, **k):
        raise RuntimeError(f"network access {what}")

    socket.socket.connect = refused  # type: ignore[method-assign]
    socket.create_connection = refused  # type: ignore[assignment]


def stop(proc: subprocess.Popen, timeout: float = 15) -> None:
    """End a server the tests started: SIGTERM, then SIGKILL after `timeout` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
