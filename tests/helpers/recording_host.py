"""A real HTTP Wow domain host for tests: records every command and answers as scripted.

`RecordingHost` serves `POST /wow/command/send` (FastAPI on uvicorn, in a background thread, on
127.0.0.1 and a free port). Like a real Wow host it remembers the request ids it answered `Ok`
and answers `DuplicateRequestId` when one comes again. `behave` scripts other answers per request
id, per command type or by default, optionally for the next N requests only:

    host.behave("fail", times=2)                     # 500 twice, then back to normal
    host.behave("reject", command_type="x.Cancel")   # IllegalState, HTTP 400
    host.behave("reject", error_code="NotFound", status=404, request_id="t#1")
    host.behave("hang")                              # answers only after `hang_seconds`

The `recording_host` fixture gives every test the one shared host of the session, reset.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

import pytest
import uvicorn
from fastapi import FastAPI, Request, Response

from wow_temporal.wire import (
    AGGREGATE_CONTEXT_HEADER,
    AGGREGATE_ID_HEADER,
    AGGREGATE_NAME_HEADER,
    COMMAND_SEND_PATH,
    COMMAND_TYPE_HEADER,
    ERROR_CODE_HEADER,
    MESSAGE_HEADER_PREFIX,
    REQUEST_ID_HEADER,
    TENANT_ID_HEADER,
    CommandResult,
)

__all__ = [
    "BEHAVIOURS",
    "Behaviour",
    "RecordedRequest",
    "RecordingHost",
    "recording_host",
    "shared_recording_host",
]

Behaviour = Literal["ok", "duplicate", "reject", "fail", "hang", "garbage"]
BEHAVIOURS: tuple[Behaviour, ...] = ("ok", "duplicate", "reject", "fail", "hang", "garbage")

_DEFAULTS: dict[str, tuple[int, str, str]] = {
    # behaviour: (HTTP status, errorCode, errorMsg)
    "ok": (200, "Ok", ""),
    "duplicate": (409, "DuplicateRequestId", "duplicate request id"),
    "reject": (400, "IllegalState", "refused by the recording host"),
    "fail": (500, "InternalServerError", "scripted failure"),
    "hang": (200, "Ok", ""),
    "garbage": (200, "", ""),
}

T = TypeVar("T")


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received (lower-cased header names, parsed JSON body) and how it was met."""

    headers: dict[str, str]
    body: Any
    """The JSON body, or None when it was not JSON (then see `raw_body`)."""
    raw_body: bytes
    received_ms: int
    """When it arrived, epoch milliseconds."""
    behaviour: Behaviour
    """How the host answered: `ok` means processed for the first time."""
    status: int
    error_code: str

    @property
    def request_id(self) -> str:
        return self.header(REQUEST_ID_HEADER) or ""

    @property
    def command_type(self) -> str:
        return self.header(COMMAND_TYPE_HEADER) or ""

    @property
    def aggregate_id(self) -> str:
        return self.header(AGGREGATE_ID_HEADER) or ""

    def header(self, name: str) -> str | None:
        """A header by case-insensitive name; `Command-Header-<key>` message headers too."""
        return self.headers.get(name.lower())

    def message_header(self, key: str) -> str | None:
        """The message header `key` (sent as `Command-Header-<key>`)."""
        return self.header(MESSAGE_HEADER_PREFIX + key)


@dataclass
class _Rule:
    behaviour: Behaviour
    request_id: str | None
    command_type: str | None
    times: int | None
    status: int
    error_code: str
    error_msg: str
    delay: float | None

    def matches(self, request_id: str, command_type: str) -> bool:
        return (self.request_id is None or self.request_id == request_id) and (
            self.command_type is None or self.command_type == command_type
        )

    @property
    def rank(self) -> int:
        """Request-id rules first, then command-type rules, then defaults."""
        return 0 if self.request_id is not None else 1 if self.command_type is not None else 2


@dataclass
class _State:
    requests: list[RecordedRequest] = field(default_factory=list)
    rules: list[_Rule] = field(default_factory=list)
    processed: set[str] = field(default_factory=set)


class RecordingHost:
    """A Wow domain host over real HTTP that records requests and answers as scripted."""

    def __init__(self, *, remember_request_ids: bool = True, hang_seconds: float = 30.0) -> None:
        """`remember_request_ids`: answer repeats of an `Ok` request id with DuplicateRequestId."""
        self.remember_request_ids = remember_request_ids
        self.hang_seconds = hang_seconds
        self.url = ""
        self.port = 0
        self._lock = threading.Lock()
        self._state = _State()
        self._stopping = threading.Event()
        self._generation = 0  # bumped by reset(): hanging requests of before end at once
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = self._build_app()

    # -- scripting -------------------------------------------------------------------------

    def behave(
        self,
        behaviour: str,
        *,
        request_id: str | None = None,
        command_type: str | None = None,
        times: int | None = None,
        status: int | None = None,
        error_code: str | None = None,
        error_msg: str | None = None,
        delay: float | None = None,
    ) -> None:
        """Answer matching requests with `behaviour` (for the next `times` only, if given).

        `status`, `error_code` and `error_msg` override the behaviour's defaults (`reject`:
        400 IllegalState, `fail`: 500, `duplicate`: 409 DuplicateRequestId); `delay` is how
        long `hang` waits (default `hang_seconds`). A later rule at the same level (request id,
        command type, default) takes precedence over an earlier one.
        """
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r}: use one of {BEHAVIOURS}")
        if times is not None and times < 1:
            raise ValueError("times must be at least 1")
        kind: Behaviour = behaviour
        d_status, d_code, d_msg = _DEFAULTS[kind]
        rule = _Rule(
            behaviour=kind,
            request_id=request_id,
            command_type=command_type,
            times=times,
            status=d_status if status is None else status,
            error_code=d_code if error_code is None else error_code,
            error_msg=d_msg if error_msg is None else error_msg,
            delay=delay,
        )
        with self._lock:
            self._state.rules.append(rule)

    def reset(self) -> None:
        """Forget requests, rules and remembered request ids."""
        with self._lock:
            self._state = _State()
            self._generation += 1

    def clear(self) -> None:
        """Forget recorded requests only (rules and remembered request ids stay)."""
        with self._lock:
            self._state.requests = []

    # -- inspection ------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request so far, in arrival order (a snapshot)."""
        with self._lock:
            return list(self._state.requests)

    def delivered(self) -> list[RecordedRequest]:
        """The requests answered `Ok`: each request id's first decision, in arrival order."""
        return [r for r in self.requests if r.behaviour == "ok"]

    def for_request_id(self, request_id: str) -> list[RecordedRequest]:
        """Every request carrying that request id."""
        return [r for r in self.requests if r.request_id == request_id]

    async def wait_for(
        self,
        predicate: Callable[[RecordingHost], T],
        timeout: float = 10.0,  # noqa: ASYNC109 - a plain deadline reads best in tests
    ) -> T:
        """Poll until `predicate(self)` is truthy and return its value; TimeoutError if never."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate(self)
            if value:
                return value
            if time.monotonic() >= deadline:
                seen = [(r.request_id, r.command_type, r.behaviour) for r in self.requests]
                raise TimeoutError(f"recording host: condition not met in {timeout}s; saw {seen}")
            await asyncio.sleep(0.02)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Serve on 127.0.0.1 and a free port in a background thread; `url` is set on return."""
        if self._thread is not None:
            return self
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        self._stopping.clear()
        self._server = server
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="recording-host", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("recording host did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop serving (hanging requests end at once) and join the thread."""
        if self._server is None or self._thread is None:
            return
        self._stopping.set()
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- serving ---------------------------------------------------------------------------

    def _decide(self, request_id: str, command_type: str) -> _Rule | None:
        """The rule for this request (consuming one of its `times`), or None for the default."""
        candidates = [
            (rule.rank, -index, rule)
            for index, rule in enumerate(self._state.rules)
            if rule.matches(request_id, command_type)
        ]
        if not candidates:
            return None
        _, _, rule = min(candidates, key=lambda c: (c[0], c[1]))
        if rule.times is not None:
            rule.times -= 1
            if rule.times == 0:
                self._state.rules.remove(rule)
        return rule

    def _build_app(self) -> FastAPI:
        app = FastAPI()

        @app.post(COMMAND_SEND_PATH)
        async def send(request: Request) -> Response:
            received_ms = int(time.time() * 1000)
            raw = await request.body()
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = None
            headers = {name.lower(): value for name, value in request.headers.items()}
            request_id = headers.get(REQUEST_ID_HEADER.lower(), "")
            command_type = headers.get(COMMAND_TYPE_HEADER.lower(), "")
            with self._lock:
                generation = self._generation
                rule = self._decide(request_id, command_type)
                seen = self.remember_request_ids and request_id in self._state.processed
                if rule is None or (rule.behaviour in ("ok", "hang") and seen):
                    # Like a real Wow host, a request id already decided is a duplicate, even
                    # while the host is slow.
                    kind: Behaviour = "duplicate" if seen else "ok"
                    status, code, msg = _DEFAULTS[kind]
                    if rule is not None and not seen and rule.behaviour == "ok":
                        status, code, msg = rule.status, rule.error_code, rule.error_msg
                else:
                    kind, status, code, msg = (
                        rule.behaviour,
                        rule.status,
                        rule.error_code,
                        rule.error_msg,
                    )
                if kind in ("ok", "hang") and request_id:
                    self._state.processed.add(request_id)
                self._state.requests.append(
                    RecordedRequest(
                        headers=headers,
                        body=body,
                        raw_body=raw,
                        received_ms=received_ms,
                        behaviour=kind,
                        status=status,
                        error_code=code,
                    )
                )
            if kind == "hang":
                wait = self.hang_seconds if rule is None or rule.delay is None else rule.delay
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline:
                    if self._stopping.is_set() or self._generation != generation:
                        break  # stopped or reset: end the hang now
                    await asyncio.sleep(0.02)
            if kind == "garbage":
                return Response(b"<html>not a CommandResult</html>", status, media_type="text/html")
            return _answer(headers, code, msg, status)

        return app


def _answer(headers: dict[str, str], code: str, message: str, status: int) -> Response:
    """Wow's `CommandResult` for the recorded request (any ids it named, as sent)."""
    request_id = headers.get(REQUEST_ID_HEADER.lower(), "")
    result = CommandResult(
        id=request_id,
        wait_command_id=request_id,
        context_name=headers.get(AGGREGATE_CONTEXT_HEADER.lower(), ""),
        aggregate_name=headers.get(AGGREGATE_NAME_HEADER.lower(), ""),
        tenant_id=headers.get(TENANT_ID_HEADER.lower(), ""),
        aggregate_id=headers.get(AGGREGATE_ID_HEADER.lower(), ""),
        request_id=request_id,
        command_id=request_id,
        error_code=code,
        error_msg=message,
    )
    return Response(
        result.model_dump_json(),
        status,
        headers={ERROR_CODE_HEADER: code},
        media_type="application/json",
    )


_shared: RecordingHost | None = None
_shared_lock = threading.Lock()


def shared_recording_host() -> RecordingHost:
    """The process's one started RecordingHost (stopped at exit), reset and default again."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = RecordingHost().start()
            atexit.register(_shared.stop)
        _shared.reset()
        _shared.remember_request_ids = True
        _shared.hang_seconds = 30.0
        return _shared


@pytest.fixture
def recording_host() -> Iterator[RecordingHost]:
    """A started RecordingHost with no requests, rules or remembered ids (shared, reset)."""
    host = shared_recording_host()
    yield host
    host.reset()
