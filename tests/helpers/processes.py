"""Processes the suite starts: run a script in its own process group and stop the whole group
on every exit path, and find (by an inherited environment variable) any process left behind,
even one that made a session of its own (the embedded servers do) or lost its parent."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MARK = "WOWT_SUITE_RUN"
"""Set once per test session (and per script run: `<session>/<run>`); every child inherits it."""


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or not ours to read
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie."""
    return not _zombie(pid)


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, read from /proc (psutil is not a dependency)."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> set[int]:
    """Every process below `pid` in the process tree, now."""
    tree = _children()
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def marked(prefix: str) -> list[tuple[int, str]]:
    """Live processes (not this one) whose `MARK` starts with `prefix`: (pid, command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        if _environ(pid).get(MARK, "").startswith(prefix) and not _zombie(pid):
            found.append((pid, _command(pid)))
    return found


def stop_marked(prefix: str, *, grace: float) -> list[tuple[int, str]]:
    """Give the processes `marked(prefix)` up to `grace` seconds to end by themselves, then
    SIGKILL the rest and wait for the kills to land; returns those that had to be killed."""
    deadline = time.monotonic() + grace
    while marked(prefix) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = marked(prefix)
    for pid, _ in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while left and marked(prefix) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def run_script(
    argv: Sequence[str], *, timeout: float, grace: float = 20.0
) -> subprocess.CompletedProcess[str]:
    """Run `argv` in a process group of its own, in the repository. Past `timeout` the group
    gets SIGTERM (the benchmarks stop their servers on it), then SIGKILL after `grace`;
    whatever it started is killed too. Raises `AssertionError` on a timeout or on a process
    left running."""
    run_mark = f"{os.environ.get(MARK, 'none')}/{uuid.uuid4().hex[:8]}"
    # Files, not pipes: a child that outlives the script keeps a pipe open, and reading it
    # to its end would wait for that child.
    with tempfile.TemporaryFile("w+") as out_file, tempfile.TemporaryFile("w+") as err_file:
        proc = subprocess.Popen(
            list(argv),
            stdout=out_file,
            stderr=err_file,
            text=True,
            start_new_session=True,
            cwd=REPO,
            env={**os.environ, MARK: run_mark},
        )
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        finally:
            if proc.poll() is None:  # an exception of our own: nothing outlives the call
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        out_file.seek(0)
        err_file.seek(0)
        out, err = out_file.read(), err_file.read()
    left = stop_marked(run_mark, grace=5)  # its children may still be stopping
    if timed_out:
        raise AssertionError(f"{' '.join(argv)} ran past {timeout:g}s\n{out}\n{err[-5000:]}")
    if left:
        raise AssertionError(f"{' '.join(argv)} left processes running: {left}")
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
