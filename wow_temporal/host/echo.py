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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from wow_temporal.domain.rejection import ERROR_STATUS
from wow_temporal.host.service import CommandMessage, CommandResult, Fallback
from wow_temporal.tracing import trace_id_of

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


def create_echo_host(log: Callable[[str], None] | None = None) -> FastAPI:
    """The echo host's ASGI app; `log` receives one line per command (stdout by default)."""
    emit = log or (lambda line: print(line, file=sys.stdout, flush=True))
    convention = _Convention()
    app = FastAPI(title="wow-temporal echo host", docs_url=None, redoc_url=None)

    @app.post("/wow/command/send")
    async def send(request: Request) -> JSONResponse:
        headers = request.headers
        request_id = headers.get("command-request-id", "")
        aggregate_id = headers.get("command-aggregate-id", "")
        body: Any = await request.json() if await request.body() else {}
        answer = convention.answer(aggregate_id, request_id)
        target = (
            f"{headers.get('command-aggregate-context', '')}."
            f"{headers.get('command-aggregate-name', '')} {aggregate_id} "
            f"(tenant {headers.get('command-tenant-id', '')}"
        )
        emit(
            _line(
                answer, headers.get("command-type", "?"), target, request_id, body,
                headers.get("traceparent"),
            )
        )
        result = {
            "id": request_id,
            "requestId": request_id,
            "errorCode": answer.code,
            "errorMsg": "" if answer.code == "Ok" else answer.why,
        }
        return JSONResponse(
            result, status_code=answer.status, headers={"Wow-Error-Code": answer.code}
        )

    return app


def echo_fallback(log: Callable[[str], None] | None = None) -> Fallback:
    """The echo convention for the domain host's unserved contexts: `wow-temporal dev` serves
    the e-shop and still answers hand-made commits' commands (`reject-…`, `fail-…`, …)."""
    emit = log or (lambda line: print(line, file=sys.stdout, flush=True))
    convention = _Convention()

    def answer(message: CommandMessage) -> CommandResult:
        ref = message.ref
        request_id = message.request_id or uuid.uuid4().hex
        answered = convention.answer(ref.aggregate_id, request_id)
        # the domain host answers with Wow's status for the code (500, not the echo host's 503)
        answered = _Answer(ERROR_STATUS.get(answered.code, 400), answered.code, answered.why)
        target = (
            f"{ref.context_name}.{ref.aggregate_name} {ref.aggregate_id} (tenant {ref.tenant_id}"
        )
        emit(
            _line(
                answered, message.type, target, request_id, dict(message.body),
                message.headers.get("traceparent"),
            )
        )
        return CommandResult.of(
            ref,
            command_id=request_id,
            request_id=request_id,
            code=answered.code,
            message="" if answered.code == "Ok" else answered.why,
        )

    return answer
