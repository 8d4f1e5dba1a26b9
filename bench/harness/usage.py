"""What a process has used so far, read from /proc: CPU seconds and resident memory."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

__all__ = ["cpu_seconds", "rss_mb"]

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of process `pid` (every thread; this one if None); NaN if
    it is gone."""
    if pid is None:
        return time.process_time()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def rss_mb(pid: int | None = None) -> float:
    """The resident set size (VmRSS) of process `pid` (this one if None), MB; NaN if gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")
