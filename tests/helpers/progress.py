"""Progress of a long run: a line as each test file finishes (its outcomes and seconds, then how
far the run is), so `./run test` shows where it is instead of minutes of dots. Printed at the
default verbosity only (`-v` prints a line per test already, `-q` asks for quiet); works with
xdist, whose workers' reports reach the controlling process."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

_OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


@dataclass
class _File:
    """One test file: how many tests it has, how many have finished, how each ended."""

    total: int
    done: int = 0
    seconds: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)


@dataclass
class _Run:
    files: dict[str, _File] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    tests_done: int = 0
    files_done: int = 0

    @property
    def tests(self) -> int:
        return sum(f.total for f in self.files.values())


_RUN_KEY = pytest.StashKey[_Run]()
_CONFIG: dict[str, pytest.Config] = {}


def _run(config: pytest.Config) -> _Run | None:
    return config.stash.get(_RUN_KEY, None)


def _count(config: pytest.Config, nodeids: list[str]) -> None:
    """Know the run's files and their tests once (every xdist worker collects the same)."""
    if config.get_verbosity() != 0 or _run(config) is not None:
        return
    totals = Counter(nodeid.split("::", 1)[0] for nodeid in nodeids)
    config.stash[_RUN_KEY] = _Run({path: _File(total) for path, total in totals.items()})


def pytest_collection_finish(session: pytest.Session) -> None:
    """Without xdist: the tests this process collected."""
    if not hasattr(session.config, "workerinput"):
        _count(session.config, [item.nodeid for item in session.items])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """With xdist, in the controller: what the first worker collected."""
    _count(node.config, list(ids))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count a finished test in its file; when the file is done, say so."""
    config = _CONFIG.get("config")
    run = _run(config) if config is not None else None
    if run is None or config is None:
        return
    found = run.files.get(report.nodeid.split("::", 1)[0])
    if found is None:
        return
    found.seconds += report.duration
    if report.failed:
        found.outcomes["error" if report.when != "call" else "failed"] += 1
    elif report.when == "call" or (report.when == "setup" and report.skipped):
        outcome = getattr(report, "wasxfail", None) is not None and (
            "xfailed" if report.skipped else "xpassed"
        )
        found.outcomes[outcome or report.outcome] += 1
    if report.when != "teardown":
        return
    found.done += 1
    run.tests_done += 1
    if found.done == found.total:
        run.files_done += 1
        _say(config, report.nodeid.split("::", 1)[0], found, run)


def _say(config: pytest.Config, path: str, done: _File, run: _Run) -> None:
    """`tests/unit/test_cron.py: 40 passed in 3.2 s | 120/1017 tests, 4/95 files, 0:21`."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    counts = ", ".join(f"{done.outcomes[o]} {o}" for o in _OUTCOMES if done.outcomes[o])
    elapsed = int(time.monotonic() - run.started)
    if reporter._tw.width_of_current_line:  # after the dots of this line
        reporter._tw.line()
    reporter.write_line(
        f"{path}: {counts or 'nothing run'} in {done.seconds:.1f} s | "
        f"{run.tests_done}/{run.tests} tests, {run.files_done}/{len(run.files)} files, "
        f"{elapsed // 60}:{elapsed % 60:02d}"
    )


def pytest_configure(config: pytest.Config) -> None:
    """Remember the config: a report from an xdist worker does not carry it."""
    _CONFIG["config"] = config
