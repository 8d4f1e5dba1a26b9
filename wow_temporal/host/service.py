"""The domain host's command pipeline: one command in, Wow's `CommandResult` out.

A command finds its aggregate (rebuilt from its commits, then kept in memory), is decided by the
app's pure core, and its events — schedule events among them — are committed in one transaction.
It never waits on Temporal: the relay hands the schedules to the timers afterwards, from the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from wow_temporal.domain.aggregate import AggregateModel, Current, Decided
from wow_temporal.domain.app import App
from wow_temporal.domain.messages import ScheduleInfo
from wow_temporal.domain.rejection import Rejection
from wow_temporal.domain.upcasting import FIRST_REVISION, REVISION_HEADER, UpcastError
from wow_temporal.host.guard import SLOT_STOPPED, stop_before_due
from wow_temporal.host.store import (
    DuplicateRequestError,
    EventStore,
    RequestRecord,
    VersionConflictError,
    stream_id,
)
from wow_temporal.model import AggregateRef, Commit, CommitEvent
from wow_temporal.wire import CommandResult, SlotOrigin

__all__ = ["CommandMessage", "CommandResult", "DomainHost", "Fallback"]

logger = logging.getLogger("wow_temporal.host")

T = TypeVar("T")

_CACHE_SIZE = 10_000
"""Aggregates kept in memory; one that falls out is rebuilt from its commits on its next command."""

_DECIDE_AGAIN_LIMIT = 50
"""Times a command is decided again because other replicas committed to its aggregate first."""


@dataclass(frozen=True, slots=True)
class CommandMessage:
    """A command as the host receives it (from HTTP, a saga, or a timer's delivery)."""

    type: str
    ref: AggregateRef
    body: Mapping[str, Any]
    request_id: str = ""
    owner_id: str = ""
    space_id: str = ""
    expected_version: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    """Message headers (`Command-Header-<key>`): upstream, trace and schedule details."""

    @property
    def schedule(self) -> ScheduleInfo | None:
        return ScheduleInfo.from_headers(dict(self.headers))


Fallback = Callable[[CommandMessage], CommandResult]
"""Answers commands for contexts the host does not serve (the dev stack's echo convention)."""


class DomainHost:
    """Serves the commands of `apps`' aggregates over `store`; each commit wakes the followers.

    It keeps aggregates in memory between commands. Where other replicas commit to the same
    store, a command first reads what they committed to its aggregate since (one indexed read,
    no lock), and a commit that still meets another's conflicts on the version and is decided
    again on the aggregate as it then stands.
    """

    def __init__(
        self, apps: Iterable[App], store: EventStore, *, fallback: Fallback | None = None
    ) -> None:
        self.apps = {app.context: app for app in apps}
        self.store = store
        self.fallback = fallback
        self._wakers: list[asyncio.Event] = []
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="wow-store")
        self._cache: OrderedDict[str, Current] = OrderedDict()
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def follow(self) -> asyncio.Event:
        """An event set at each commit, for one follower of the log to wait on."""
        waker = asyncio.Event()
        self._wakers.append(waker)
        return waker

    async def run(self, call: Callable[[], T]) -> T:
        """Run a blocking store call on the store's own thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self.store.close()

    def model(self, ref: AggregateRef) -> tuple[App, AggregateModel] | Rejection:
        """The app and aggregate `ref` names, or NotFound saying which are served."""
        app = self.apps.get(ref.context_name)
        if app is None:
            served = ", ".join(sorted(self.apps)) or "none"
            return Rejection("NotFound", f"no context {ref.context_name} here (served: {served})")
        model = app.models.get(ref.aggregate_name)
        if model is None:
            known = ", ".join(sorted(app.models)) or "none"
            return Rejection(
                "NotFound",
                f"no aggregate {ref.aggregate_name} in context {ref.context_name} "
                f"(aggregates: {known})",
            )
        return app, model

    async def current(self, ref: AggregateRef) -> tuple[AggregateModel, Current] | Rejection:
        """The aggregate as it stands (from memory, or rebuilt from its commits; always rebuilt
        where other replicas commit too).

        Only a command, holding its aggregate's lock, keeps what it rebuilt: a read that
        rebuilt while a command committed would keep the state from before that commit, and
        every later command on the aggregate would be decided on it (and conflict).
        """
        found = self.model(ref)
        if isinstance(found, Rejection):
            return found
        _, model = found
        cached = None if self.store.shared else self._cache.get(stream_id(ref))
        return model, cached if cached is not None else await self._rebuild(ref, model)

    async def _rebuild(self, ref: AggregateRef, model: AggregateModel) -> Current:
        commits = await self.run(lambda: self.store.load(ref))
        current = model.new(ref.aggregate_id)
        for commit in commits:
            model.source(current, commit.version, [(e.name, e.body) for e in commit.body])
        return current

    async def _caught_up(self, ref: AggregateRef, model: AggregateModel, current: Current) -> None:
        """Apply to `current`, kept in memory, the commits other replicas made since (one read
        of the aggregate's newer commits, none on a store only this host writes)."""
        if self.store.shared:
            newer = await self.run(lambda: self.store.load(ref, after=current.version))
            for commit in newer:
                model.source(current, commit.version, [(e.name, e.body) for e in commit.body])

    async def commits(self, ref: AggregateRef) -> list[Commit]:
        return await self.run(lambda: self.store.load(ref))

    def _remember(self, key: str, current: Current) -> None:
        self._cache[key] = current
        self._cache.move_to_end(key)
        while len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)

    async def send(self, message: CommandMessage) -> CommandResult:
        """Decide and commit one command; Wow's answer. A bug in domain code answers
        `InternalServerError` (500): a technical failure, which a sender retries."""
        command_id = uuid.uuid4().hex
        result = _Answer(message, command_id)
        if message.ref.context_name not in self.apps and self.fallback is not None:
            return self.fallback(message)
        found = self.model(message.ref)
        if isinstance(found, Rejection):
            return result.refused(found)
        app, model = found
        key = stream_id(message.ref)
        async with contextlib.AsyncExitStack() as held:
            for locked in self._locked_for(message, key):
                await held.enter_async_context(locked)
            try:
                answer = await self._decide(app, model, message, result, key)
                _log(message, answer)
                return answer
            except Exception as error:
                logger.exception("%s %s failed", message.type, message.ref)
                self._cache.pop(key, None)
                return result.refused(
                    Rejection("InternalServerError", f"{type(error).__name__}: {error}")
                )

    def _locked_for(self, message: CommandMessage, key: str) -> list[asyncio.Lock]:
        """The locks a command holds while decided: its aggregate's, and for a timer's command
        to another aggregate, the scheduling aggregate's too, so the guard reads its log with
        no commit of it half made (taken in one order everywhere: no two commands wait on each
        other)."""
        keys = {key}
        origin = SlotOrigin.from_headers(message.headers)
        if origin is not None and origin.owner != message.ref:
            keys.add(stream_id(origin.owner))
        return [self._lock(one) for one in sorted(keys)]

    def _lock(self, key: str) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def _decide(
        self,
        app: App,
        model: AggregateModel,
        message: CommandMessage,
        result: _Answer,
        key: str,
    ) -> CommandResult:
        earlier = await self._decided_before(message, result)
        if earlier is not None:
            return earlier  # decided before: answered alike, whatever this build reads
        read = _read_as_now(app, message)
        if isinstance(read, Rejection):
            return result.refused(read)
        message = read
        for attempt in range(_DECIDE_AGAIN_LIMIT):
            answer = await self._decide_once(app, model, message, result, key)
            if answer is not None:
                return answer
            await asyncio.sleep(random.uniform(0, 0.002 * attempt))  # replicas fall out of step
        # a technical failure (500): every sender retries it with its request id, nothing decided
        return result.refused(
            Rejection(
                "InternalServerError",
                f"{message.ref}: other replicas committed to it first "
                f"{_DECIDE_AGAIN_LIMIT} times in a row; send it again",
            )
        )

    async def _decide_once(
        self,
        app: App,
        model: AggregateModel,
        message: CommandMessage,
        result: _Answer,
        key: str,
    ) -> CommandResult | None:
        """Decide on the aggregate as it stands and commit; None when another replica committed
        to it meanwhile, so the command is decided again on the new state."""
        ref = message.ref
        current = self._cache.get(key)
        if current is None:
            current = await self._rebuild(ref, model)
            self._remember(key, current)
        else:
            self._cache.move_to_end(key)
            await self._caught_up(ref, model, current)  # what other replicas committed since
        stopped = await self._stopped(message, current)
        if stopped is not None:
            return await self._without_commit(message, result, current.version, stopped)
        decided = model.handle(
            current,
            ref,
            message.type,
            message.body,
            app.bound[ref.aggregate_name],
            message.schedule,
            message.expected_version,
        )
        if isinstance(decided, Rejection) or not decided.events:
            return await self._without_commit(message, result, current.version, decided)
        result.function = decided.function
        commit = _commit_of(message, result.command_id, current.version + 1, decided.events)
        try:
            await self.run(lambda: self.store.append(commit))
        except DuplicateRequestError as duplicate:
            if duplicate.record.commit_id == commit.id:  # committed, then the line dropped
                return self._committed(model, current, commit, decided.events, result)
            return _answer_decided(duplicate.record, message, result)  # another replica's
        except VersionConflictError:
            # decided again on what it is now; a version the sender expects is then refused
            if not self.store.shared:
                self._cache.pop(key, None)  # rebuilt (a shared one is caught up on the next try)
            return None
        return self._committed(model, current, commit, decided.events, result)

    async def _stopped(self, message: CommandMessage, current: Current) -> Rejection | None:
        """The refusal of a scheduled command whose slot the owner's log stopped before it was
        due (`host.guard`), or None: not a timer's, an owner this host does not keep, or a log
        that still held the slot. The owner's commits since the set are read only when there
        are any (none when the owner is the target, still at the set's version)."""
        origin = SlotOrigin.from_headers(message.headers)
        if origin is None or isinstance(self.model(origin.owner), Rejection):
            return None
        owner = origin.owner
        if owner == message.ref and current.version <= origin.version:
            return None
        after = origin.version - 1
        commits = await self.run(lambda: self.store.load(owner, after=after))
        stop = stop_before_due(origin, commits)
        return None if stop is None else Rejection(SLOT_STOPPED, stop.describe(origin))

    def _committed(
        self,
        model: AggregateModel,
        current: Current,
        commit: Commit,
        events: Sequence[tuple[str, Mapping[str, Any]]],
        result: _Answer,
    ) -> CommandResult:
        model.source(current, commit.version, events)
        for waker in self._wakers:
            waker.set()
        return result.done(commit.version)

    async def _without_commit(
        self,
        message: CommandMessage,
        result: _Answer,
        version: int,
        decided: Rejection | Decided,
    ) -> CommandResult:
        """Answer a refusal or a NoOp, remembering it for its request id (unless the refusal
        decides nothing); a replica that decided the request id first is answered for."""
        ref = message.ref
        if isinstance(decided, Rejection):
            if not message.request_id or decided.code in _NOT_DECISIONS:
                return result.refused(decided, version)
            record = RequestRecord(message.request_id, "", version, decided.code, decided.message)
        else:
            result.function = decided.function
            if not message.request_id:
                return result.done(version)
            record = RequestRecord(message.request_id, "", version)
        standing = await self.run(lambda: self.store.decided(ref, record))
        if standing != record:
            return _answer_decided(standing, message, result)
        if isinstance(decided, Rejection):
            return result.refused(decided, version)
        return result.done(version)

    async def _decided_before(
        self, message: CommandMessage, result: _Answer
    ) -> CommandResult | None:
        """The answer given before to this request id, or None when it is new (or has none)."""
        if not message.request_id:
            return None
        ref = message.ref
        earlier = await self.run(lambda: self.store.request(ref, message.request_id))
        return None if earlier is None else _answer_decided(earlier, message, result)


def _read_as_now(app: App, message: CommandMessage) -> CommandMessage | Rejection:
    """The command as the app reads it now: a body written at an older revision (a timer's
    without one: the first) upcast to the one its class declares, or `CommandValidation`
    saying why it cannot be (a deploy changed it: the timer parks, not a guard)."""
    revision = message.headers.get(REVISION_HEADER)
    if revision is None and message.schedule is not None:
        revision = FIRST_REVISION
    try:
        read = app.upcasting.upcast(message.type, revision, message.body)
    except UpcastError as error:
        return Rejection("CommandValidation", f"{message.type}: {error}")
    if not read.applied:
        return message
    return replace(message, type=read.type, body=read.body)


def _answer_decided(
    earlier: RequestRecord, message: CommandMessage, result: _Answer
) -> CommandResult:
    """The answer to a request id decided before: its refusal again, or DuplicateRequestId."""
    if earlier.refused is not None:
        return result.refused(
            Rejection(
                earlier.refused,
                f"{earlier.message} (request {message.request_id}, decided before)",
            ),
            earlier.version,
        )
    return result.duplicate(earlier.version)


def _commit_of(
    message: CommandMessage,
    command_id: str,
    version: int,
    events: Iterable[tuple[str, Mapping[str, Any]]],
) -> Commit:
    """The commit that records a command's decided events at the aggregate's next version."""
    ref = message.ref
    commit_id = uuid.uuid4().hex
    return Commit(
        id=commit_id,
        context_name=ref.context_name,
        aggregate_name=ref.aggregate_name,
        tenant_id=ref.tenant_id,
        aggregate_id=ref.aggregate_id,
        owner_id=message.owner_id,
        space_id=message.space_id,
        version=version,
        create_time=int(time.time() * 1000),
        request_id=message.request_id,
        command_id=command_id,
        header={k: v for k, v in message.headers.items() if k in _KEPT_HEADERS},
        body=[
            CommitEvent(id=f"{commit_id}-{index}", name=name, body=body)
            for index, (name, body) in enumerate(events)
        ],
    )

def _log(message: CommandMessage, result: CommandResult) -> None:
    """One line per command: what it was, for which aggregate, and how it was answered."""
    ref = message.ref
    how = result.error_code + ("" if result.ok else f" ({result.error_msg})")
    by = f", from {message.schedule.timer}#{message.schedule.slot}" if message.schedule else ""
    logger.info(
        "%s → %s %s (tenant %s%s): %s, version %s",
        message.type.rsplit(".", 1)[-1],
        ref.named,
        ref.aggregate_id,
        ref.tenant_id,
        by,
        how,
        result.aggregate_version,
    )


_NOT_DECISIONS = frozenset(
    {"BadRequest", "CommandValidation", "CommandExpectVersionConflict", "InternalServerError"}
)
"""Refusals that decide nothing (the request was malformed, or expected another version): the
same request id may come again, fixed. Every other refusal is the command's decision, answered
again the same."""

_KEPT_HEADERS = frozenset(
    {
        "upstream_id",
        "upstream_name",
        "trace_id",
        "traceparent",
        "schedule_timer",
        "schedule_key",
        "schedule_slot",
        "schedule_due",
        "schedule_skipped",
    }
)
"""Message headers a commit keeps: its causation and trace (passed on to what it schedules),
and the schedule slot that sent its command, so the log says which slot made each commit and
when it was due."""


class _Answer:
    """Builds the `CommandResult` of one command."""

    def __init__(self, message: CommandMessage, command_id: str) -> None:
        self.message = message
        self.command_id = command_id
        self.function = ""

    def _result(self, code: str, text: str, version: int | None) -> CommandResult:
        return CommandResult.of(
            self.message.ref,
            command_id=self.command_id,
            request_id=self.message.request_id,
            code=code,
            message=text,
            version=version,
            function=self.function,
        )

    def done(self, version: int) -> CommandResult:
        return self._result("Ok", "", version)

    def duplicate(self, version: int) -> CommandResult:
        return self._result(
            "DuplicateRequestId",
            f"request {self.message.request_id} was already decided (version {version})",
            version,
        )

    def refused(self, rejection: Rejection, version: int | None = None) -> CommandResult:
        return self._result(rejection.code, rejection.message, version)
