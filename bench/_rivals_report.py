"""`bench.rivals`' figures and what it says of them: each side's `Result`, the run's `Report`,
the text printed, and the verdicts (none early, twice or missing; wow-temporal's ratios to each
other side)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.harness import Verdicts, ratio


@dataclass
class Result:
    """One side's figures (ms, per second, CPU seconds per 1,000 timers) and its counts."""

    side: str
    timers: int
    start_rate: float
    steady_p50_ms: float
    steady_p99_ms: float
    burst_p50_ms: float
    burst_p99_ms: float
    drain_rate: float
    started_after_due: int
    cpu_per_1000: dict[str, float]
    server_per_1000: dict[str, float]
    delivered: int
    early: int
    twice: int
    missing: int
    seconds: float

    @property
    def cpu_total(self) -> float:
        return sum(self.cpu_per_1000.values())


@dataclass
class Report:
    steady: int
    over: float
    burst: int
    in_flight: int
    batch: int
    lead: float
    results: list[Result]
    seconds: float


def _cpu_text(r: Result) -> str:
    parts = ", ".join(f"{k} {v:.1f}" for k, v in r.cpu_per_1000.items())
    return f"{r.cpu_total:6.1f} s ({parts})"


def text(report: Report) -> None:
    print(
        f"=== wow-temporal against bare Temporal and DBOS Transact: {report.steady} timers due "
        f"over {report.over:g} s + {report.burst} due at one instant; {report.in_flight} requests "
        f"in flight, {report.batch} a request, first due {report.lead:g} s after the first "
        f"start; {report.seconds:.0f} s in all ==="
    )
    print(
        f"{'side':12} {'start/s':>8} {'steady p50/p99 ms':>18} {'burst p50/p99 ms':>17} "
        f"{'drain/s':>8}  CPU per 1,000 timers"
    )
    for r in report.results:
        late = f" ({r.started_after_due} started after due)" if r.started_after_due else ""
        print(
            f"{r.side:12} {r.start_rate:8.0f} {r.steady_p50_ms:8.0f}/{r.steady_p99_ms:<9.0f} "
            f"{r.burst_p50_ms:8.0f}/{r.burst_p99_ms:<8.0f} {r.drain_rate:8.1f}  {_cpu_text(r)}"
            f"{late}"
        )
        print(
            f"{'':12} delivered {r.delivered}/{r.timers}, early {r.early}, twice {r.twice}, "
            f"missing {r.missing}; {r.seconds:.0f} s"
        )
        if r.server_per_1000:
            totals = {k: v for k, v in r.server_per_1000.items() if ":" not in k}
            counted = ", ".join(f"{k} {v:.0f}" for k, v in totals.items())
            print(f"{'':12} server per 1,000 timers: {counted}")
    for ours, other in _pairs(report):
        shown = [f"{name} {value:.2f}" for name, value in _ratios(ours, other).items()]
        print(f"{ours.side} / {other.side}: " + "  ".join(shown[: len(_RATIOS)]))
        if shown[len(_RATIOS) :]:
            print(f"{'':12} " + "  ".join(shown[len(_RATIOS) :]))


OURS = {"wow": "", "wow-relay": "relay_"}
"""wow-temporal's sides, and the prefix of their ratios to each other side (`start_rate_vs_bare`,
`relay_start_rate_vs_bare`)."""


def _pairs(report: Report) -> list[tuple[Result, Result]]:
    """Each of wow-temporal's sides run, with each other side run."""
    ours = [r for r in report.results if r.side in OURS]
    return [(mine, r) for mine in ours for r in report.results if r.side not in OURS]


_RATIOS: dict[str, Callable[[Result], float]] = {
    "cpu_per_1000": lambda r: r.cpu_total,
    "start_rate": lambda r: r.start_rate,
    "drain_rate": lambda r: r.drain_rate,
    "steady_p99": lambda r: r.steady_p99_ms,
    "burst_p99": lambda r: r.burst_p99_ms,
}
"""The ratios wow/other printed: CPU and p99s lower is better for wow, rates higher."""


def _ratios(ours: Result, other: Result) -> dict[str, float]:
    """wow/other: `_RATIOS`, then each part both sides have (the Temporal sides: the server's
    CPU, its counters' totals): `cpu_server`, `server_persistence_requests`, ..."""
    ratios = {name: ratio(of(ours), of(other)) for name, of in _RATIOS.items()}
    for part, mine, theirs in (
        ("cpu", ours.cpu_per_1000, other.cpu_per_1000),
        ("server", ours.server_per_1000, other.server_per_1000),
    ):
        shared = (k for k in mine if k in theirs and ":" not in k)  # by operation: figures only
        ratios |= {f"{part}_{k}": ratio(mine[k], theirs[k]) for k in shared}
    return ratios


def verdicts(report: Report) -> Verdicts:
    """None early, twice or missing on any side, each side delivered some; wow's ratios to
    each other side (to bare also per process and per server counter); each side's figures."""
    counts = ("early", "twice", "missing")
    zero = {count: sum(getattr(r, count) for r in report.results) for count in counts}
    positive: dict[str, float] = {}
    figures: dict[str, float] = {}
    ratios: dict[str, float] = {}
    for r in report.results:
        slug = r.side.replace("-", "_")
        positive[f"{slug}_delivered"] = float(r.delivered)
        figures |= {f"{slug}_{name}": of(r) for name, of in _RATIOS.items()}
        figures |= {f"{slug}_cpu_{k}": v for k, v in r.cpu_per_1000.items()}
        figures |= {f"{slug}_server_{k}": v for k, v in r.server_per_1000.items()}
        figures[f"{slug}_started_after_due"] = float(r.started_after_due)
    for ours, other in _pairs(report):
        prefix, slug = OURS[ours.side], other.side.replace("-", "_")
        ratios |= {f"{prefix}{n}_vs_{slug}": v for n, v in _ratios(ours, other).items()}
    return Verdicts(must_be_zero=zero, must_be_positive=positive, ratios=ratios, figures=figures)
