"""Delivery: send one due scheduled command to the domain host through Wow's HTTP command API.

`CommandSender.send` posts the command to `/wow/command/send` and classifies the answer as
delivered (including an already-decided duplicate), rejected (a business refusal, final), a
command the host cannot read (`UnreadableCommand`: parked) or a technical failure
(`DeliveryFailure`, retried). `DeliveryActivities.deliver` is the Temporal
activity the timer workflow calls.

Classification of an answer (status, then `errorCode` from the body or `Wow-Error-Code`):

| answer                                                          | outcome                      |
|-----------------------------------------------------------------|------------------------------|
| connection error, timeout, any transport error                  | `DeliveryFailure`            |
| 408, 429, 401, 407, 421, 425, any 5xx, any 1xx/3xx              | `DeliveryFailure`            |
| 2xx/4xx with `DuplicateRequestId`                               | delivered, `duplicate=True`  |
| 2xx/4xx with `CommandValidation` or `BadRequest` (the host      | `UnreadableCommand`: a timer |
|   cannot read the command: a deploy changed it)                 | parks it at once             |
| 2xx with `Ok`                                                   | delivered                    |
| 2xx/4xx with a business code (`NotFound`, `IllegalState`, ...,  | rejected                     |
|   any code containing `VersionConflict`)                        |                              |
| 400, 403, 404, 409, 410, 422 whatever the body                  | rejected                     |
| any other 4xx (413, 415, ...), whatever the code                | rejected: the host refused   |
|                                                                 | this request as it stands    |
| 2xx whose body is not a JSON object and no `Wow-Error-Code`     | `DeliveryFailure`            |
| 2xx with an unknown code                                        | `DeliveryFailure`: not a     |
|                                                                 | known refusal, so retry      |

401/407 (credentials) and 421/425 (misdirected, too early) are failures, not refusals: they
say nothing about the command, and retrying after the operator fixes the host succeeds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from types import TracebackType
from typing import Literal, NoReturn, Protocol, Self

import httpx
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind
from pydantic import Field
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from wow_temporal.errors import WowTemporalError
from wow_temporal.metrics import record_delivery, record_lateness_bound
from wow_temporal.model import AggregateRef, ScheduledCommand, Scope, WireModel
from wow_temporal.tracing import continued_span, traceparent_context
from wow_temporal.wire import (
    COMMAND_SEND_PATH,
    DUPLICATE_REQUEST_ID,
    ERROR_CODE_HEADER,
    OK,
    REVISION_HEADER,
    WireCommand,
    command_headers,
    encode_header_value,
    origin_headers,
    read_result,
)

__all__ = [
    "BUSINESS_ERROR_CODES",
    "COMMAND_SEND_PATH",
    "DELIVERY_FAILURE",
    "DELIVERY_PARKED",
    "DUPLICATE_REQUEST_ID",
    "EARLY_DELIVERY",
    "REJECTED_STATUSES",
    "RETRYABLE_STATUSES",
    "UNREADABLE_CODES",
    "CommandSender",
    "DeletionCheck",
    "DeliveryActivities",
    "DeliveryFailure",
    "DeliveryOutcome",
    "DeliveryRequest",
    "ScheduleDetails",
    "UnreadableCommand",
    "activity_clock",
    "classify",
    "encode_header_value",
    "is_business_error",
    "refuse_early",
    "wire_command",
]

DELIVERY_FAILURE = "DeliveryFailure"
"""The `ApplicationError` type of a technical delivery failure (retryable)."""

DELIVERY_PARKED = "DeliveryParked"
"""The `ApplicationError` type of a delivery whose `max_failures`-th attempt failed (final)."""

EARLY_DELIVERY = "EarlyDelivery"
"""The `ApplicationError` type of an attempt before the command is due (retryable)."""

BUSINESS_ERROR_CODES = frozenset(
    {
        "NotFound",
        "IllegalAccessDeletedAggregate",
        "IllegalState",
        "IllegalArgument",
        "EventVersionConflict",
        "CommandExpectVersionConflict",
    }
)
"""Wow error codes that refuse the command itself; any code containing `VersionConflict` too."""

UNREADABLE_CODES = frozenset({"CommandValidation", "BadRequest"})
"""Wow error codes that say the host cannot read the command as sent (its body is invalid,
its type unknown): a deploy changed it, so the delivery parks instead of ending as a guard."""

REJECTED_STATUSES = frozenset({400, 403, 404, 409, 410, 422})
"""HTTP statuses that refuse the command whatever the body says (except `DuplicateRequestId`)."""

RETRYABLE_STATUSES = frozenset({401, 407, 408, 421, 425, 429})
"""4xx statuses that are technical failures (every 5xx is one too)."""


class ScheduleDetails(WireModel):
    """What the target reads as `command.schedule`: which schedule and slot sent the command."""

    timer: str
    """Identifies the schedule: distinct per `wow.ScheduleSet`."""
    key: str
    slot: int = Field(ge=1)
    due: int
    """When the slot was due, epoch milliseconds."""
    skipped: int = Field(default=0, ge=0)
    """Cron slots coalesced into this one."""


class DeliveryRequest(WireModel):
    """One command to deliver to its target, with the provenance it carries as message headers."""

    command: ScheduledCommand
    target: AggregateRef
    scope: Scope
    """Tenant, owner and space of the scheduling commit."""
    request_id: str = Field(min_length=1)
    """`timer#slot`: the host deduplicates on it, so redelivery is harmless."""
    upstream_id: str
    """The scheduling commit's id: the causation."""
    upstream_name: str
    """The scheduling aggregate, `context.aggregate`."""
    trace_id: str = ""
    traceparent: str | None = None
    """W3C trace context of the scheduling commit, if any."""
    schedule: ScheduleDetails
    owner: AggregateRef | None = None
    """The aggregate that set the schedule: if it was deleted since, nothing is sent."""
    set_order: tuple[int, int] = (0, -1)
    """(version, event index) of the `wow.ScheduleSet` in force, against the deletion's."""
    max_failures: int = Field(default=10, ge=1)
    """Attempts before the delivery is parked (the retry policy's `maximum_attempts`): the
    last one parks it, whether the host failed every one or some were lost with workers."""
    retried: bool = False
    """An operator's retry of a parked delivery: not counted late (it starts late by design)."""


class DeliveryOutcome(WireModel):
    """A decided delivery: the host processed the command, or refused it for good, or the
    scheduling aggregate was deleted before it was sent (`cancelled`: nothing was sent)."""

    status: Literal["delivered", "rejected", "cancelled"]
    error_code: str = OK
    error_msg: str = ""
    http_status: int
    duplicate: bool = False
    """The host answered `DuplicateRequestId`: an earlier attempt already decided it."""


class DeliveryFailure(WowTemporalError):
    """A technical failure (connection, timeout, 5xx, 429, garbage): retry the delivery."""

    def __init__(
        self, message: str, *, http_status: int | None = None, error_code: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.http_status = http_status
        self.error_code = error_code


class UnreadableCommand(DeliveryFailure):
    """The host cannot read the command (`CommandValidation`, or `BadRequest`: an unknown
    type): a deploy changed the command since it was scheduled, not a guard. A timer parks it
    at once with the host's reason, for an operator to retry once the fix (an upcaster) is
    deployed; a job's tick retries it as any failure, then parks."""


def wire_command(request: DeliveryRequest) -> WireCommand:
    """The command `request` sends: its target, the scheduling commit's scope, the request id,
    its provenance and schedule slot as message headers, and its trace context if valid."""
    target, scope, schedule = request.target, request.scope, request.schedule
    headers = {
        "upstream_id": request.upstream_id,
        "upstream_name": request.upstream_name,
        "schedule_timer": schedule.timer,
        "schedule_key": schedule.key,
        "schedule_slot": str(schedule.slot),
        "schedule_due": str(schedule.due),
        "schedule_skipped": str(schedule.skipped),
    }
    if request.trace_id:
        headers["trace_id"] = request.trace_id
    headers.update(_origin(request))
    if request.command.revision is not None:
        headers[REVISION_HEADER] = request.command.revision
    traceparent = request.traceparent
    if traceparent is not None and traceparent_context(traceparent) is None:
        traceparent = None  # not a W3C trace context: the host is not told of it
    return WireCommand.to(
        target,
        request.command.type,
        request_id=request.request_id,
        owner_id=scope.owner_id,
        space_id=scope.space_id,
        headers=headers,
        traceparent=traceparent,
        body=request.command.body,
    )


def _origin(request: DeliveryRequest) -> dict[str, str]:
    """The headers that name the slot's `wow.ScheduleSet` (`wire.ORIGIN_HEADERS`), so the
    target can refuse a slot its log stopped before it was due; none for a request from before
    they were sent (no owner or version), or whose schedule id is not `{commit}:{event}`."""
    version = request.set_order[0]
    prefix = f"{request.upstream_id}:"
    timer = request.schedule.timer
    if request.owner is None or version < 1 or not timer.startswith(prefix):
        return {}
    return origin_headers(request.owner, version, timer[len(prefix) :])


def is_business_error(error_code: str) -> bool:
    """True for a Wow error code that refuses the command itself (retrying cannot help)."""
    return error_code in BUSINESS_ERROR_CODES or "VersionConflict" in error_code


class CommandSender:
    """Posts scheduled commands to a Wow domain host over one pooled `httpx.AsyncClient`."""

    def __init__(
        self,
        host: str,
        *,
        timeout: float = 10.0,
        max_connections: int = 100,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        """`host` is the base URL (`http://127.0.0.1:8080`); `client` overrides the built one."""
        self.host = host.rstrip("/")
        self.timeout = timeout
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            follow_redirects=False,
        )

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def headers(self, request: DeliveryRequest) -> dict[str, str]:
        """The HTTP headers of the command request: routing, scope, provenance, trace context."""
        headers = command_headers(wire_command(request))
        if trace.get_current_span().get_span_context().is_valid:
            # The active span (e.g. the delivery activity's) is the most precise parent.
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            headers.update({name: value for name, value in carrier.items() if value.isascii()})
        return headers

    async def send(self, request: DeliveryRequest) -> DeliveryOutcome:
        """Send the command once; delivered or rejected, or raise `DeliveryFailure` to retry."""
        what = f"{request.command.type} {request.request_id} to {request.target}"
        try:
            response = await self._client.post(
                self.host + COMMAND_SEND_PATH,
                json=request.command.body,
                headers=self.headers(request),
            )
        except httpx.TimeoutException as error:
            raise DeliveryFailure(
                f"timed out after {self.timeout}s sending {what}: {type(error).__name__}"
            ) from error
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise DeliveryFailure(
                f"could not send {what} to {self.host}: {type(error).__name__}: {error}"
            ) from error
        return classify(response, what)


def classify(response: httpx.Response, what: str = "the command") -> DeliveryOutcome:
    """Delivered or rejected, or raise `DeliveryFailure`; the module docstring has the table."""
    status = response.status_code
    body, code, message = read_result(response.content, response.headers.get(ERROR_CODE_HEADER))
    detail = f"HTTP {status}, errorCode {code or '-'}" + (f": {message}" if message else "")

    if status >= 500 or status in RETRYABLE_STATUSES or status < 200 or 300 <= status < 400:
        raise DeliveryFailure(
            f"host failed on {what}: {detail}", http_status=status, error_code=code
        )
    if code == DUPLICATE_REQUEST_ID:
        return DeliveryOutcome(
            status="delivered",
            error_code=code,
            error_msg=message,
            http_status=status,
            duplicate=True,
        )
    if status < 300:
        if body is None and code is None:
            snippet = response.text[:200]
            raise DeliveryFailure(
                f"host answered {what} with HTTP {status} and no CommandResult: {snippet!r}",
                http_status=status,
            )
        if code == OK:
            return DeliveryOutcome(
                status="delivered", error_code=code, error_msg=message, http_status=status
            )
        if code in UNREADABLE_CODES:
            raise UnreadableCommand(
                f"the host cannot read {what}: {detail}", http_status=status, error_code=code
            )
        if code is not None and is_business_error(code):
            return DeliveryOutcome(
                status="rejected", error_code=code, error_msg=message, http_status=status
            )
        raise DeliveryFailure(
            f"host answered {what} with an unknown outcome: {detail}",
            http_status=status,
            error_code=code,
        )
    if code in UNREADABLE_CODES:
        raise UnreadableCommand(
            f"the host cannot read {what}: {detail}", http_status=status, error_code=code
        )
    # 4xx other than the retryable ones: the host refused this request as it stands.
    return DeliveryOutcome(
        status="rejected",
        error_code=code or f"Http{status}",
        error_msg=message or response.reason_phrase,
        http_status=status,
    )


def activity_clock() -> float:
    """Epoch seconds: the later of this machine's clock and the attempt's scheduled time.

    For `DeliveryActivities(clock=...)` under the time-skipping test server, whose skipped time
    the wall clock never sees (so `time.time` would call every skipped-to delivery early).
    """
    scheduled = activity.info().current_attempt_scheduled_time.timestamp()
    return max(time.time(), scheduled)


class DeletionCheck(Protocol):
    """Tells whether an aggregate was deleted, and at which (version, event index)."""

    async def deleted_at(self, aggregate: AggregateRef) -> tuple[int, int] | None:
        """The order of the aggregate's deletion, or None if it was never deleted."""
        ...


log = logging.getLogger(__name__)


def _fields(request: DeliveryRequest, outcome: str) -> dict[str, object]:
    """A delivery's log fields (the JSON log format shows them): timer, slot, outcome, lateness."""
    schedule = request.schedule
    return {
        "timer": schedule.timer,
        "key": schedule.key,
        "slot": schedule.slot,
        "request_id": request.request_id,
        "outcome": outcome,
        "lateness_ms": max(0, int(time.time() * 1000) - schedule.due),
    }


def refuse_early(early_ms: float, message: str, error_type: str) -> None:
    """Never early: an attempt that starts `early_ms` > 0 before its due time fails, benign, and
    is retried just after it (a worker's clock behind the server's, or a timer woken early)."""
    if early_ms > 0:
        raise ApplicationError(
            message,
            type=error_type,
            next_retry_delay=timedelta(milliseconds=early_ms + 50),
            category=ApplicationErrorCategory.BENIGN,
        )


def spent(attempt: int, failures: int, budget: int, failing: str = "the host") -> str:
    """Why a delivery's or a tick's budget is spent, in words: the attempts, how many of them
    `failing` failed, and how many were lost with a worker."""
    lost = attempt - failures
    if lost <= 0:
        return f"attempt {attempt} of {budget} failed: {failing} failed all {attempt}"
    return (
        f"attempt {attempt} of {budget} failed: {failing} failed {failures} of them; {lost} "
        "lost with a worker, timed out or started early"
    )


def park_reason(cause: BaseException | None, budget: int, what: str = "the delivery") -> str:
    """Why a delivery or a tick failed for good, from its activity's last failure: its own
    words when an attempt parked it; else the budget's last attempt was lost with a worker or
    timed out, which Temporal's bare timeout message would not say."""
    if isinstance(cause, ApplicationError):
        return cause.message
    return (
        f"attempt {budget} of {budget} was lost with a worker or timed out ({cause}): the "
        f"budget is spent; {what} may have been decided, and a retry sends the same request id"
    )


def _raise_failure(
    request: DeliveryRequest, failures: int, error: DeliveryFailure, attempt: int = 0
) -> NoReturn:
    """The host failed for the `failures`-th time on attempt `attempt`: retry (the next attempt
    reads the count from the heartbeat), or park on the budget's last attempt."""
    details = {"httpStatus": error.http_status, "errorCode": error.error_code}
    attempt = max(attempt, failures)
    if attempt >= request.max_failures:
        log.warning(
            "parking %s %s after %d attempts, %d failures of the host: %s",
            request.command.type, request.request_id, attempt, failures, error,
            extra=_fields(request, "parked"),
        )
        record_delivery("parked")
        raise ApplicationError(
            f"{spent(attempt, failures, request.max_failures)}; last: {error}",
            details,
            type=DELIVERY_PARKED,
            non_retryable=True,
            category=ApplicationErrorCategory.BENIGN,
        ) from None
    log.warning(
        "delivery of %s %s failed (attempt %d of %d before parking): %s",
        request.command.type, request.request_id, attempt, request.max_failures, error,
        extra=_fields(request, "failed"),
    )
    record_delivery("failed")
    activity.heartbeat(failures)
    raise ApplicationError(
        str(error), details, type=DELIVERY_FAILURE, category=ApplicationErrorCategory.BENIGN
    ) from None


def _raise_parked(request: DeliveryRequest, error: UnreadableCommand) -> NoReturn:
    """The host cannot read the command: park it now with the host's reason (retrying before
    a fix is deployed cannot help, and ending it as a guard would lose it)."""
    log.warning(
        "parking %s %s: %s; deploy the fix (an upcaster) and retry it",
        request.command.type, request.request_id, error,
        extra=_fields(request, "parked"),
    )
    record_delivery("parked")
    raise ApplicationError(
        f"{error} (a deploy changed the command: deploy the fix, then retry)",
        {"httpStatus": error.http_status, "errorCode": error.error_code},
        type=DELIVERY_PARKED,
        non_retryable=True,
        category=ApplicationErrorCategory.BENIGN,
    ) from None


def _record_outcome(request: DeliveryRequest, outcome: DeliveryOutcome) -> None:
    """Count and log what the host decided: delivered (perhaps a duplicate) or rejected."""
    fields = _fields(request, outcome.status)
    lateness = fields["lateness_ms"]
    record_delivery(outcome.status, lateness if isinstance(lateness, int) else None)
    if outcome.status == "delivered":
        log.info(
            "delivered %s %s to %s, %d ms after due%s",
            request.command.type,
            request.request_id,
            request.target,
            fields["lateness_ms"],
            " (duplicate: already decided)" if outcome.duplicate else "",
            extra=fields,
        )
    else:
        log.warning(
            "%s %s rejected by %s: %s %s (HTTP %d)",
            request.command.type,
            request.request_id,
            request.target,
            outcome.error_code,
            outcome.error_msg,
            outcome.http_status,
            extra=fields,
        )


class DeliveryActivities:
    """The delivery activity, bound to one `CommandSender` (register the bound method).

    Attempts are retried by Temporal up to the parking budget (`max_failures`, the retry
    policy's `maximum_attempts`): the last one parks the slot, whatever the earlier ones met. The
    host's failures are kept in the heartbeat details across attempts, so the park says how many
    of the attempts the host failed and how many were lost with a worker.
    """

    def __init__(
        self,
        sender: CommandSender,
        *,
        clock: Callable[[], float] = time.time,
        deletions: DeletionCheck | None = None,
        late_after: timedelta | None = None,
    ) -> None:
        """`clock` gives epoch seconds for the never-early check (`activity_clock` in tests);
        `deletions` is checked before each send (None: no check, for tests of one module)."""
        self.sender = sender
        self.clock = clock
        self.deletions = deletions
        self.late_after = late_after  # wow.timers.poll-interval: later first attempts count

    @activity.defn(name="wow.deliver")
    async def deliver(self, request: DeliveryRequest) -> DeliveryOutcome:
        """Deliver one due command: never early, never for a deleted aggregate; a technical
        failure is raised to be retried, and parks the delivery once the budget is spent."""
        info = activity.info()
        failures = int(info.heartbeat_details[0]) if info.heartbeat_details else 0
        early_ms = request.schedule.due - self.clock() * 1000
        refuse_early(
            early_ms,
            f"refusing early delivery of {request.request_id}: "
            f"due in {early_ms:.0f} ms (at {request.schedule.due})",
            EARLY_DELIVERY,
        )
        schedule = request.schedule
        if not request.retried:
            record_lateness_bound(schedule.due, self.late_after)
        attributes: dict[str, str | int | bool] = {
            "wow.command.type": request.command.type,
            "wow.request_id": request.request_id,
            "wow.timer": schedule.timer,
            "wow.key": schedule.key,
            "wow.slot": schedule.slot,
            "wow.target": str(request.target),
            "wow.attempt": info.attempt,
        }
        name = f"wow.deliver {request.command.type}"
        with continued_span(name, request.traceparent, attributes, kind=SpanKind.CLIENT) as span:
            try:
                outcome = await self._deliver(request, failures, info.heartbeat_timeout)
            except ApplicationError as error:
                if span is not None:
                    parked = error.type == DELIVERY_PARKED
                    span.set_attribute("wow.outcome", "parked" if parked else "failed")
                raise
            if span is not None:
                span.set_attribute("wow.outcome", outcome.status)
                if outcome.http_status:  # 0: cancelled before anything was sent
                    span.set_attribute("http.response.status_code", outcome.http_status)
            return outcome

    async def _deliver(
        self, request: DeliveryRequest, failures: int, heartbeat_timeout: timedelta | None
    ) -> DeliveryOutcome:
        """Check the deletion records, send, and record the outcome (log line and metrics);
        a technical failure is raised as the retryable or the parking `ApplicationError`."""
        cancelled = await self._cancelled_by_deletion(request)
        if cancelled is not None:
            return cancelled
        try:
            outcome = await self._send(request, failures, heartbeat_timeout)
        except UnreadableCommand as error:
            _raise_parked(request, error)
        except DeliveryFailure as error:
            _raise_failure(request, failures + 1, error, activity.info().attempt)
        _record_outcome(request, outcome)
        return outcome

    async def _cancelled_by_deletion(self, request: DeliveryRequest) -> DeliveryOutcome | None:
        """The outcome of a delivery whose aggregate was deleted after its timer was set, or
        None: the deletion record is read before every send, not trusted to have arrived."""
        if self.deletions is None or request.owner is None:
            return None
        deleted = await self.deletions.deleted_at(request.owner)
        if deleted is None or deleted <= request.set_order:
            return None
        message = f"{request.owner} was deleted at version {deleted[0]}"
        log.info("not sending %s %s: %s", request.command.type, request.request_id, message)
        record_delivery("cancelled")
        return DeliveryOutcome(
            status="cancelled", error_code="AggregateDeleted", error_msg=message, http_status=0
        )

    async def _send(
        self, request: DeliveryRequest, failures: int, heartbeat_timeout: timedelta | None
    ) -> DeliveryOutcome:
        """Send once, heartbeating while a slow host answers; a cancel request lets the send
        finish (the host may have the command already), so its outcome is known."""
        sending = asyncio.ensure_future(self.sender.send(request))
        beat = heartbeat_timeout.total_seconds() / 3 if heartbeat_timeout else None
        while not sending.done():
            try:
                await asyncio.wait({sending}, timeout=beat)
            except asyncio.CancelledError:
                continue  # the workflow no longer wants it: the send still finishes
            if not sending.done():
                activity.heartbeat(failures)
        return sending.result()
