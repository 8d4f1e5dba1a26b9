"""Admission: the one check every commit passes on its way to the timers, whichever entrance it
takes (`POST /commits`, `wow-temporal apply`, the host's relay, `TimerClient.apply` and
`apply_many`: all go through `admit`).

A batch is checked whole before anything of it reaches Temporal: one bad commit refuses the
batch with an `InvalidCommitError` that names the commit and the problem, and nothing is
applied. What passes comes back with the timer changes ingest makes of each commit, read once.

Pure: no Temporal, no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from wow_temporal.ids import deletion_record_id, timer_workflow_id
from wow_temporal.model import (
    AggregateRef,
    Commit,
    InvalidCommitError,
    InvalidScheduleError,
    ScheduleCancelled,
    ScheduleSet,
    has_control,
)
from wow_temporal.timers.changes import AggregateChange, KeyChange, changes_of

__all__ = ["MAX_WORKFLOW_ID_BYTES", "Admission", "Admitted", "Entering", "admit"]

MAX_WORKFLOW_ID_BYTES = 1000
"""Temporal's default `limit.maxIDLength`: the server refuses a longer workflow id."""

Change = KeyChange | AggregateChange


@dataclass(frozen=True)
class Admitted:
    """A commit that passed admission, with the timer changes ingest makes of it (due times
    computed once, here; the sets continue the commit header's trace)."""

    commit: Commit
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class Admission:
    """A batch that passed admission, in the order given: what `TimerClient.apply_many` takes
    without checking again."""

    admitted: tuple[Admitted, ...]

    @property
    def commits(self) -> list[Commit]:
        return [item.commit for item in self.admitted]

    def __len__(self) -> int:
        return len(self.admitted)

    def __iter__(self) -> Iterator[Admitted]:
        return iter(self.admitted)


Entering = Admitted | Commit | Mapping[str, Any] | str | bytes
"""What `admit` takes a batch of: commits, as models, JSON text or decoded JSON objects; or
commits admitted already (in another batch: only what they get wrong together is checked)."""


def admit(batch: Iterable[Entering] | Admission) -> Admission:
    """Check a batch of commits (parsed here if given as JSON text or a decoded object) and
    return it admitted; raise `InvalidCommitError` naming the first problem (prefixed
    `commit [n]:` in a batch of more than one), so a caller applies all or nothing."""
    if isinstance(batch, Admission):
        return batch
    items = list(batch)
    numbered = len(items) > 1
    admitted: list[Admitted] = []
    for index, item in enumerate(items):
        where = f"commit [{index}]: " if numbered else ""
        try:
            admitted.append(_admit_one(item))
        except InvalidCommitError as error:
            raise InvalidCommitError(f"{where}{error}") from None
    _check_batch([item.commit for item in admitted])
    return Admission(tuple(admitted))


def _admit_one(item: Entering) -> Admitted:
    """One commit checked on its own: parsed, its times and ids in range, its schedule
    events' ids distinct."""
    if isinstance(item, Admitted):
        return item
    commit = _parsed(item)
    changes = _changes(commit)
    problem = _id_problem(commit) or _duplicate_event_id(commit) or _never_fires(commit)
    if problem is not None:
        raise InvalidCommitError(f"commit {commit.id!r}: {problem}")
    return Admitted(commit, tuple(changes))


def _parsed(item: object) -> Commit:
    """`item` as a `Commit`: a JSON object (decoded or as text) is read strictly."""
    if isinstance(item, Commit):
        return item
    if isinstance(item, Mapping):
        item = dict(item)
    elif not isinstance(item, str | bytes):
        raise InvalidCommitError(f"a commit must be a JSON object, got {type(item).__name__}")
    try:
        return Commit.parse(item)
    except InvalidCommitError:
        raise
    except (ValueError, RecursionError) as error:
        raise InvalidCommitError(str(error)) from None


def _changes(commit: Commit) -> list[Change]:
    """The timer changes ingest makes of `commit`; a due time past what a date holds (or a
    `createTime` a clock cannot read) is refused now, not inside a timer."""
    try:
        return changes_of(commit)
    except (ValueError, OverflowError, OSError) as error:
        raise InvalidCommitError(
            f"commit {commit.id!r}: a time is out of range (createTime {commit.create_time}, "
            f"or a rule's due time): {error}"
        ) from None


def _never_fires(commit: Commit) -> str | None:
    """Why a `wow.ScheduleSet` of the commit is refused for a cron rule no time ever matches
    (`0 0 0 30 2 *`), naming the event, or None. Refused here, where every new commit comes in,
    and not when a `Commit` is read: a host reads back the commits it stored, and a timer the
    input it was started with, before this check existed."""
    for index, event in enumerate(commit.body):
        parsed = event.schedule_event()
        if isinstance(parsed, ScheduleSet):
            try:
                parsed.rule.check_fires()
            except InvalidScheduleError as error:
                return f"event {index} ({event.id!r}, {event.name}): {error}"
    return None


def _id_problem(commit: Commit) -> str | None:
    """Why a workflow id the commit makes could not be held by Temporal or found again by a
    listing (a control character, or over Temporal's length limit), or None."""
    owner = commit.aggregate
    for name, value in (
        ("contextName", owner.context_name),
        ("aggregateName", owner.aggregate_name),
        ("tenantId", owner.tenant_id),
        ("aggregateId", owner.aggregate_id),
    ):
        if has_control(value):
            return f"{name} {value[:80]!r} has a control character"
    keys = sorted(
        {
            event.key
            for _, event in commit.schedule_events()
            if isinstance(event, ScheduleSet | ScheduleCancelled)
        }
    )
    for workflow_id in (deletion_record_id(owner), *(timer_workflow_id(owner, k) for k in keys)):
        size = len(workflow_id.encode())
        if size > MAX_WORKFLOW_ID_BYTES:
            return (
                f"its workflow id {workflow_id[:60]!r}... is {size} bytes, more than the "
                f"{MAX_WORKFLOW_ID_BYTES} Temporal holds"
            )
    return None


def _duplicate_event_id(commit: Commit) -> str | None:
    """Why two of the commit's schedule events share an id, or None: a set's command goes out
    with request id `{commit id}:{event id}#{slot}`, so a second set under the same id would
    be answered as a duplicate of the first and never run. Domain events are not read."""
    counts = Counter(envelope.id for envelope, _ in commit.schedule_events())
    shared = [event_id for event_id, n in counts.items() if n > 1]
    if not shared:
        return None
    return (
        f"event id {shared[0]!r} is given to {counts[shared[0]]} schedule events; each needs "
        f"its own (a command's request id is {{commit id}}:{{event id}}#{{slot}}, so the host "
        "would take the second for a duplicate and never run it)"
    )


def _check_batch(commits: list[Commit]) -> None:
    """What the commits of one batch get wrong together.

    One commit id is one commit: handed over twice in a batch, it is applied once; under
    two different contents, the commands of both would share request ids (the host would run
    only the first) and one would be dropped unseen, so the batch is refused. Likewise one
    aggregate version is one commit: two different commits claiming it could not both be in
    the log, and ingest, which orders a key's events by version, would keep one at random.
    """
    by_id: dict[str, Commit] = {}
    by_version: dict[tuple[AggregateRef, int], Commit] = {}
    for commit in commits:
        same_id = by_id.setdefault(commit.id, commit)
        if _substance(same_id) != _substance(commit):
            raise InvalidCommitError(
                f"commit id {commit.id!r} is given to two different commits in this batch "
                f"({_named(same_id.aggregate)} version {same_id.version}, "
                f"{_named(commit.aggregate)} version {commit.version}): a commit id names one "
                "commit"
            )
        slot = (commit.aggregate, commit.version)
        same_version = by_version.setdefault(slot, commit)
        if same_version.id != commit.id:
            raise InvalidCommitError(
                f"commits {same_version.id!r} and {commit.id!r} both claim version "
                f"{commit.version} of {_named(commit.aggregate)}: a log holds one commit a version"
            )


def _substance(commit: Commit) -> tuple[object, ...]:
    """What makes two commits under one id the same commit (headers, such as a trace, may
    differ between two hand-overs of it)."""
    return (
        commit.aggregate,
        commit.version,
        commit.create_time,
        commit.owner_id,
        commit.space_id,
        [event.model_dump(mode="json") for event in commit.body],
    )


def _named(aggregate: AggregateRef) -> str:
    """An aggregate as a message names it: `shop.order 1 of tenant 't'`."""
    return f"{aggregate} of tenant {aggregate.tenant_id!r}"
