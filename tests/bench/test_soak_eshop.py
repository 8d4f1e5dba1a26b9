"""The e-shop soak, short: customers over real HTTP against the real host, timer worker and job
worker on a dev server of its own, while the workers and the host are SIGKILLed and the server
is killed and restarted; the host's log checked at the end (`bench/soak_eshop.py`; a user runs
it at any size)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import run_script

SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak_eshop.py"


@pytest.mark.timeout(300)
def test_every_order_ends_once_and_the_stock_and_job_add_up_under_chaos() -> None:
    done = run_script(
        [
            sys.executable,
            str(SOAK),
            "--customers",
            "50",
            "--duration",
            "30",
            "--grace",
            "3",
            "--kills",
            "1",
            "--host-kills",
            "1",
            "--settle",
            "40",
            "--seed",
            "13",  # kills both workers while the server is down, then the host
            "--json",
        ],
        timeout=240,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-5000:]
    report = json.loads(lines[-1])
    summary = {name: report[name] for name in report["must_be_zero"]}
    assert len(summary) > 20 and "unresolved" in summary and "slots_lost" in summary
    assert summary == dict.fromkeys(summary, 0), (summary, report["problems"])
    # Every path was taken: paid, cancelled by its timer, by its customer and for want of
    # stock; deleted; the job ticked; the chaos happened.
    assert report["paid"] > 0 and report["deleted"] > 0, report
    assert report["cancelled_by_timer"] > 0 and report["cancelled_by_customer"] > 0, report
    assert report["cancelled_out_of_stock"] > 0, report
    assert report["slots_handled"] > 0 and report["received_from_job"] > 0, report
    assert report["timers_set"] > 0, report
    kinds = sorted(what for what, _, _ in report["chaos"])
    assert kinds == ["host", "server", "timer worker and job worker"], kinds
    assert report["ok"] is True
    assert done.returncode == 0
