"""What a process has used so far, read from /proc: CPU seconds and resident memory."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

__all__ = ["busy_cpu_seconds", "cpu_seconds", "rss_mb", "tree_cpu_seconds"]

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of process `pid` (every thread; this one if None); NaN if
    it is gone."""
    if pid is None:
        return time.process_time()
    fields = _stat(pid)
    return sum(fields[11:13]) / _CLK_TCK if fields else float("nan")


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of process `pid`, its children it has reaped, and its live children (a
    server's processes: PostgreSQL's postmaster and its backends); NaN if it is gone."""
    fields = _stat(pid)
    if not fields:
        return float("nan")
    ticks = sum(fields[11:15])
    for stat in Path("/proc").glob("[0-9]*/stat"):
        child = _stat(int(stat.parent.name))
        if child and child[1] == pid:
            ticks += sum(child[11:13])
    return ticks / _CLK_TCK


def busy_cpu_seconds() -> float:
    """CPU seconds every core of the machine has spent busy (all processes: not idle, not
    waiting for I/O), from /proc/stat."""
    ticks = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / _CLK_TCK


def _stat(pid: int) -> list[int]:
    """/proc/`pid`/stat's fields after the command, from the parent's id on, as integers
    (the state is 0); empty if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []
    return [0, *(int(f) for f in fields[1:])]


def rss_mb(pid: int | None = None) -> float:
    """The resident set size (VmRSS) of process `pid` (this one if None), MB; NaN if gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")
