"""The chaos soak's plan (`bench.soak`): each aggregate's commits and when the relay hands them
over, and the schedules they set, as its judge (`bench.oracle.ledger`) reads them."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import harness
from bench.oracle.ledger import Schedule
from workers.eshop.order import ORDER
from wow_temporal.model import AggregateRef, ScheduleRule
from wow_temporal.timers.workflow import DeliverySettings

BEHAVIOURS = (("ok", 0.70), ("reject", 0.07), ("fail", 0.06), ("flaky", 0.09), ("slow", 0.08))
FLAKY_FAILURES = 2
DELIVERY = DeliverySettings(
    max_attempts=6,  # a flaky host's 2 failures, and up to 3 attempts lost to chaos, then one
    initial_interval=timedelta(milliseconds=200),
    max_interval=timedelta(seconds=1),
    attempt_timeout=timedelta(seconds=15),
    heartbeat_timeout=timedelta(seconds=3),
)
PARKED_WITHIN_S = 5.0 + sum(
    min(
        DELIVERY.initial_interval.total_seconds() * DELIVERY.backoff**n,
        DELIVERY.max_interval.total_seconds(),
    )
    for n in range(DELIVERY.max_attempts - 1)
)
"""A failing host's slot due this long before the host is healed has been parked by then."""
CHAOS_RECOVERY_S = 10.0
"""Lateness of a delivery due up to this long after a chaos event ends counts as inside it."""
CHAOS_LEAD_S = 2.0
"""...and one due this long before it (its attempt may have been in flight)."""


@dataclass
class Event:
    """One schedule event of a commit (a set carries its rule)."""

    kind: str  # set, cancel, delete
    key: str = ""
    rule: dict[str, Any] | None = None

    def wire(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """The event as `bench.harness.commit` takes it (a set's command carries `body`)."""
        if self.kind == "set":
            assert self.rule is not None
            return harness.schedule_set(self.rule, self.key, body=body)
        if self.kind == "cancel":
            return {"name": "wow.ScheduleCancelled", "key": self.key}
        return {"name": "wow.AggregateDeleted"}


@dataclass
class Planned:
    """One commit an aggregate makes, and when the relay hands it over (and again)."""

    version: int
    created_s: float
    events: list[Event]
    handovers: list[float]
    commit_id: str = ""
    applied_s: list[tuple[float, float]] = field(default_factory=list)
    """(start, return) of each handover's successful apply, run-relative seconds."""

    def wire(self, aggregate_id: str, epoch: float) -> dict[str, Any]:
        events = [event.wire({"v": self.version}) for event in self.events]
        created_ms = int((epoch + self.created_s) * 1000)
        return harness.commit(
            aggregate_id,
            *events,
            version=self.version,
            commit_id=self.commit_id,
            created_ms=created_ms,
        )


@dataclass
class Aggregate:
    aggregate_id: str
    behaviour: str
    commits: list[Planned]


def ref(aggregate_id: str) -> AggregateRef:
    """The soak's aggregate `aggregate_id` (an order of tenant t1, as `bench.harness.commit`)."""
    return ORDER.ref("t1", aggregate_id)


def plan(count: int, duration: float, rng: random.Random, run: str) -> list[Aggregate]:
    """Each aggregate's commits: a one-shot key, sometimes a cron key; then maybe replaced,
    cancelled or deleted; some handed over twice, some out of order."""
    names, weights = [b for b, _ in BEHAVIOURS], [w for _, w in BEHAVIOURS]
    aggregates = []
    horizon = duration * 0.72
    for n in range(count):
        behaviour = rng.choices(names, weights)[0]
        start = rng.uniform(2.0, horizon)
        first = [Event("set", "k1", {"after": f"PT{rng.uniform(2, 12):.3f}S"})]
        cron = rng.random() < 0.05
        if cron:
            misfire = rng.choice(["COALESCE", "CATCH_UP"])
            every = rng.choice([5, 10, 15])
            expression = f"{rng.randrange(every)}/{every} * * * * *"  # of varied seconds
            first.append(Event("set", "tick", {"cron": expression, "misfire": misfire}))
        commits = [Planned(1, start, first, [start])]
        at = start
        for version in (2, 3):
            if commits[-1].events[-1].kind == "delete" or rng.random() > (
                0.45 if version == 2 else 0.3
            ):
                break
            at += rng.uniform(0.3, 8.0)
            choice = rng.random()
            if choice < 0.4:
                event = Event("set", "k1", {"after": f"PT{rng.uniform(1, 10):.3f}S"})
            elif choice < 0.7:
                event = Event("cancel", "k1" if not cron or rng.random() < 0.6 else "tick")
            else:
                event = Event("delete")
            commits.append(Planned(version, at, [event], [at]))
        if len(commits) > 1 and rng.random() < 0.12:
            i = rng.randrange(len(commits) - 1)  # hand over the newer one first
            commits[i].handovers[0], commits[i + 1].handovers[0] = (
                commits[i + 1].handovers[0],
                commits[i].handovers[0] + 0.05,
            )
        for commit in commits:
            if rng.random() < 0.1:
                commit.handovers.append(commit.handovers[0] + rng.uniform(0.5, 5.0))
        aggregate = Aggregate(f"{behaviour}-{n:05d}-{run}", behaviour, commits)
        for commit in commits:
            commit.commit_id = f"c{commit.version}-{aggregate.aggregate_id}"
        aggregates.append(aggregate)
    return aggregates


def schedules_of(aggregate: Aggregate, epoch: float) -> list[Schedule]:
    """The aggregate's sets, each with when it was superseded (in version order)."""
    found: list[Schedule] = []
    for commit in aggregate.commits:
        for index, event in enumerate(commit.events):
            if event.kind != "set":
                continue
            assert event.rule is not None
            found.append(
                Schedule(
                    timer=f"{commit.commit_id}:e{index}",
                    aggregate_id=aggregate.aggregate_id,
                    behaviour=aggregate.behaviour,
                    key=event.key,
                    order=(commit.version, index),
                    rule=ScheduleRule.model_validate(event.rule),
                    created=datetime.fromtimestamp(
                        int((epoch + commit.created_s) * 1000) / 1000, UTC
                    ),
                    applied_at=min((r for _, r in commit.applied_s), default=None),
                )
            )
    for schedule in found:
        for commit in aggregate.commits:
            for index, event in enumerate(commit.events):
                newer = (commit.version, index) > schedule.order
                if newer and (event.kind == "delete" or event.key == schedule.key):
                    for began, returned in commit.applied_s:
                        if schedule.superseded_at is None or returned < schedule.superseded_at:
                            schedule.superseded_at, schedule.superseded_from = returned, began
    return found
