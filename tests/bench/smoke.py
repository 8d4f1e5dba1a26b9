"""The benches' smoke runs, one table: each bench and soak runs as `python -m bench.NAME --quick
--json` and is read as data. Its exit code judges what must be 0 (nothing lost, early or twice)
and what must have happened; here, the verdicts it must name are named and every ratio against
the baseline and every figure is finite; the figures' size is the bench's to report, never
asserted here. The runs are split over three test modules (`GROUPS`) so that the test processes
share them."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from tests.helpers.processes import run_script


@dataclass(frozen=True)
class Bench:
    """A bench's smoke run: how long it may take, the verdicts its JSON must name, and its flags
    beyond `--quick --json`."""

    timeout: float
    zero: tuple[str, ...] = ()
    positive: tuple[str, ...] = ()
    ratios: tuple[str, ...] = ()
    args: tuple[str, ...] = ()


BENCHES = {
    "cron": Bench(
        120, zero=("next_differs", "rates_not_finite"), positive=("cases",), ratios=("median",)
    ),
    "ingest": Bench(
        180,
        zero=("lost",),
        positive=("change_cases",),
        ratios=("apply", "api_single", "api_batched", "after_sigkill_rate", "after_sigkill_p99"),
    ),
    "timers": Bench(
        300,
        zero=(
            "early",
            "missing",
            "undelivered",
            "one_shot_actions_not_2",
            "deliveries_uncounted",
            "spans_exported_off",
        ),
        positive=("spans_exported_on",),
        ratios=("throughput", "burst_drain", "ingest", "telemetry_on_off"),
    ),
    "jobs": Bench(
        300,
        zero=("early", "burst_unhandled"),
        positive=("wow_ticks", "native_ticks"),
        ratios=("lateness_p99", "burst_throughput"),
    ),
    "capacity": Bench(
        180,
        zero=("burst_undelivered", "pending_not_running"),
        positive=("job_ticks", "pending_steps", "enable_rate"),
        ratios=("burst_drain",),
    ),
    "host": Bench(
        300,
        zero=("errors", "relay_unhanded"),
        positive=(
            "receive_stock_http_rate",
            "confirm_order_stock_http_rate",
            "create_order_http_rate",
            "receive_stock_http_cpu_ms",
            "confirm_order_stock_http_cpu_ms",
            "http_floor_rate",
            "relay_handed",
            "relay_lag_p50_ms",
            "timer_starts_read",
            "timers_ingest",
            "replicas_pg1_rate",
            "replicas_pg2_rate",
            "replicas_pg1_pg_cpu_ms",
            "replicas_pg2_host_cpu_ms",
        ),
        ratios=(
            *(
                f"{kind}_http_per_{floor}"
                for kind in ("receive_stock", "confirm_order_stock")
                for floor in ("sqlite", "recorder", "in_process")
            ),
            "create_order_http_per_in_process",
            "replicas_pg2_per_pg1",
        ),
    ),
    "soak": Bench(
        540,
        zero=(
            "lost",
            "early",
            "decided_twice",
            "wrongly_delivered",
            "parked_wrongly",
            "cron_gaps",
            "cron_stalled",
            "still_running",
            "undecided",
            "parked_unlike_expected",
            "parked_undelivered",
            "chaos_kinds_missing",
        ),
        positive=(
            "decided_once",
            "expected_over_100",
            "parked",
            "ingest_inside_per_s",
            "ingest_outside_per_s",
        ),
    ),
    "rivals": Bench(
        150,
        zero=("early", "twice", "missing"),
        positive=(
            "wow_delivered",
            "wow_relay_delivered",
            "bare_delivered",
            "dbos_sqlite_delivered",
            "dbos_pg_delivered",
        ),
        ratios=(
            *(
                f"{ours}{name}_vs_{side}"
                for ours in ("", "relay_")
                for name in ("cpu_per_1000", "start_rate", "drain_rate", "steady_p99", "burst_p99")
                for side in ("bare", "dbos_sqlite", "dbos_pg")
            ),
            "cpu_server_vs_bare",  # the Temporal sides' CPU by process and server counters
            "server_persistence_requests_vs_bare",
            "relay_cpu_server_vs_bare",
        ),
    ),
    "soak_eshop": Bench(  # its replicas on PostgreSQL: the holder killed once, PostgreSQL stopped
        240,
        zero=(
            "unresolved",
            "slots_lost",
            "timers_still_running",
            "chaos_kinds_missing",
            "takeover_slow",
            "postgres_unrecovered",
        ),
        positive=(
            "paid",
            "deleted",
            "cancelled_by_timer",
            "cancelled_by_customer",
            "cancelled_out_of_stock",
            "slots_handled",
            "received_from_job",
            "timers_set",
            "takeovers",
        ),
        args=("--replicas", "2"),
    ),
}


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


GROUPS = {
    "test_bench_handing_over": ("rivals", "host", "ingest"),
    "test_bench_soaks": ("soak", "soak_eshop"),
    "test_bench_timers": ("jobs", "capacity", "timers", "cron"),
}
"""Which test module runs which benches, the longest first in each (about two minutes each)."""


def params(module: str) -> list[Any]:
    """The benches `module` runs, each with its timeout."""
    return [
        pytest.param(name, marks=pytest.mark.timeout(BENCHES[name].timeout + 60))
        for name in GROUPS[module]
    ]


def run_quick(name: str) -> None:
    """Run bench `name` at its smoke size and check what its JSON names."""
    bench = BENCHES[name]
    done = run_script(
        [sys.executable, "-m", f"bench.{name}", "--quick", "--json", *bench.args],
        timeout=bench.timeout,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]  # 1: a verdict broke
    out = json.loads(done.stdout)
    assert (out["bench"], out["quick"]) == (name, True), out
    zero, positive, ratios = out["must_be_zero"], out["must_be_positive"], out["ratios"]
    assert set(bench.zero) <= set(zero), zero
    assert set(bench.positive) <= set(positive), positive
    assert set(bench.ratios) <= set(ratios), ratios
    assert {k: v for k, v in ratios.items() if not (_finite(v) and v > 0)} == {}, out
    assert all(_finite(v) for v in out["figures"].values()), out["figures"]
    assert isinstance(out["report"], dict) and out["report"], out
