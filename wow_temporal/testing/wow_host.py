"""A fake Wow domain host over real HTTP, for tests and benchmarks (as httpx ships `MockTransport`):
it records every command and answers as scripted, as a real Wow host would.

`FakeWowHost` serves `POST /wow/command/send` as a raw ASGI app, in a background thread of this
process (`start()`) or as a process of its own (`python -m wow_temporal.testing.wow_host --port
P`, driven with `RemoteWowHost`). It remembers the request ids it decided and answers
`DuplicateRequestId` when one comes again. `behave` scripts other answers, matched by request id,
command type, the aggregate id's prefix, or by default; for the next N requests only (`times`)
or the first N attempts of each request id (`attempts`):

    host.behave("fail", times=2)                          # 500 twice, then back to normal
    host.behave("reject", command_type="x.Cancel")        # IllegalState, HTTP 400
    host.behave("fail", aggregate_prefix="flaky", attempts=2, status=503)
    host.behave("hang", delay=(0.2, 1.5))                 # answers Ok, 0.2-1.5 s late

Told the domain's log (`log(commits)`), it also guards as docs/delivery.md asks a host in
another language to: a scheduled command naming the `wow.ScheduleSet` it came from (the origin
headers, `wire.ORIGIN_HEADERS`) is refused `IllegalState` when the owner's log cancelled
its key, set it anew or deleted the owner after that set and before the slot was due
(`host.guard.stop_before_due`), and the refusal is answered again to its request id. Without a
log, or for an owner the log does not hold, it answers as scripted.

`GET /_arrivals?since=N` gives the arrivals from the N-th on as JSON; `POST /_behave`,
`POST /_unbehave`, `POST /_log` and `POST /_reset` script a host in another process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

import httpx
import uvicorn

from wow_temporal.host.guard import SLOT_STOPPED, stop_before_due
from wow_temporal.model import AggregateRef, Commit
from wow_temporal.wire import (
    AGGREGATE_ID_HEADER,
    COMMAND_SEND_PATH,
    COMMAND_TYPE_HEADER,
    DUPLICATE_REQUEST_ID,
    ERROR_CODE_HEADER,
    MESSAGE_HEADER_PREFIX,
    OK,
    REQUEST_ID_HEADER,
    CommandResult,
    SlotOrigin,
)

__all__ = ["BEHAVIOURS", "Arrival", "Behaviour", "FakeWowHost", "RemoteWowHost"]

Behaviour = Literal["ok", "duplicate", "reject", "fail", "hang", "garbage"]
BEHAVIOURS: tuple[Behaviour, ...] = ("ok", "duplicate", "reject", "fail", "hang", "garbage")

_DEFAULTS: dict[str, tuple[int, str, str]] = {
    # behaviour: (HTTP status, errorCode, errorMsg)
    "ok": (200, OK, ""),
    "duplicate": (409, DUPLICATE_REQUEST_ID, "duplicate request id"),
    "reject": (400, "IllegalState", "refused by the fake host"),
    "fail": (500, "InternalServerError", "scripted failure"),
    "hang": (200, OK, ""),
    "garbage": (200, "", ""),
}
_DECIDES = frozenset({"ok", "hang"})
_REQUEST_ID = REQUEST_ID_HEADER.lower()
_COMMAND_TYPE = COMMAND_TYPE_HEADER.lower()
_AGGREGATE_ID = AGGREGATE_ID_HEADER.lower()
_MESSAGE_HEADER = MESSAGE_HEADER_PREFIX.lower()

T = TypeVar("T")


@dataclass(frozen=True)
class Arrival:
    """One request as received (lower-cased header names, parsed JSON body) and how it was met."""

    headers: dict[str, str]
    body: Any
    """The JSON body, or None when it was not JSON (then see `raw_body`)."""
    raw_body: bytes
    received_ms: int
    """When it arrived, epoch milliseconds."""
    behaviour: Behaviour
    """How the host answered: `ok` (or `hang`) means decided for the first time."""
    status: int
    error_code: str

    @property
    def request_id(self) -> str:
        return self.headers.get(_REQUEST_ID, "")

    @property
    def command_type(self) -> str:
        return self.headers.get(_COMMAND_TYPE, "")

    @property
    def aggregate_id(self) -> str:
        return self.headers.get(_AGGREGATE_ID, "")

    @property
    def decided(self) -> bool:
        """Decided `Ok` here for the first time (answered at once, or late by `hang`)."""
        return self.behaviour in _DECIDES

    def header(self, name: str) -> str | None:
        """A header by case-insensitive name."""
        return self.headers.get(name.lower())

    def message_header(self, key: str) -> str | None:
        """The message header `key` (sent as `Command-Header-<key>`)."""
        return self.header(MESSAGE_HEADER_PREFIX + key)

    def to_json(self) -> dict[str, Any]:
        """As JSON values; the raw body as Latin-1 text, which gives every byte back."""
        out = asdict(self)
        out["raw_body"] = self.raw_body.decode("latin-1")
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Arrival:
        return cls(**{**data, "raw_body": str(data["raw_body"]).encode("latin-1")})


@dataclass
class _Rule:
    behaviour: Behaviour
    request_id: str | None = None
    command_type: str | None = None
    aggregate_prefix: str | None = None
    times: int | None = None
    attempts: int | None = None
    status: int | None = None
    error_code: str | None = None
    error_msg: str | None = None
    delay: float | tuple[float, float] | None = None

    def matches(self, request_id: str, command_type: str, aggregate_id: str, attempt: int) -> bool:
        return (
            (self.request_id is None or self.request_id == request_id)
            and (self.command_type is None or self.command_type == command_type)
            and (self.aggregate_prefix is None or aggregate_id.startswith(self.aggregate_prefix))
            and (self.attempts is None or attempt <= self.attempts)
        )

    @property
    def rank(self) -> int:
        """Request-id rules first, then command-type, then aggregate-prefix, then defaults."""
        if self.request_id is not None:
            return 0
        return 1 if self.command_type is not None else 2 if self.aggregate_prefix else 3

    def answer(self) -> tuple[int, str, str]:
        status, code, message = _DEFAULTS[self.behaviour]
        return (
            status if self.status is None else self.status,
            code if self.error_code is None else self.error_code,
            message if self.error_msg is None else self.error_msg,
        )


@dataclass
class _State:
    arrivals: list[Arrival] = field(default_factory=list)
    rules: list[_Rule] = field(default_factory=list)
    decided: set[str] = field(default_factory=set)
    attempts: Counter[str] = field(default_factory=Counter)
    log: dict[AggregateRef, dict[int, Commit]] = field(default_factory=dict)
    """The domain's log as told (`log`): each aggregate's commits by version."""
    refused: dict[str, str] = field(default_factory=dict)
    """The guard's refusals by request id, answered again to a repeat."""


class FakeWowHost:
    """A Wow domain host over real HTTP that records commands and answers as scripted."""

    def __init__(self, *, remember_request_ids: bool = True, hang_seconds: float = 30.0) -> None:
        """`remember_request_ids`: answer repeats of a decided request id `DuplicateRequestId`;
        `hang_seconds`: how long `hang` waits unless its rule says."""
        self.remember_request_ids = remember_request_ids
        self.hang_seconds = hang_seconds
        self.url = ""
        self.port = 0
        self._lock = threading.Lock()
        self._state = _State()
        self._stopping = threading.Event()
        self._generation = 0  # bumped by reset(): hanging requests of before end at once
        self._epoch = 0  # bumped whenever the arrivals start over (reset, clear)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # -- scripting -------------------------------------------------------------------------

    def behave(
        self,
        behaviour: str,
        *,
        request_id: str | None = None,
        command_type: str | None = None,
        aggregate_prefix: str | None = None,
        times: int | None = None,
        attempts: int | None = None,
        status: int | None = None,
        error_code: str | None = None,
        error_msg: str | None = None,
        delay: float | tuple[float, float] | None = None,
    ) -> None:
        """Answer matching requests with `behaviour`: for the next `times` only, or the first
        `attempts` of each request id, if given.

        `status`, `error_code` and `error_msg` override the behaviour's defaults (`reject`:
        400 IllegalState, `fail`: 500, `duplicate`: 409 DuplicateRequestId); `delay` is how
        long `hang` waits (seconds, or a range drawn from). A later rule at the same level
        (request id, command type, aggregate prefix, default) wins over an earlier one.
        """
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r}: use one of {BEHAVIOURS}")
        if (times is not None and times < 1) or (attempts is not None and attempts < 1):
            raise ValueError("times and attempts must be at least 1")
        delay = _delay(delay)
        rule = _Rule(
            behaviour,
            request_id,
            command_type,
            aggregate_prefix,
            times,
            attempts,
            status,
            error_code,
            error_msg,
            delay,
        )
        with self._lock:
            self._state.rules.append(rule)

    def unbehave(
        self,
        *,
        request_id: str | None = None,
        command_type: str | None = None,
        aggregate_prefix: str | None = None,
    ) -> None:
        """Drop the rules matching exactly these (e.g. a host that heals)."""
        key = (request_id, command_type, aggregate_prefix)
        with self._lock:
            self._state.rules = [
                r
                for r in self._state.rules
                if (r.request_id, r.command_type, r.aggregate_prefix) != key
            ]

    def log(self, commits: Iterable[Commit]) -> None:
        """Record commits of the domain's log (any aggregates, in any order; a version told
        again replaces the one before), so the guard judges the slots of their aggregates."""
        with self._lock:
            for commit in commits:
                self._state.log.setdefault(commit.aggregate, {})[commit.version] = commit

    def reset(self) -> None:
        """Forget arrivals, rules, decided request ids and the log."""
        with self._lock:
            self._state = _State()
            self._generation += 1
            self._epoch += 1

    def clear(self) -> None:
        """Forget recorded arrivals only (rules, decided request ids and the log stay)."""
        with self._lock:
            self._state.arrivals = []
            self._epoch += 1

    # -- inspection ------------------------------------------------------------------------

    @property
    def requests(self) -> list[Arrival]:
        """Every arrival so far, in order (a snapshot)."""
        with self._lock:
            return list(self._state.arrivals)

    def delivered(self) -> list[Arrival]:
        """The arrivals decided `Ok` (answered at once, or late by `hang`): each request id's
        first decision, in arrival order."""
        return [r for r in self.requests if r.decided]

    def for_request_id(self, request_id: str) -> list[Arrival]:
        """Every arrival carrying that request id."""
        return [r for r in self.requests if r.request_id == request_id]

    async def wait_for(
        self,
        predicate: Callable[[FakeWowHost], T],
        timeout: float = 10.0,  # noqa: ASYNC109 - a plain deadline reads best in tests
    ) -> T:
        """Poll until `predicate(self)` is truthy and return its value; TimeoutError if never."""
        deadline = time.monotonic() + timeout
        while not (value := predicate(self)):
            if time.monotonic() >= deadline:
                seen = [(r.request_id, r.command_type, r.behaviour) for r in self.requests]
                raise TimeoutError(f"fake Wow host: condition not met in {timeout}s; saw {seen}")
            await asyncio.sleep(0.02)
        return value

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
        server = _server(self, timeout_graceful_shutdown=1)
        self._stopping.clear()
        self._server = server
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="fake-wow-host", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                sock.close()
                raise RuntimeError("the fake Wow host did not start")
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

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The ASGI app: Wow's command endpoint and the control endpoints."""
        if scope["type"] != "http":
            return
        received_ms = int(time.time() * 1000)
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        raw = b"".join(chunks)
        path = scope["path"]
        if path == COMMAND_SEND_PATH:
            headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
            }
            await _reply(send, *(await self._command(headers, raw, received_ms)))
        elif path in _CONTROL:
            query = urllib.parse.parse_qs(scope.get("query_string", b"").decode())
            try:
                out = _CONTROL[path](self, json.loads(raw) if raw else {}, query)
            except (ValueError, TypeError) as error:  # a bad rule, unknown keys, bad JSON
                body = json.dumps({"error": str(error)}).encode()
                await _reply(send, 400, body, "application/json", {})
                return
            await _reply(send, 200, json.dumps(out).encode(), "application/json", {})
        else:
            await _reply(send, 404, b"{}", "application/json", {})

    async def _command(
        self, headers: dict[str, str], raw: bytes, received_ms: int
    ) -> tuple[int, bytes, str, dict[str, str]]:
        request_id = headers.get(_REQUEST_ID, "")
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        with self._lock:
            generation = self._generation
            rule, behaviour, (status, code, message) = self._decide(headers)
            if behaviour in _DECIDES and request_id:
                self._state.decided.add(request_id)
            self._state.arrivals.append(
                Arrival(headers, body, raw, received_ms, behaviour, status, code)
            )
        if behaviour == "hang":
            await self._hang(rule, generation)
        if behaviour == "garbage":
            return status, b"<html>not a CommandResult</html>", "text/html", {}
        result = CommandResult.answering(headers, code=code, message=message)
        return (
            status,
            result.model_dump_json().encode(),
            "application/json",
            {ERROR_CODE_HEADER: code},
        )

    def _decide(
        self, headers: dict[str, str]
    ) -> tuple[_Rule | None, Behaviour, tuple[int, str, str]]:
        """The rule for this request (consuming one of its `times`), how it is met, the answer."""
        request_id = headers.get(_REQUEST_ID, "")
        if request_id:  # without one, every request is a first attempt
            self._state.attempts[request_id] += 1
        attempt = self._state.attempts[request_id] if request_id else 1
        facts = (request_id, headers.get(_COMMAND_TYPE, ""), headers.get(_AGGREGATE_ID, ""))
        matching = [
            (rule.rank, -index, rule)
            for index, rule in enumerate(self._state.rules)
            if rule.matches(*facts, attempt)
        ]
        rule = min(matching, key=lambda m: (m[0], m[1]))[2] if matching else None
        if rule is not None and rule.times is not None:
            rule.times -= 1
            if rule.times == 0:
                self._state.rules.remove(rule)
        seen = self.remember_request_ids and request_id in self._state.decided
        if seen and (rule is None or rule.behaviour in _DECIDES):
            # Like a real Wow host, a request id already decided is a duplicate, even while
            # the host is slow.
            return rule, "duplicate", _DEFAULTS["duplicate"]
        if rule is None or rule.behaviour in _DECIDES:
            refusal = self._guarded(request_id, headers)
            if refusal is not None:
                return rule, "reject", (_DEFAULTS["reject"][0], SLOT_STOPPED, refusal)
        if rule is None:
            return None, "ok", _DEFAULTS["ok"]
        return rule, rule.behaviour, rule.answer()

    def _guarded(self, request_id: str, headers: Mapping[str, str]) -> str | None:
        """The guard's refusal of a command the host would decide (`host.guard`), or None:
        no origin headers, an owner the log does not hold, or a log that still held the slot
        when it was due. A refusal is remembered for the request id and answered again, as a
        Wow host answers a decided refusal."""
        earlier = self._state.refused.get(request_id) if request_id else None
        if earlier is not None:
            return f"{earlier} (request {request_id}, decided before)"
        message = {
            name[len(_MESSAGE_HEADER) :]: value
            for name, value in headers.items()
            if name.startswith(_MESSAGE_HEADER)
        }
        origin = SlotOrigin.from_headers(message)
        commits = None if origin is None else self._state.log.get(origin.owner)
        if origin is None or not commits:
            return None
        since = [commits[v] for v in sorted(commits) if v >= origin.version]
        stop = stop_before_due(origin, since)
        if stop is None:
            return None
        refusal = stop.describe(origin)
        if request_id and self.remember_request_ids:
            self._state.refused[request_id] = refusal
        return refusal

    async def _hang(self, rule: _Rule | None, generation: int) -> None:
        """Wait as `hang` says; a stop or a reset ends the wait at once."""
        delay = self.hang_seconds if rule is None or rule.delay is None else rule.delay
        wait = random.uniform(*delay) if isinstance(delay, tuple) else delay
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self._stopping.is_set() or self._generation != generation:
                return
            await asyncio.sleep(min(0.02, max(0.0, deadline - time.monotonic())))


def _delay(delay: Any) -> float | tuple[float, float] | None:
    """A delay in seconds, or a `(low, high)` range to draw from; ValueError otherwise."""

    def seconds(value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0

    if delay is None:
        return None
    if seconds(delay):
        return float(delay)
    if isinstance(delay, list | tuple) and len(delay) == 2 and all(map(seconds, delay)):
        low, high = float(delay[0]), float(delay[1])
        if low <= high:
            return low, high
    raise ValueError(f"delay: seconds, or a (low, high) range, 0 <= low <= high; got {delay!r}")


def _arrivals(host: FakeWowHost, _: Any, query: dict[str, list[str]]) -> Any:
    since = int(query.get("since", ["0"])[0])
    with host._lock:
        epoch, arrivals = host._epoch, list(host._state.arrivals[since:])
    return {"epoch": epoch, "arrivals": [a.to_json() for a in arrivals]}


def _behave(host: FakeWowHost, rule: dict[str, Any], _: Any) -> Any:
    host.behave(**rule)
    return {}


def _unbehave(host: FakeWowHost, match: dict[str, Any], _: Any) -> Any:
    host.unbehave(**match)
    return {}


def _log(host: FakeWowHost, told: Any, _: Any) -> Any:
    commits = told.get("commits") if isinstance(told, dict) else None
    if not isinstance(commits, list):
        raise ValueError('the log: {"commits": [a commit\'s JSON, ...]}')
    host.log([Commit.parse(commit) for commit in commits])
    return {}


def _reset(host: FakeWowHost, _: Any, __: Any) -> Any:
    host.reset()
    return {}


_CONTROL: dict[str, Callable[[FakeWowHost, Any, dict[str, list[str]]], Any]] = {
    "/_arrivals": _arrivals,
    "/_behave": _behave,
    "/_unbehave": _unbehave,
    "/_log": _log,
    "/_reset": _reset,
}


async def _reply(send: Any, status: int, body: bytes, media: str, extra: dict[str, str]) -> None:
    headers = [(b"content-type", media.encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _server(app: FakeWowHost, **options: Any) -> uvicorn.Server:
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", **options)
    return uvicorn.Server(config)


class RemoteWowHost:
    """Drives a `FakeWowHost` serving in another process: its arrivals (fetched as they come),
    and its script."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._http = httpx.AsyncClient(base_url=url, timeout=30)
        self._arrivals: list[Arrival] = []
        self._epoch: int | None = None
        self._fetching = asyncio.Lock()

    async def arrivals(self) -> list[Arrival]:
        """Every arrival so far, in order: only the new ones cross the wire, unless the host
        started over (reset, cleared or restarted), when all are fetched again."""
        async with self._fetching:
            since = len(self._arrivals)
            answer = (await self._http.get("/_arrivals", params={"since": since})).json()
            if answer["epoch"] != self._epoch:
                self._epoch, self._arrivals = answer["epoch"], []
                if since:
                    answer = (await self._http.get("/_arrivals", params={"since": 0})).json()
                    self._epoch = answer["epoch"]
            self._arrivals += [Arrival.from_json(a) for a in answer["arrivals"]]
            return list(self._arrivals)

    async def delivered(self) -> list[Arrival]:
        """`FakeWowHost.delivered`, over there."""
        return [a for a in await self.arrivals() if a.decided]

    async def behave(self, behaviour: str, **rule: Any) -> None:
        """`FakeWowHost.behave`, over there."""
        (
            await self._http.post("/_behave", json={"behaviour": behaviour, **rule})
        ).raise_for_status()

    async def unbehave(self, **match: Any) -> None:
        """`FakeWowHost.unbehave`, over there."""
        (await self._http.post("/_unbehave", json=match)).raise_for_status()

    async def log(self, commits: Iterable[Commit | Mapping[str, Any]]) -> None:
        """`FakeWowHost.log`, over there: commits as models or as their JSON."""
        wire = [c.model_dump(mode="json") if isinstance(c, Commit) else dict(c) for c in commits]
        (await self._http.post("/_log", json={"commits": wire})).raise_for_status()

    async def reset(self) -> None:
        """`FakeWowHost.reset`, over there (and forget what was fetched)."""
        (await self._http.post("/_reset")).raise_for_status()

    async def ready(self) -> bool:
        """True once it answers."""
        try:
            return (await self._http.get("/_arrivals", params={"since": 1 << 62})).is_success
        except httpx.HTTPError:
            return False

    async def aclose(self) -> None:
        await self._http.aclose()


def main(argv: list[str] | None = None) -> None:
    """`python -m wow_temporal.testing.wow_host --port P`: serve a fake host until stopped."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--forget-request-ids", action="store_true")
    args = parser.parse_args(argv)
    host = FakeWowHost(remember_request_ids=not args.forget_request_ids)
    _server(host, host="127.0.0.1", port=args.port).run()


if __name__ == "__main__":
    main()
