"""Sagas on the host: each saga follows the log with its own tracked position, hands the events
it declared to its `@on_event` handlers, and sends the commands they return to the host.

At least once, decided once: a command's request id is the saga, the commit, the event and the
command's place, so handling a commit again (after a crash) sends duplicates the target
recognises. A refusal goes to the saga's `@on_rejected` handlers; a technical failure (the
handler raised, the target's code failed) is retried, never skipped.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from wow_temporal.domain.app import App
from wow_temporal.domain.commands import Command
from wow_temporal.domain.saga import EventHandler, Rejected, RejectedHandler, SagaContext
from wow_temporal.errors import WowTemporalError
from wow_temporal.host.follower import Follower
from wow_temporal.host.service import CommandMessage, CommandResult, DomainHost
from wow_temporal.model import Commit, CommitEvent
from wow_temporal.tracing import continued_span, current_traceparent

__all__ = ["SagaFollower", "saga_followers"]

logger = logging.getLogger("wow_temporal.host")


class SagaFailure(WowTemporalError):
    """A saga's handler or one of its commands failed for a technical reason: retried."""


class SagaFollower(Follower):
    """One saga (`processor`) of `app`, following the whole log (events of any context)."""

    def __init__(
        self,
        host: DomainHost,
        app: App,
        processor: str,
        handlers: Iterable[EventHandler],
        rejected: Iterable[RejectedHandler],
    ) -> None:
        super().__init__(host, f"saga:{app.context}.{processor}")
        self.app = app
        self.processor = processor
        self.handlers: dict[str, list[EventHandler]] = {}
        for handler in handlers:
            self.handlers.setdefault(handler.event_name, []).append(handler)
        self.rejected = tuple(rejected)

    async def handle(self, commits: list[tuple[int, Commit]]) -> int:
        for _, commit in commits:
            for index, event in enumerate(commit.body):
                for handler in self.handlers.get(event.name, ()):
                    self.acted = True
                    attributes: dict[str, str | int | bool] = {
                        "wow.saga": handler.name,
                        "wow.event": event.name,
                        "wow.commit.id": commit.id,
                    }
                    with continued_span(
                        f"wow.saga {handler.name}", commit.header.get("traceparent"), attributes
                    ):
                        await self._on_event(commit, index, event, handler)
        return commits[-1][0]

    async def _on_event(
        self, commit: Commit, index: int, event: CommitEvent, handler: EventHandler
    ) -> None:
        context = SagaContext(
            self.app.context,
            source=commit.aggregate,
            function=handler.name,
            schedules=frozenset(handler.schedules),
        )
        try:
            body = handler.event.model_validate(event.body)
            commands = _commands(await _call(handler.handler, body, context), handler.name)
        except Exception as error:
            raise SagaFailure(
                f"{handler.name} failed on {event.name} of {commit.aggregate} (commit "
                f"{commit.id}): {type(error).__name__}: {error}"
            ) from error
        base = f"{self.name}:{commit.id}:{index}:{handler.attribute}"
        for place, command in enumerate(commands):
            request_id = f"{base}:{place}"
            result = await self._send(command, request_id, commit, event)  # raises on a 5xx
            if not result.ok and result.error_code != "DuplicateRequestId":
                await self._on_rejected(command, request_id, result, commit, event)

    async def _send(
        self, command: Command[Any], request_id: str, commit: Commit, event: CommitEvent
    ) -> CommandResult:
        headers = {"upstream_id": commit.id, "upstream_name": event.name}
        if "trace_id" in commit.header:
            headers["trace_id"] = commit.header["trace_id"]
        traceparent = current_traceparent() or commit.header.get("traceparent")
        if traceparent:  # the command continues the trace of the event that caused it
            headers["traceparent"] = traceparent
        result = await self.host.send(
            CommandMessage(
                type=command.type,
                ref=command.ref,
                body=command.body.model_dump(mode="json"),
                request_id=request_id,
                owner_id=commit.owner_id,
                space_id=commit.space_id,
                headers=headers,
            )
        )
        if result.status >= 500:
            raise SagaFailure(
                f"{command.type} to {command.ref} failed: {result.error_code}: {result.error_msg}"
            )
        return result

    async def _on_rejected(
        self,
        command: Command[Any],
        request_id: str,
        result: CommandResult,
        commit: Commit,
        event: CommitEvent,
    ) -> None:
        wanting = [h for h in self.rejected if h.wants(command.type)]
        if not wanting:
            logger.info(
                "%s: %s to %s refused (%s: %s); no @on_rejected handles it",
                self.name,
                command.type,
                command.ref,
                result.error_code,
                result.error_msg,
            )
            return
        rejected = Rejected(
            command_type=command.type,
            ref=command.ref,
            body=command.body.model_dump(mode="json"),
            error_code=result.error_code,
            error_msg=result.error_msg,
            request_id=request_id,
        )
        for handler in wanting:
            context = SagaContext(self.app.context, source=commit.aggregate, function=handler.name)
            try:
                follow_ups = _commands(
                    await _call(handler.handler, rejected, context), handler.name
                )
            except Exception as error:
                raise SagaFailure(
                    f"{handler.name} failed on the refusal of {command.type}: "
                    f"{type(error).__name__}: {error}"
                ) from error
            for place, follow_up in enumerate(follow_ups):
                answer = await self._send(
                    follow_up, f"{request_id}:{handler.attribute}:{place}", commit, event
                )
                if not answer.ok and answer.error_code != "DuplicateRequestId":
                    logger.info(
                        "%s: %s to %s refused (%s: %s)",
                        handler.name,
                        follow_up.type,
                        follow_up.ref,
                        answer.error_code,
                        answer.error_msg,
                    )


async def _call(function: Any, argument: Any, context: SagaContext) -> Any:
    result = function(argument, context)
    if inspect.isawaitable(result):
        result = await result
    return result


def _commands(value: Any, where: str) -> list[Command[Any]]:
    if value is None:
        return []
    listed = [value] if isinstance(value, Command) else list(value)
    for command in listed:
        if not isinstance(command, Command) or not isinstance(command.body, BaseModel):
            raise TypeError(
                f"{where} returned {type(command).__name__}: return context.command(...), "
                "context.schedule(...) or context.cancel(...), a list of them, or None"
            )
    return listed


def saga_followers(host: DomainHost, apps: Iterable[App]) -> list[SagaFollower]:
    """One follower per saga with `@on_event` handlers, in each app."""
    followers = []
    for app in apps:
        processors: dict[str, list[EventHandler]] = {}
        for handler in app.event_handlers:
            processors.setdefault(handler.processor, []).append(handler)
        for processor, handlers in processors.items():
            rejected = [h for h in app.rejected_handlers if h.processor == processor]
            followers.append(SagaFollower(host, app, processor, handlers, rejected))
    return followers
