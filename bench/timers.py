"""Benchmark: wow timers end to end on a real dev server, against bare Temporal side by side.

One fresh headless `temporal server start-dev` (EmbeddedTemporal, timer precision 10 ms) on a
throw-away directory, one domain host (the fake Wow host, `bench.harness.HostProcess`, in its own
process: it answers `Ok` and records when each request id arrived), and one worker process (this
one) running both the wow timer worker and the bare baseline's worker on separate task queues. The
same host serves both sides. Measured:

1. Throughput, end to end (commit ingested -> host answered): N commands due on arrival, handed
   over as fast as each side takes them; rate = N / (first ingest -> last answer). Wow
   (`TimerClient.apply`, `wow.deliver` over HTTP) against bare Temporal: a workflow that
   `workflow.sleep`s until the same due time and runs one no-op activity (the issue's baseline),
   plus labelled variants whose activity does the same HTTP POST, and one that uses a start
   delay instead of a sleep. Also the drain rate of a burst all due at one instant a few seconds
   ahead (N / (last delivery - due)), where a start delay does a timer's first workflow task at
   the due time while a sleep did it at ingest. Both workers poll alike (the timer worker's
   settings), sides run in interleaved rounds (the order rotates), the best round is kept.
2. Lateness (host receive time - due) p50/p99/max at half the wow end-to-end ceiling, each
   command with its own due, spread over a few seconds, handed over ahead of time a few at once;
   early deliveries (before due) must be 0.
3. Temporal Cloud actions per delivered command, counted from histories: one-shot, a cron every
   second (per slot), a replaced and a cancelled one-shot; bare baseline for comparison.
4. Ingest: commits applied per second (`TimerClient.apply`, 50 at a time) for schedules far in the
   future, beside bare `start_workflow` calls with a start delay.
5. The cost of telemetry: the wow end-to-end throughput of 1 (due on arrival, `TimerClient.apply`
   -> `wow.deliver` over HTTP) with tracing and metrics on, as production switches them on (an
   SDK tracer provider, as `configure_tracing` installs with an `otlp-endpoint`, exporting in
   batches to an exporter that drops the spans; Temporal's tracing interceptor on the client; a
   `traceparent` on every commit; a runtime serving Prometheus metrics, scraped once at the
   end), against the same with them off (no interceptor, no `traceparent`, a runtime without
   metrics). Each side has its own client, runtime, task queue and timer worker; interleaved
   rounds (3 by default), the best kept. Runs last: the tracer provider it installs is the
   process's.

Run: `python -m bench.timers [--quick] [--json] [--n N] [--rounds R] [--only telemetry]`
(`--only telemetry`: section 5 alone). Exits 0; targets are printed as PASS/MISS, never asserted
(the machine is small and noisy).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from datetime import timedelta

from bench._timers_measures import (
    SIDES,
    TimersReport,
    measure_timers,
    print_timers,
)
from bench._timers_rig import (
    IDLE_QUEUE,
    WOW_QUEUE,
    BareHttp,
    Rig,
    bare_worker,
)
from bench._timers_telemetry import (
    TelemetryReport,
    measure_telemetry,
    print_telemetry,
    wow_worker,
)
from bench.harness import (
    HostProcess,
    Verdicts,
    bench_main,
    parser,
    ratio,
    scratch,
    sized,
)
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.timers.client import TimerClient
from wow_temporal.timers.workflow import DeliverySettings

QUICK = {"n": 40, "rounds": 1, "telemetry_rounds": 1}
FULL = {"n": 300, "rounds": 2, "telemetry_rounds": 3}


@dataclass
class Report:
    """Every section, and what the host saw."""

    n: int
    rounds: int
    telemetry_rounds: int
    seconds: float
    timers: TimersReport | None
    telemetry: TelemetryReport
    undelivered: int
    duplicates: int


async def run(args: argparse.Namespace) -> Report:
    n, rounds, telemetry_rounds = args.n, args.rounds, args.telemetry_rounds
    sides = SIDES[:2] if args.quick else SIDES
    started = time.perf_counter()
    timers_report: TimersReport | None = None

    with scratch(args, "timers") as tmp:
        server = EmbeddedTemporal(tmp / "temporal", headless=True)
        host = HostProcess(tmp / "host.log")
        try:
            await asyncio.gather(server.start(), host.start())
            client = await server.connect()
            delivery = DeliverySettings(initial_interval=timedelta(milliseconds=200))
            rig = Rig(
                client,
                host,
                TimerClient(client, task_queue=WOW_QUEUE, delivery=delivery),
                TimerClient(client, task_queue=IDLE_QUEUE, delivery=delivery),
            )
            bare_http = BareHttp(host.url)
            async with (
                wow_worker(client, host.url, WOW_QUEUE),
                bare_worker(client, bare_http),
            ):
                names = "telemetry on, off" if args.only else ", ".join(s.name for s in sides)
                print(
                    f"dev server up in {time.perf_counter() - started:.1f}s; N={n}, "
                    f"{rounds} round(s) ({telemetry_rounds} for telemetry), sides: {names}; "
                    f"dynamic config {server.dynamic_config}",
                    file=sys.stderr,
                )
                if args.only is None:
                    timers_report = await measure_timers(rig, args, sides, n, rounds)
                # 5. telemetry on against off, last: it installs the process's tracer provider.
                telemetry_report = await measure_telemetry(
                    rig, server, delivery, n, telemetry_rounds
                )
                duplicates = await host.duplicates()
            await bare_http.client.aclose()
        finally:
            await asyncio.gather(server.stop(), host.stop())
    seconds = time.perf_counter() - started
    return Report(
        n,
        rounds,
        telemetry_rounds,
        seconds,
        timers_report,
        telemetry_report,
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
        late = t.wow_late
        # hundredths of an action a one-shot command costs over or under 2 (printed as 2.00)
        zero["one_shot_actions_not_2"] = round(abs(t.actions.one_shot[0] - 2) * 100)
        zero |= {"early": late.early, "missing": late.missing}
        ratios |= {
            "throughput": ratio(t.flow["wow"], t.flow["bare"]),
            "burst_drain": ratio(t.best["wow"].rate, t.best["bare"].rate),
            "ingest": ratio(t.ingest_wow, t.ingest_bare),
        }
        figures = {
            "lateness_p50_ms": late.p50,
            "lateness_p99_ms": late.p99,
            "ingest_wow_per_s": t.ingest_wow,
            "ingest_bare_per_s": t.ingest_bare,
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
    p.add_argument(
        "--only", choices=["telemetry"], help="run one section alone (5: telemetry on against off)"
    )
    args = p.parse_args()
    args.telemetry_rounds = args.rounds  # --rounds sets both
    return bench_main(sized(args, QUICK, FULL), run, text, verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
