"""Debian's nginx as the tests run it (in front of `chroma run` in tests/chroma_server.py, as the sign-in proxy in
tests/e2e/test_signin_browser.py): in the foreground, every path of its own in one temporary directory."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.net import stop

__all__ = ["NGINX", "config", "output", "start", "stop"]

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"  # (/usr/sbin is on root's PATH only)


def config(tmp: Path, http: str) -> str:
    """A whole nginx.conf whose pid, logs and temp folders are in `tmp`, with `http` inside its http block."""
    return (f"pid {tmp}/nginx.pid;\nerror_log {tmp}/error.log info;\nworker_processes 1;\n"
            "events { worker_connections 256; }\n"
            "http {\n    access_log off;\n"
            + "".join(f"    {kind}_temp_path {tmp}/{kind.split('_')[0]};\n"
                      for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            + http + "\n}\n")


def start(tmp: Path, conf: str) -> subprocess.Popen:
    """nginx on `conf` (written to tmp/nginx.conf), its output in tmp/nginx.out."""
    if not Path(NGINX).exists():
        raise RuntimeError(f"no {NGINX}: `make debs` installs Debian's nginx")
    (tmp / "nginx.conf").write_text(conf)
    with open(tmp / "nginx.out", "ab") as log:
        return subprocess.Popen([NGINX, "-p", str(tmp), "-e", str(tmp / "error.log"), "-c", str(tmp / "nginx.conf"),
                                 "-g", "daemon off;"], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def output(tmp: Path) -> str:
    """The end of what nginx said (its output and error log), for a failure message."""
    return "".join(p.read_text(errors="replace")[-1500:] for p in (tmp / "nginx.out", tmp / "error.log") if p.exists())
