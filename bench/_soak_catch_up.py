"""The catch-up soak (`python -m bench.soak --catch-up`): a relay's catch-up after a Temporal
outage, the log planned so that timers fall due during it and the log stops some before their
due time (victims) and changes others only after it (owed); judged by `bench.oracle.catch_up`."""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from bench import harness
from bench._soak_plan import Event
from bench._soak_rig import Run, on_fresh_rig
from bench.harness import HostProcess, Verdicts
from bench.oracle.catch_up import CatchUp, judge_catch_up, logged_sets
from bench.oracle.ledger import rows_of
from wow_temporal.host.relay import Relay
from wow_temporal.model import Commit
from wow_temporal.timers.client import TimerClient
from wow_temporal.timers.fold import Horizon

DUE_DURING_SHARE = 1 / 3
"""Of `--catch-up`'s aggregates, the share whose first set falls due during the outage."""
FIRED_WITHIN_S = 60.0
"""How long, once the server is back, the relay holds its backlog while the timers that fell due
during the outage fire (the relay slower than the workers: the guard's case)."""


@dataclass
class CatchUpReport:
    """What a relay's catch-up after a Temporal outage did, and its ledger judged."""

    aggregates: int
    commits: int
    outage_s: float
    guarded: bool = True
    """Whether the fake host was told the log (and so guards as docs/delivery.md asks)."""
    caught_up_s: float = 0.0
    waited_s: float = 0.0
    """How long the backlog waited, once the server was back, for the due timers to fire."""
    fired_before_handover: int = 0
    """Victims and owed sets that had reached the host when the backlog was handed over."""
    judged: CatchUp = field(default_factory=CatchUp)


Change = tuple[str, float]
"""One change of `k1` in a commit: `set` (due that many seconds after the commit), `cancel`,
`delete`, or `set-cancel` (a set and its cancel in one commit)."""


def catch_up_log(
    count: int, rng: random.Random, run: str, before: float, during: tuple[float, float]
) -> list[dict[str, Any]]:
    """Each aggregate's commits in log order (by createTime), as wire commits. Most set `k1`
    before the outage (handed over then, due well after it) and change it 1-3 times during it
    (`_due_after`); a share (`DUE_DURING_SHARE`, seeded) set `k1` due during the outage and
    change it once during it, before or after that due time (`_due_during`)."""
    log: list[tuple[float, dict[str, Any]]] = []
    for n in range(count):
        if rng.random() < DUE_DURING_SHARE:
            aggregate_id, commits = f"ok-{run}-d{n}", _due_during(rng, before, during)
        else:
            aggregate_id, commits = f"ok-{run}-c{n}", _due_after(rng, before, during)
        for version, (at, changes) in enumerate(commits, start=1):
            log.append((at, catch_up_commit(aggregate_id, version, at, changes)))
    log.sort(key=lambda pair: pair[0])
    return [commit for _, commit in log]


def _due_after(
    rng: random.Random, before: float, during: tuple[float, float]
) -> list[tuple[float, list[Change]]]:
    """A set of `k1` before the outage, due 20-45 s after it, then 1-3 commits during it (sets
    due during the outage or after, cancels, re-sets, deletions): every stop before the due."""
    start, end = during
    moments = [before, *sorted(rng.uniform(start, end) for _ in range(rng.randint(1, 3)))]
    commits: list[tuple[float, list[Change]]] = []
    for at in moments:
        if not commits:
            commits.append((at, [("set", end - at + rng.uniform(20, 45))]))
            continue
        options = [
            ("set", rng.uniform(5, (end - start) + 40)),
            ("cancel", 0.0),
            ("cancel", 0.0),
            ("delete", 0.0),
            ("set-cancel", rng.uniform(1, 10)),
        ]
        commits.append((at, [rng.choice(options)]))
    return commits


def _due_during(
    rng: random.Random, before: float, during: tuple[float, float]
) -> list[tuple[float, list[Change]]]:
    """A set of `k1` before the outage, due 20-60 % into it, then one change during the outage
    (a cancel, a replacing set due 20-45 s after the outage, or the deletion): committed
    before that due time (its slot a victim: the log stopped it) or after it (owed), alike."""
    start, end = during
    due = start + rng.uniform(0.2, 0.6) * (end - start)
    if rng.random() < 0.5:
        at = rng.uniform(start + 0.05 * (end - start), due - 0.5)
    else:
        at = rng.uniform(due + 0.5, end - 0.5)
    change = rng.choice([("cancel", 0.0), ("set", end - at + rng.uniform(20, 45)), ("delete", 0.0)])
    return [(before, [("set", due - before)]), (at, [change])]


def catch_up_commit(
    aggregate_id: str, version: int, at: float, changes: list[Change]
) -> dict[str, Any]:
    """The wire commit of `aggregate_id` at `version`, created at `at` (epoch s)."""
    events: list[Event] = []
    for kind, after in changes:
        if kind in ("set", "set-cancel"):
            events.append(Event("set", "k1", {"after": f"PT{after:.3f}S"}))
        if kind in ("cancel", "set-cancel"):
            events.append(Event("cancel", "k1"))
        if kind == "delete":
            events.append(Event("delete"))
    wire = [event.wire() for event in events]
    created_ms = int(at * 1000)
    return harness.commit(
        aggregate_id,
        *wire,
        version=version,
        commit_id=f"{aggregate_id}-v{version}",
        created_ms=created_ms,
    )


async def commit_during(
    host: HostProcess, commits: list[dict[str, Any]], until: float, *, tell: bool
) -> None:
    """The log commits during the outage: each commit is told to the fake host (the domain's
    host, which commits while Temporal is down) once its createTime has passed; none when
    `tell` is False (a host that does not check)."""
    pending = sorted(commits, key=lambda commit: commit["createTime"])
    while pending and time.time() < until:
        now_ms = time.time() * 1000
        ready = next((i for i, c in enumerate(pending) if c["createTime"] > now_ms), len(pending))
        if tell and ready:
            await host.log(pending[:ready])
        pending = pending[ready:]
        await asyncio.sleep(min(0.5, max(0.0, until - time.time())))
    if tell and pending:
        await host.log(pending)
    await asyncio.sleep(max(0.0, until - time.time()))


async def await_fired(host: HostProcess, request_ids: set[str], within: float) -> tuple[int, float]:
    """Wait until the host has seen a request of each of `request_ids`, or `within` seconds:
    how many it has seen, and how long it took."""
    started = time.monotonic()
    while True:
        seen = request_ids & {arrival.request_id for arrival in await host.arrivals()}
        waited = time.monotonic() - started
        if seen == request_ids or waited >= within:
            return len(seen), round(waited, 1)
        await asyncio.sleep(0.25)


async def catch_up(args: argparse.Namespace) -> CatchUpReport:
    return await on_fresh_rig(args, "soak-catch-up", _catch_up)


async def _catch_up(
    rig: Run, args: argparse.Namespace, rng: random.Random, run: str
) -> CatchUpReport:
    """Each aggregate's key set before the outage; during it the log set, cancels, replaces
    and deletes; once the server is back and the timers due during the outage have fired, the
    relay catches up in pages with the log read ahead (as `Relay` does); the ledger judged."""
    tell = not args.unguarded
    began = time.time()
    outage = (began + 5.0, began + 5.0 + args.outage)
    outage_ms = (int(outage[0] * 1000), int(outage[1] * 1000))
    log = catch_up_log(args.aggregates, rng, run, began, outage)
    report = CatchUpReport(args.aggregates, len(log), args.outage, guarded=tell)
    first = [c for c in log if c["version"] == 1]
    later = [c for c in log if c["version"] > 1]
    if tell:
        await rig.host.log(first)
    for at in range(0, len(first), 100):
        await rig.timers.apply_many([Commit.parse(c) for c in first[at : at + 100]])
    await asyncio.sleep(max(0.0, outage[0] - time.time()))
    await rig.server.kill()
    print(f"catch-up: the server is down for {args.outage:.0f}s", file=sys.stderr)
    await commit_during(rig.host, later, outage[1], tell=tell)
    await rig.server.start()
    await rig.reconnect()
    due_during = {
        f"{s.timer}#1" for s in logged_sets(first) if outage_ms[0] <= s.due_ms < outage_ms[1]
    }
    fired = await await_fired(rig.host, due_during, FIRED_WITHIN_S)
    report.fired_before_handover, report.waited_s = fired
    report.caught_up_s = await hand_over_backlog(rig.timers, [Commit.parse(c) for c in later])
    last_due = max(s.due_ms for s in logged_sets(log)) / 1000
    await asyncio.sleep(max(0.0, last_due - time.time()) + args.settle)
    report.judged = judge_catch_up(log, rows_of(await rig.host.arrivals()), outage_ms)
    return report


async def hand_over_backlog(timers: TimerClient, backlog: list[Commit]) -> float:
    """Hand the backlog over as the host's relay does (pages of `Relay.batch`, the log read
    ahead); how long it took, in seconds."""
    started = time.monotonic()
    page = Relay.batch
    for at in range(0, len(backlog), page):
        later = Horizon()
        later.extend(backlog[at + page :])
        await timers.apply_many(backlog[at : at + page], later=later)
    return round(time.monotonic() - started, 1)


def print_catch_up(report: CatchUpReport) -> None:
    j = report.judged
    print(
        f"catch-up after a {report.outage_s:.0f}s outage: {report.aggregates} aggregates, "
        f"{report.commits} commits, handed over in {report.caught_up_s}s, once "
        f"{report.fired_before_handover} of the {j.victims + j.owed} timers due "
        f"during the outage had fired ({report.waited_s}s after the server was back)"
    )
    print(
        f"  sets in force {j.in_force}; superseded {j.superseded}, of them stopped before due "
        f"(victims) {j.victims}; changed once due (owed) {j.owed}"
    )
    print(catch_up_verdicts(report).text())
    if not report.guarded:
        print("  --unguarded: the fake host was not told the log, nothing guards the target")
    for problem in j.problems[:20]:
        print(f"  ! {problem}")


def catch_up_verdicts(report: CatchUpReport) -> Verdicts:
    """The judge's (nothing lost, twice, early or delivered though the log changed it; every
    owed slot delivered once), and the timers due during the outage fired before the backlog
    was handed over."""
    return report.judged.verdicts() | Verdicts(
        must_be_positive={"fired_before_handover": report.fired_before_handover},
        figures={"caught_up_s": report.caught_up_s, "waited_s": report.waited_s},
    )
