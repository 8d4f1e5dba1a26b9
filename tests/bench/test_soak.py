"""The chaos soak, short: a few hundred aggregates' schedules while two workers are SIGKILLed in
turn and together and the dev server killed and restarted, the host's ledger checked against
the model (`bench/soak.py`; a user runs it at any size)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import run_script

SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak.py"


@pytest.mark.timeout(600)
def test_nothing_lost_early_twice_or_after_a_cancel_under_chaos() -> None:
    done = run_script(
        [
            sys.executable,
            str(SOAK),
            "--aggregates",
            "240",
            "--duration",
            "40",
            "--kills",
            "2",
            "--workers",
            "2",
            "--settle",
            "8",
            "--seed",
            "11",
            "--json",
        ],
        timeout=540,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-5000:]
    report = json.loads(lines[-1])
    summary = {
        name: report[name]
        for name in (
            "lost",
            "early",
            "decided_twice",
            "wrongly_delivered",
            "parked_wrongly",
            "cron_gaps",
            "cron_stalled",
            "still_running",
        )
    }
    assert summary == dict.fromkeys(summary, 0), (summary, report["problems"])
    assert report["expected"] > 100
    assert report["decided_once"] == report["expected"]
    assert report["parked"] == report["parked_expected"] == report["delivered_after_retry"] > 0
    chaos = sorted(what for what, _, _ in report["chaos"])
    assert chaos == ["all workers", "server", "worker 1", "worker 2"], chaos
    assert report["ingest_inside_per_s"] > 0 and report["ingest_outside_per_s"] > 0
    assert report["ok"] is True
    assert done.returncode == 0
