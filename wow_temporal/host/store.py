"""The domain host's event store, kept by the `eventsourcing` package's recorders: one SQLite
file (the embedded default) or a PostgreSQL database (`postgresql://…`, see `host.postgres`).

Each commit (Wow's `DomainEventStream`: a command's events, schedule events among them) is one
stored event of its aggregate's stream, at the aggregate's version, so a commit is written whole
or not at all, and two writers of one version conflict. The command's request id is stored in
the same transaction, so a second command with it is a duplicate. The recorder's notification
log orders every commit for the followers — the relay to the timers and the sagas — whose
positions are tracking records in the same database.

A follower reads the log after its position, so it must never see a commit at a position below
one it has already read. SQLite's rowid log is gap-free: one writer at a time. On PostgreSQL the
ids come from a sequence, drawn when a row is inserted, and transactions commit in any order:
two writers could draw 7 and 8 and commit 8 first, and a follower reading then would pass 7 for
good (the sequence-gap problem). eventsourcing's PostgreSQL recorder rules it out: every insert
transaction first takes `LOCK TABLE stored_events IN EXCLUSIVE MODE` (held to its commit; reads
take ACCESS SHARE and are not blocked), so ids are drawn and committed one transaction at a
time, and a committed id is never followed by a lower one committed later. Ids may still skip a
number (a refused insert's draw is rolled back, not returned), which no reader waits for.
(Its `enable_db_functions` mode inserts without that lock; the store does not turn it on.)

Several host replicas may share one PostgreSQL store (`shared`); each follower then runs on
one replica at a time, under a lease kept in the same database (`leases`, see `host.lease`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eventsourcing.persistence import IntegrityError, ProcessRecorder, StoredEvent, Tracking
from eventsourcing.sqlite import SQLiteDatastore, SQLiteProcessRecorder

from wow_temporal.errors import WowTemporalError
from wow_temporal.host.lease import Leases, SoleLeases
from wow_temporal.host.postgres import Dsn, is_postgres, open_postgres
from wow_temporal.ids import encode_part
from wow_temporal.model import AggregateRef, Commit

__all__ = [
    "COMMIT_TOPIC",
    "DuplicateRequestError",
    "EventStore",
    "RequestRecord",
    "VersionConflictError",
    "stream_id",
]

COMMIT_TOPIC = "wow.DomainEventStream"
"""The topic of a commit in the notification log."""

_REQUEST_TOPIC = "wow.RequestId"


class DuplicateRequestError(WowTemporalError):
    """A commit's request id was already committed (the first commit is `record`)."""

    def __init__(self, record: RequestRecord) -> None:
        super().__init__(f"request {record.request_id} was already committed")
        self.record = record


class VersionConflictError(WowTemporalError):
    """Another commit took this aggregate version first."""


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """How a request id was decided: the commit it made (its id and the version after), or
    the refusal (`refused`: Wow's code, `message`) or nothing (a NoOp, `commit_id` empty)."""

    request_id: str
    commit_id: str
    version: int
    refused: str | None = None
    message: str = ""


def stream_id(ref: AggregateRef) -> str:
    """An aggregate's stream: `{context}.{aggregate}:{tenant}:{id}`, parts encoded as in ids."""
    return (
        f"{encode_part(ref.context_name, dot=True)}.{encode_part(ref.aggregate_name)}:"
        f"{encode_part(ref.tenant_id)}:{encode_part(ref.aggregate_id)}"
    )


def _request_stream(ref: AggregateRef, request_id: str) -> str:
    """Request ids are one aggregate type's in one tenant, as Wow's idempotency checker has
    them (per named aggregate): another tenant's same id is another command."""
    return (
        f"request:{encode_part(ref.context_name, dot=True)}.{encode_part(ref.aggregate_name)}:"
        f"{encode_part(ref.tenant_id)}:{encode_part(request_id)}"
    )


class EventStore:
    """Commits, request ids and follower positions in one SQLite file (`:memory:` for tests) or
    one PostgreSQL database (a `postgresql://` URI); `location` shows no password.

    Its methods block; the host calls them from one thread of its own.
    """

    def __init__(self, location: str | Path) -> None:
        self._recorder: ProcessRecorder
        self._close: Callable[[], None]
        self._count_after: Callable[[int, str], int]
        self.leases: Leases
        """Who runs each follower: a lease row per follower on PostgreSQL; on SQLite (one host
        per file) this host always."""
        self.shared = is_postgres(str(location))
        """Other host replicas may write to this store (PostgreSQL): what this one has in
        memory may be behind it."""
        if self.shared:
            dsn = Dsn(str(location))
            self.location = dsn.shown
            datastore, self._recorder, self._count_after, self.leases = open_postgres(dsn)
            self._close = datastore.close
        else:
            self.location = str(location)
            self._open_sqlite(self.location)
            self.leases = SoleLeases()

    def _open_sqlite(self, path: str) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        datastore = SQLiteDatastore(path, originator_id_type="text")
        recorder = SQLiteProcessRecorder(datastore)
        recorder.create_table()
        statement = (
            f"SELECT COUNT(*) FROM {recorder.events_table_name} WHERE rowid > ? AND topic = ?"
        )

        def count_after(position: int, topic: str) -> int:
            with datastore.transaction(commit=False) as cursor:
                cursor.execute(statement, (position, topic))
                return int(cursor.fetchone()[0])

        self._recorder, self._close, self._count_after = recorder, datastore.close, count_after

    def __repr__(self) -> str:
        return f"EventStore({self.location!r})"

    def close(self) -> None:
        self._close()

    def load(self, ref: AggregateRef, after: int = 0) -> list[Commit]:
        """The aggregate's commits after version `after`, by version."""
        return [
            Commit.model_validate_json(stored.state)
            for stored in self._recorder.select_events(stream_id(ref), gt=after or None)
        ]

    def request(self, ref: AggregateRef, request_id: str) -> RequestRecord | None:
        """The commit `request_id` made on this aggregate, if one did."""
        if not request_id:
            return None
        found = self._recorder.select_events(_request_stream(ref, request_id), limit=1)
        if not found:
            return None
        data = json.loads(found[0].state)
        return RequestRecord(
            request_id,
            data.get("commitId", ""),
            data["version"],
            data.get("refused"),
            data.get("message", ""),
        )

    def decided(self, ref: AggregateRef, record: RequestRecord) -> RequestRecord:
        """Remember a request id decided without a commit (refused, or a NoOp), so the same
        request again gets the same answer; the record that stands (one decided first, by
        another replica, is kept)."""
        state: dict[str, object] = {"version": record.version}
        if record.refused is not None:
            state.update(refused=record.refused, message=record.message)
        stored = StoredEvent(
            originator_id=_request_stream(ref, record.request_id),
            originator_version=1,
            topic=_REQUEST_TOPIC,
            state=json.dumps(state).encode(),
        )
        try:
            self._recorder.insert_events([stored])
        except IntegrityError:  # decided already: the first answer stands
            return self.request(ref, record.request_id) or record
        return record

    def append(self, commit: Commit) -> int:
        """Write `commit` (with its request id) in one transaction; its notification id.

        `DuplicateRequestError` if the request id was committed before, `VersionConflictError`
        if the version was taken; nothing is written then.
        """
        ref = commit.aggregate
        stored = [
            StoredEvent(
                originator_id=stream_id(ref),
                originator_version=commit.version,
                topic=COMMIT_TOPIC,
                state=commit.model_dump_json().encode(),
            )
        ]
        if commit.request_id:
            record = {"commitId": commit.id, "version": commit.version}
            stored.append(
                StoredEvent(
                    originator_id=_request_stream(ref, commit.request_id),
                    originator_version=1,
                    topic=_REQUEST_TOPIC,
                    state=json.dumps(record).encode(),
                )
            )
        try:
            ids = self._recorder.insert_events(stored)
        except IntegrityError:
            earlier = self.request(ref, commit.request_id)
            if earlier is not None:
                raise DuplicateRequestError(earlier) from None
            raise VersionConflictError(
                f"{ref} (tenant {ref.tenant_id}): version {commit.version} was taken"
            ) from None
        assert ids
        return ids[0]

    def commits_after(self, position: int, limit: int = 100) -> list[tuple[int, Commit]]:
        """Up to `limit` commits after notification `position`, in log order."""
        notifications = self._recorder.select_notifications(
            start=position, limit=limit, topics=[COMMIT_TOPIC], inclusive_of_start=False
        )
        return [(n.id, Commit.model_validate_json(n.state)) for n in notifications]

    def behind(self, position: int) -> int:
        """How many commits the log holds after notification `position`."""
        return self._count_after(position, COMMIT_TOPIC)

    def position(self, follower: str) -> int:
        """The last notification `follower` has handled (0: none)."""
        return self._recorder.max_tracking_id(follower) or 0

    def advance(self, follower: str, position: int) -> None:
        """Record that `follower` has handled everything up to `position`."""
        if position > self.position(follower):
            # a replica whose lease lapsed may record the same position once more
            with contextlib.suppress(IntegrityError):
                self._recorder.insert_tracking(Tracking(follower, position))
