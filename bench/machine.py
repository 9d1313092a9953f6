"""A one-line description of the machine a figure was measured on, and the commit it was measured at."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import psutil


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    except OSError:
        pass
    mem = psutil.virtual_memory().total / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, Python {platform.python_version()}"


def commit() -> str:
    """The checkout's short commit hash ('' outside a git checkout)."""
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True).stdout.strip()
