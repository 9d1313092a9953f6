"""A one-line description of the machine a figure was measured on."""

from __future__ import annotations

import os
import platform

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
