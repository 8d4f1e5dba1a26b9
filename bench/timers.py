"""Benchmark: wow timers end to end on a dev server against bare Temporal side by side:
throughput, a burst's drain, lateness, Temporal Cloud actions per command, ingest, and the cost
of telemetry. What each measures and how: docs/benchmarks.md, "Timers"."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from datetime import timedelta

from bench._dev_stack import dev_stack, say
from bench._timers_measures import TimersReport, measure_timers, print_timers
from bench._timers_rig import IDLE_QUEUE, WOW_QUEUE, Rig, bare_worker, wow_worker
from bench._timers_telemetry import TelemetryReport, measure_telemetry, print_telemetry
from bench.harness import Verdicts, bench_main, parser, ratio, sized
from wow_temporal.timers.client import TimerClient
from wow_temporal.timers.workflow import DeliverySettings

QUICK = {"n": 40, "rounds": 1, "telemetry_rounds": 1}
FULL = {"n": 300, "rounds": 2, "telemetry_rounds": 3}


@dataclass
class Report:
    """Every measure, and what the host saw."""

    n: int
    rounds: int
    telemetry_rounds: int
    seconds: float
    timers: TimersReport | None
    telemetry: TelemetryReport
    undelivered: int
    duplicates: int


async def run(args: argparse.Namespace) -> Report:
    started = time.perf_counter()
    async with dev_stack(args, "timers") as stack:
        client, host = stack.client, stack.host
        delivery = DeliverySettings(initial_interval=timedelta(milliseconds=200))
        rig = Rig(
            client,
            host,
            TimerClient(client, task_queue=WOW_QUEUE, delivery=delivery),
            TimerClient(client, task_queue=IDLE_QUEUE, delivery=delivery),
        )
        async with wow_worker(client, host.url, WOW_QUEUE), bare_worker(client):
            say(
                f"dev server up in {time.perf_counter() - started:.1f}s; N={args.n}, "
                f"{args.rounds} round(s) ({args.telemetry_rounds} for telemetry); "
                f"dynamic config {stack.server.dynamic_config}"
            )
            timers = None if args.only else await measure_timers(rig, args, args.n, args.rounds)
            # 5. last: it installs the process's tracer provider.
            telemetry = await measure_telemetry(
                rig, stack.server, delivery, args.n, args.telemetry_rounds
            )
            duplicates = await host.duplicates()
    seconds = time.perf_counter() - started
    return Report(
        args.n,
        args.rounds,
        args.telemetry_rounds,
        seconds,
        timers,
        telemetry,
        rig.undelivered,
        duplicates,
    )


def text(report: Report) -> None:
    what = "telemetry on against off" if report.timers is None else "vs bare Temporal"
    rounds = report.rounds if report.timers else report.telemetry_rounds
    print(
        f"=== wow timers {what}: N={report.n}, {rounds} round(s), "
        f"best kept; {report.seconds:.0f}s in all ==="
    )
    if report.timers is not None:
        print_timers(report.timers)
    print_telemetry(report.telemetry)
    print(f"host duplicates (redeliveries): {report.duplicates}")


def verdicts(report: Report) -> Verdicts:
    """Nothing early, missing or undelivered; metrics really on (every delivery counted) and
    spans exported only when on; a one-shot command costs 2 actions; the ratios to bare."""
    tel = report.telemetry
    zero = {
        "undelivered": report.undelivered,
        "deliveries_uncounted": max(0, tel.delivered - round(tel.deliveries)),
        "spans_exported_off": tel.spans["teloff"],
    }
    ratios = {"telemetry_on_off": ratio(tel.on, tel.off)}
    figures: dict[str, float] = {}
    t = report.timers
    if t is not None:
        # hundredths of an action a one-shot command costs over or under 2 (printed as 2.00)
        zero["one_shot_actions_not_2"] = round(abs(t.actions.one_shot[0] - 2) * 100)
        zero |= {"early": t.late.early, "missing": t.late.missing}
        ratios |= {
            "throughput": ratio(t.flow["wow"], t.flow["bare"]),
            "burst_drain": ratio(t.best["wow"].rate, t.best["bare"].rate),
            "ingest": ratio(t.ingest["wow"], t.ingest["bare"]),
        }
        figures = {
            "lateness_p50_ms": t.late.p50,
            "lateness_p99_ms": t.late.p99,
            "ingest_wow_per_s": t.ingest["wow"],
            "ingest_bare_per_s": t.ingest["bare"],
            "cron_actions_per_slot": t.actions.cron_per_slot,
        }
    return Verdicts(
        must_be_zero=zero,
        must_be_positive={"spans_exported_on": tel.spans["telon"]},
        ratios=ratios,
        figures=figures | {"host_duplicates": report.duplicates},
    )


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--n", type=int, help="commands per burst (default 300, quick 40)")
    p.add_argument(
        "--rounds", type=int, help="interleaved rounds (default 2, telemetry 3; quick 1)"
    )
    p.add_argument("--only", choices=["telemetry"], help="measure 5 alone: telemetry on/off")
    args = p.parse_args()
    args.telemetry_rounds = args.rounds  # --rounds sets both
    return bench_main(sized(args, QUICK, FULL), run, text, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
