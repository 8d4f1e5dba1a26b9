"""A domain host for development that answers by convention, so `wow-temporal dev` shows every
outcome a real host can give, without one.

It speaks Wow's command API (`POST /wow/command/send`) and answers by the command's aggregate
id (`Command-Aggregate-Id`), with the code in the `CommandResult` body (`errorCode`) and the
`Wow-Error-Code` header:

- `reject-…`: 400 `IllegalState`, every attempt. A business refusal: the timer is done.
- `fail-…`: 503 `InternalServerError`, every attempt. A technical failure: retried
  `wow.timers.max-attempts` times, then parked; an operator's retry fails and parks again.
- `flaky-…`: 503 for the first 3 attempts of each request id, then `Ok`: delivered on the 4th
  attempt, or (with fewer than 4 attempts) parked, then delivered by an operator's retry.
- any other id: `Ok` once per request id, `DuplicateRequestId` after.

Each command prints one line saying what the host answered and why.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from wow_temporal.host.service import CommandMessage, Fallback
from wow_temporal.tracing import trace_id_of
from wow_temporal.wire import (
    COMMAND_SEND_PATH,
    ERROR_CODE_HEADER,
    OK,
    TRACEPARENT_HEADER,
    CommandResult,
    CommandTarget,
    WireError,
    parse_command,
)

__all__ = [
    "FAIL_PREFIX",
    "FLAKY_FAILURES",
    "FLAKY_PREFIX",
    "REJECT_PREFIX",
    "create_echo_host",
    "echo_fallback",
]

REJECT_PREFIX = "reject-"
"""Aggregate ids the echo host refuses: a business refusal, the timer is done."""

FAIL_PREFIX = "fail-"
"""Aggregate ids the echo host fails on every attempt: a technical failure, retried, parked."""

FLAKY_PREFIX = "flaky-"
"""Aggregate ids the echo host fails `FLAKY_FAILURES` times per request id, then accepts."""

FLAKY_FAILURES = 3
"""Attempts of each `flaky-…` request id that fail before one succeeds."""


@dataclass(frozen=True)
class _Answer:
    """What the host answers one attempt with, and why (printed, and sent as `errorMsg`)."""

    status: int
    code: str
    why: str

    @property
    def label(self) -> str:
        if self.status >= 500:
            return f"Failed {self.status} {self.code}"
        if self.status >= 400:
            return f"Rejected {self.status} {self.code}"
        return self.code


class _Convention:
    """The host's memory: attempts and accepted commands per request id."""

    def __init__(self) -> None:
        self.attempts: dict[str, int] = {}
        self.accepted: set[str] = set()

    def answer(self, aggregate_id: str, request_id: str) -> _Answer:
        attempt = self.attempts.get(request_id, 0) + 1
        self.attempts[request_id] = attempt
        if aggregate_id.startswith(REJECT_PREFIX):
            why = f"{REJECT_PREFIX}…: always refused, a business refusal: no retry"
            return _Answer(400, "IllegalState", why)
        if aggregate_id.startswith(FAIL_PREFIX):
            why = f"{FAIL_PREFIX}…: always fails, attempt {attempt}: retried, then parked"
            return _Answer(503, "InternalServerError", why)
        flaky = aggregate_id.startswith(FLAKY_PREFIX)
        if flaky and attempt <= FLAKY_FAILURES:
            why = f"{FLAKY_PREFIX}…: fails the first {FLAKY_FAILURES} attempts, this is {attempt}"
            return _Answer(503, "InternalServerError", why)
        if request_id in self.accepted:
            return _Answer(200, "DuplicateRequestId", "this request id was already accepted")
        self.accepted.add(request_id)
        if flaky:
            return _Answer(200, "Ok", f"{FLAKY_PREFIX}…: attempt {attempt} succeeds")
        return _Answer(200, "Ok", "a new request id")


def _line(
    answer: _Answer,
    command_type: str,
    target: str,
    request_id: str,
    body: Any,
    traceparent: str | None = None,
) -> str:
    """The line printed for one command: what was answered and why, to what (and in which
    trace), and the body."""
    trace_id = trace_id_of(traceparent)
    trace = f", trace {trace_id}" if trace_id else ""
    return (
        f"[echo host] {answer.label} ({answer.why}) {command_type} → {target}, request "
        f"{request_id}{trace}) {json.dumps(body, separators=(',', ':'))[:200]}"
    )


class _Echo:
    """The convention and where its lines go, answering commands over HTTP or in the host."""

    def __init__(self, log: Callable[[str], None] | None) -> None:
        self.emit = log or (lambda line: print(line, file=sys.stdout, flush=True))
        self.convention = _Convention()

    def answer(
        self,
        command_type: str,
        ref: CommandTarget,
        request_id: str,
        body: Mapping[str, Any],
        traceparent: str | None,
    ) -> CommandResult:
        """Answer by the convention, print the line, and give Wow's `CommandResult` (with the
        convention's status: 503 for a technical failure, which the timers retry)."""
        answered = self.convention.answer(ref.aggregate_id, request_id)
        target = (
            f"{ref.context_name}.{ref.aggregate_name} {ref.aggregate_id} (tenant {ref.tenant_id}"
        )
        self.emit(_line(answered, command_type, target, request_id, dict(body), traceparent))
        return CommandResult.of(
            ref,
            command_id=request_id,
            request_id=request_id,
            code=answered.code,
            message="" if answered.code == OK else answered.why,
            status=answered.status,
        )


def create_echo_host(log: Callable[[str], None] | None = None) -> FastAPI:
    """The echo host's ASGI app; `log` receives one line per command (stdout by default)."""
    echo = _Echo(log)
    app = FastAPI(title="wow-temporal echo host", docs_url=None, redoc_url=None)

    @app.post(COMMAND_SEND_PATH)
    async def send(request: Request) -> JSONResponse:
        try:
            command = parse_command(request.headers, await request.body())
        except WireError as error:  # refused as a Wow host refuses it: no retry
            result = CommandResult.refusing(request.headers, error, command_id=uuid.uuid4().hex)
        else:
            request_id = command.request_id or uuid.uuid4().hex
            result = echo.answer(
                command.type, command, request_id, command.body, command.traceparent
            )
        return JSONResponse(
            result.model_dump(mode="json"),
            status_code=result.status,
            headers={ERROR_CODE_HEADER: result.error_code},
        )

    return app


def echo_fallback(log: Callable[[str], None] | None = None) -> Fallback:
    """The echo convention for the domain host's unserved contexts: `wow-temporal dev` serves
    the e-shop and still answers hand-made commits' commands (`reject-…`, `fail-…`, …), with
    the echo host's statuses."""
    echo = _Echo(log)

    def answer(message: CommandMessage) -> CommandResult:
        return echo.answer(
            message.type,
            message.ref,
            message.request_id or uuid.uuid4().hex,
            message.body,
            message.headers.get(TRACEPARENT_HEADER),
        )

    return answer
