"""The domain host benchmark still runs: `bench/host.py --quick` end to end, its figures parsed
and well-formed (positive, ordered, none lost); their size is not checked."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import run_script

BENCH = Path(__file__).resolve().parents[2] / "bench" / "host.py"

NUMBER = r"(\d+(?:\.\d+)?)"
RATE_ROW = rf"{NUMBER}/s\s+p50\s+{NUMBER} ms\s+p99\s+{NUMBER} ms"


def rows(pattern: str, out: str, count: int) -> list[tuple[float, ...]]:
    found = [tuple(float(g) for g in m.groups()) for m in re.finditer(pattern, out)]
    assert len(found) == count, (pattern, out)
    return found


def check_rate_row(rate: float, p50: float, p99: float) -> None:
    assert rate > 0
    assert 0 < p50 <= p99


@pytest.mark.timeout(360)
def test_host_bench_quick_runs_and_prints_the_figures() -> None:
    done = run_script(
        [sys.executable, str(BENCH), "--quick"],
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "=== domain host over HTTP vs bare SQLite" in out, out

    # 1. For ReceiveStock and ConfirmOrderStock: the floors, in process, over HTTP, the ratios.
    for size, *row in rows(rf"sqlite3, one (\d+) B row per transaction\s+{RATE_ROW}", out, 2):
        assert size > 100
        check_rate_row(*row)
    for row in rows(rf"eventsourcing recorder, commit \+ request id\s+{RATE_ROW}", out, 2):
        check_rate_row(*row)
    for row in rows(rf"host pipeline in process, no HTTP\s+{RATE_ROW}", out, 3):
        check_rate_row(*row)
    http = rows(
        rf"host over HTTP\s+{RATE_ROW}\s+errors (\d+)\s+host CPU {NUMBER} ms/command", out, 3
    )
    for rate, p50, p99, errors, cpu_ms in http:
        check_rate_row(rate, p50, p99)
        assert errors == 0
        assert cpu_ms > 0
    for ratios in rows(
        rf"ratio http/sqlite3 {NUMBER}\s+http/recorder {NUMBER}\s+http/in-process {NUMBER}", out, 2
    ):
        assert all(r > 0 for r in ratios)
    (floor,) = rows(rf"raw ASGI over HTTP\s+{RATE_ROW}\s+server CPU {NUMBER} ms/request", out, 1)
    check_rate_row(*floor[:3])

    # 2. The relay's lag: at half the ConfirmOrderStock rate, maybe again at a lower one.
    lags = re.findall(
        rf"commit -> apply_many returned \(Relay.on_handed\) p50 {NUMBER} ms\s+p99 {NUMBER} ms"
        rf"\s+max {NUMBER} ms\s+handed (\d+)/(\d+)",
        out,
    )
    assert 1 <= len(lags) <= 2, out
    for p50, p99, top, handed, sent in lags:
        assert 0 < float(p50) <= float(p99) <= float(top)
        assert int(handed) == int(sent) > 0  # every commit reached the timers
    starts = rows(
        rf"commit -> timer workflow start time \((\d+) read by id\) p50 {NUMBER} ms\s+p99 "
        rf"{NUMBER} ms",
        out,
        len(lags),
    )
    for read, p50, p99 in starts:
        assert read > 0
        assert 0 <= p50 <= p99
    sent = rows(rf"confirms sent at {NUMBER}/s\s+p50 {NUMBER} ms\s+p99 {NUMBER} ms", out, len(lags))
    for row in sent:
        check_rate_row(*row)
    assert re.search(r"confirms sent at .* errors 0 ", out), out
    (ingest,) = rows(rf"TimerClient.apply_many alone .*: {NUMBER} commits/s", out, 1)
    assert ingest[0] > 0
