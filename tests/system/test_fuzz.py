"""Hostile input, fuzzed: Schemathesis against the OpenAPI documents of the control API (with
the operator's token and with a tenant's) and of the domain host (serving the e-shop), then a
tenant-isolation pass.

Each operation of a document is called with schema-valid and schema-violating input
(Schemathesis' positive and negative modes) and every answer is checked: no 5xx, a status
code, content type and body the document declares, invalid input refused, and a route that
needs a token refusing none or a wrong one. The isolation pass creates a timer and a job
instance of tenant A, then calls every route of the document that can name them with tenant
B's token: each answers 403 or 404, exactly as it answers for ids that do not exist, reveals
nothing of A's, and A's timer and instance are unchanged afterwards.

Deterministic and bounded: a fixed seed, derandomized, no example database, no shrinking, and
`EXAMPLES` examples per operation and mode (`WOW_FUZZ_EXAMPLES` and `WOW_FUZZ_SEED` give a
deeper or another run by hand).
The apps are called in process through Schemathesis' ASGI transport (which runs them on an
event loop of its own) over the session's real dev server; nothing is mocked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import quote

import httpx
import pytest
import pytest_asyncio
import schemathesis
from fastapi import FastAPI
from google.protobuf.duration_pb2 import Duration
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import FailedHealthCheck, Unsatisfiable
from hypothesis.stateful import Bundle, initialize
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.core.result import Ok
from schemathesis.generation.stateful.state_machine import StepInput, StepOutput
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.specs.openapi.schemas import OpenApiSchema
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode

from tests.helpers.eventually import eventually
from tests.helpers.quiescent import first_task_ended
from workers.eshop import apps as eshop_apps
from wow_temporal import App, Command, JobScope, SagaContext, ScheduleTick, on_schedule
from wow_temporal.api import create_app
from wow_temporal.delivery import CommandSender
from wow_temporal.dev.server import EmbeddedTemporal
from wow_temporal.host.runtime import HostRuntime
from wow_temporal.jobs.client import JobClient
from wow_temporal.model import CRON_FORMAT, ZONE_FORMAT, Commit
from wow_temporal.search_attributes import register_search_attributes
from wow_temporal.testing.wow_host import FakeWowHost
from wow_temporal.timers.client import TimerClient
from wow_temporal.timers.fold import Horizon
from wow_temporal.worker import job_worker, timer_worker

OPERATOR = "fuzz-operator-secret"
TENANT_A, TENANT_B = "t1", "t2"
TOKEN_A, TOKEN_B = "fuzz-t1-secret", "fuzz-t2-secret"
TENANT_TOKENS = {TOKEN_A: TENANT_A, TOKEN_B: TENANT_B}

SEED = int(os.environ.get("WOW_FUZZ_SEED", "17"))
EXAMPLES = int(os.environ.get("WOW_FUZZ_EXAMPLES", "8"))
"""Examples per operation and mode: the whole file stays well under 90 s on two loaded cores."""
TENANT_EXAMPLES = max(1, EXAMPLES // 2)
"""Examples per operation and mode with a tenant's token: what differs from the operator's
pass is each route's tenant check, which fewer examples reach as well."""
COMMAND_EXAMPLES = max(1, EXAMPLES // 3)
"""Examples per command type of the domain host (its bodies reach the domain code)."""
ANSWER_TIMEOUT = timedelta(seconds=1)
"""How long an update waits for a worker: the fuzzed apps have none, and must not hang."""

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
    ignored_auth,
]

schemathesis.openapi.format(
    CRON_FORMAT,
    st.sampled_from(
        ["0 0 6 * * *", "*/20 * * * * *", "0 */15 9-17 * * MON-FRI", "@daily", "0 0 0 30 2 *"]
    ),
)
schemathesis.openapi.format(
    ZONE_FORMAT, st.sampled_from(["UTC", "Europe/Amsterdam", "Asia/Kathmandu", "Pacific/Apia"])
)
"""Valid values of the document's own formats: the bare string a format names would be refused
almost always, and a valid commit never generated (invalid ones are the negative mode's)."""

CONFIG = schemathesis.Config.from_dict({"generation": {"with-security-parameters": False}})
"""Schemathesis' settings (none read from a `schemathesis.toml`): the bearer token is the
test's, sent with every request, so it is neither generated nor made invalid by a case (a
case that dropped it would be sent with it, and judged as if it had not been)."""

_SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure is shown as found
    suppress_health_check=list(HealthCheck),  # the apps are called in the test: slow by design
    report_multiple_bugs=True,
)


def fuzz(
    schema: OpenApiSchema,
    *,
    headers: Mapping[str, str] | None = None,
    paths: Sequence[str] | None = None,
    fixed_headers: Mapping[str, str] | None = None,
    modes: Sequence[GenerationMode] = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE),
    examples: int = EXAMPLES,
) -> list[str]:
    """Every operation of `schema` (or those of `paths`) fuzzed in each mode; what failed.

    `headers` are sent with every request (the bearer token); `fixed_headers` are part of the
    generated case instead (generation fills in the rest). An operation with nothing to make
    invalid has no negative cases.
    """
    found: list[str] = []
    call_headers = dict(headers) if headers is not None else None
    for result in schema.get_all_operations():
        if not isinstance(result, Ok):
            found.append(f"an operation of the document cannot be read: {result.err()}")
            continue
        operation = result.ok()
        if paths is not None and operation.path not in paths:
            continue
        for mode in modes:
            strategy = operation.as_strategy(
                generation_mode=mode,
                headers=dict(fixed_headers) if fixed_headers is not None else None,
            )

            # Negative mode gives up early (a failed health check) on an operation with
            # nothing it can make invalid, instead of searching on to `Unsatisfiable`.
            checked = [HealthCheck.filter_too_much] if mode is GenerationMode.NEGATIVE else []
            suppressed = [check for check in HealthCheck if check not in checked]

            @seed(SEED)
            @settings(_SETTINGS, max_examples=examples, suppress_health_check=suppressed)
            @given(case=strategy)
            def run(case: Case[Any]) -> None:
                case.call_and_validate(headers=call_headers, checks=CHECKS)

            where = f"{operation.label} [{mode.value}]"
            try:
                run()
            except (Unsatisfiable, FailedHealthCheck):
                if mode is GenerationMode.POSITIVE:
                    found.append(f"{where}: no valid input could be generated")
            except (Failure, FailureGroup) as failure:
                found.append(f"{where}: {failure}")
            except Exception as error:  # the app raised: a 500 the transport re-raises
                found.append(f"{where}: the app raised {type(error).__name__}: {error}")
    return found


def report(found: list[str]) -> str:
    return f"{len(found)} operation(s) failed:\n\n" + "\n\n".join(found)


# --- the control API, fuzzed ---------------------------------------------------------------


async def _terminate_on(client: Client, query: str) -> None:
    async for execution in client.list_workflows(query):
        with contextlib.suppress(Exception):
            await client.get_workflow_handle(execution.id).terminate("fuzzing over")


@pytest_asyncio.fixture(loop_scope="session")
async def task_queue(dev_client: Client) -> AsyncIterator[str]:
    """A task queue no worker polls, for the timers fuzzing starts; they are terminated after
    (as far as visibility lists them: any it does not yet list sleep on, unpolled)."""
    queue = f"fuzz-{uuid.uuid4().hex[:8]}"
    yield queue
    await _terminate_on(dev_client, f"TaskQueue = '{queue}'")


def control_api(
    client: Client,
    task_queue: str,
    jobs: JobClient | None = None,
    *,
    answer_timeout: timedelta = ANSWER_TIMEOUT,
    start_delay: bool = True,
) -> FastAPI:
    """The control API over the dev server, its timers on `task_queue`."""
    timers = TimerClient(
        client, task_queue=task_queue, answer_timeout=answer_timeout, start_delay=start_delay
    )
    return create_app(
        timers,
        token=OPERATOR,
        tenant_tokens=TENANT_TOKENS,
        jobs=jobs if jobs is not None else JobClient(client, answer_timeout=answer_timeout),
    )


@pytest.mark.parametrize(
    ("token", "examples"),
    [(OPERATOR, EXAMPLES), (TOKEN_A, TENANT_EXAMPLES)],
    ids=["operator", "tenant"],
)
def test_the_control_api_answers_hostile_input_as_its_openapi_says(
    dev_client: Client, task_queue: str, token: str, examples: int
) -> None:
    app = control_api(dev_client, task_queue)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)
    found = fuzz(schema, headers={"Authorization": f"Bearer {token}"}, examples=examples)
    assert not found, report(found)


# --- the domain host, fuzzed -----------------------------------------------------------------


class _NoTimers:
    """The relay's timers: never reached (the followers are not started)."""

    async def apply_many(
        self, commits: Sequence[Commit], *, later: Horizon | None = None, **_: object
    ) -> None:
        raise AssertionError("the relay is not started in this test")


async def _no_timers() -> _NoTimers:
    return _NoTimers()


@pytest_asyncio.fixture(loop_scope="session")
async def eshop_host(tmp_path: Path) -> AsyncIterator[HostRuntime]:
    """The e-shop's domain host over a fresh store, its followers not started."""
    runtime = HostRuntime(eshop_apps(), tmp_path / "domain.db", _no_timers)
    try:
        yield runtime
    finally:
        await runtime.stop()


def test_the_domain_host_answers_hostile_input_as_its_openapi_says(
    eshop_host: HostRuntime,
) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", eshop_host.asgi, config=CONFIG)
    found = fuzz(schema)
    # Each command the host serves, with generated bodies and headers: the domain's own code.
    for app in eshop_host.apps:
        for model in app.models.values():
            for command_type in model.functions:
                routing = {
                    "Command-Type": command_type,
                    "Command-Aggregate-Context": model.named.context_name,
                    "Command-Aggregate-Name": model.named.aggregate_name,
                }
                found += fuzz(
                    schema,
                    paths=["/wow/command/send"],
                    fixed_headers=routing,
                    modes=[GenerationMode.POSITIVE],
                    examples=COMMAND_EXAMPLES,
                )
    assert not found, report(found)


# --- tenant isolation ------------------------------------------------------------------------

NEVER = "0 0 0 1 1 *"
A_RULE = "0 17 3 1 1 *"
"""Tenant A's own rule for its job instance: shown to A, never to B."""


class IsolationJobs:
    """A TENANT job that never comes due during the test."""

    @on_schedule(name="nightly", cron=NEVER, scope=JobScope.TENANT)
    def nightly(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Any]]:
        return []


@dataclass(frozen=True)
class Names:
    """How requests name one tenant's objects: a timer, a job instance, an aggregate."""

    tenant: str
    context: str
    job: str
    aggregate_id: str

    @property
    def timer(self) -> str:
        return f"wow-timer:fuzz-iso.order:{self.tenant}:{self.aggregate_id}:grace"

    def commit(self, event: dict[str, Any], *, version: int) -> dict[str, Any]:
        """A commit of this tenant's aggregate with one event."""
        return {
            "id": f"commit-{self.aggregate_id}-{version}",
            "contextName": "fuzz-iso",
            "aggregateName": "order",
            "tenantId": self.tenant,
            "aggregateId": self.aggregate_id,
            "version": version,
            "createTime": int(time.time() * 1000),
            "body": [{"id": "e-1", **event}],
        }


def schedule_set(reason: str, target: Names | None = None) -> dict[str, Any]:
    """A `wow.ScheduleSet` due in an hour, its command's body carrying `reason`."""
    aimed = None
    if target is not None:
        aimed = {
            "contextName": "fuzz-iso",
            "aggregateName": "order",
            "tenantId": target.tenant,
            "aggregateId": target.aggregate_id,
        }
    command = {"type": "fuzz.iso.Remind", "body": {"reason": reason}}
    body = {"key": "grace", "rule": {"after": "PT1H"}, "command": command, "target": aimed}
    return {"name": "wow.ScheduleSet", "body": body}


@dataclass(frozen=True)
class Probe:
    """One request naming a tenant's objects."""

    method: str
    url: str
    params: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None

    def __str__(self) -> str:
        return f"{self.method} {self.url} {self.params or ''} {self.headers or ''}".strip()


_BODIES = {
    "#/components/schemas/RescheduleRequest": {"expression": "0 0 5 * * *"},
    "#/components/schemas/ResetRequest": {"fields": ["expression"]},
}
"""A valid body for each operation that needs one, by its schema (commits are built apart)."""


def probes(document: dict[str, Any], owner: Names, caller: Names) -> list[tuple[str, Probe]]:
    """For each operation of the document that needs a token, the requests by which `caller`
    could name `owner`'s objects: in the path, by the `tenant` query, by `Command-Tenant-Id`,
    or in a commit's body (of `owner`'s aggregate, or targeting it). Fails on an operation it
    does not know how to aim, so a new route cannot escape the pass."""
    values = {
        "workflowId": quote(owner.timer, safe=":"),
        "context": owner.context,
        "id": owner.job,
        "tenantId": owner.tenant,
    }
    found: list[tuple[str, Probe]] = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if not operation.get("security"):
                continue
            label = f"{method.upper()} {path}"
            parameters = operation.get("parameters", [])
            named = {(p["in"], p["name"]) for p in parameters}
            unknown = {n for where, n in named if where == "path"} - set(values)
            assert not unknown, f"{label}: the isolation pass cannot aim {unknown}"
            url = path.format(**values)
            body: Any = None
            if "requestBody" in operation:
                ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                if ref == "#/components/schemas/Commits":  # A's own commit, or B's aimed at A
                    cancel = {"name": "wow.ScheduleCancelled", "body": {"key": "grace"}}
                    found.append((label, Probe(method, url, body=owner.commit(cancel, version=2))))
                    aimed = caller.commit(schedule_set("from B", target=owner), version=1)
                    found.append((label, Probe(method, url, body=aimed)))
                    continue
                body = _BODIES.get(ref)
                assert body is not None, f"{label}: the isolation pass has no body for {ref}"
            before = len(found)
            if ("path", "tenantId") in named or ("path", "workflowId") in named:
                found.append((label, Probe(method, url, body=body)))
            if ("query", "tenant") in named:
                found.append((label, Probe(method, url, {"tenant": owner.tenant}, body=body)))
            if ("header", "Command-Tenant-Id") in named:
                tenant = {"Command-Tenant-Id": owner.tenant}
                found.append((label, Probe(method, url, headers=tenant, body=body)))
            assert len(found) > before, f"{label}: the isolation pass cannot name a tenant here"
    return found


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def send(http: httpx.AsyncClient, probe: Probe, token: str) -> httpx.Response:
    headers = {**probe.headers, **auth(token)}
    if probe.body is not None:
        headers["Content-Type"] = "application/json"
    return await http.request(
        probe.method,
        probe.url,
        params=probe.params,
        headers=headers,
        content=None if probe.body is None else json.dumps(probe.body),
    )


_OUTSIDE_INPUT = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
}


async def outside_input(client: Client, workflow_id: str) -> int:
    """How many signals, updates, cancel requests and terminations the workflow has had."""
    handle = client.get_workflow_handle(workflow_id)
    return sum([1 async for e in handle.fetch_history_events() if e.event_type in _OUTSIDE_INPUT])


async def until_listed(http: httpx.AsyncClient, path: str, params: dict[str, str]) -> list[Any]:
    """The operator's listing, polled until visibility shows at least one entry."""

    async def listing() -> list[Any]:
        answer = await http.get(path, params=params, headers=auth(OPERATOR))
        assert answer.status_code == 200, answer.text
        found: list[Any] = answer.json()["items"]  # both answer a page
        return found

    found: list[Any] = await eventually(listing, within=15, what=f"{path} lists", interval=0.2)
    return found


@pytest.mark.asyncio(loop_scope="session")
async def test_a_tenants_token_reaches_nothing_of_another_tenant(
    dev_client: Client, task_queue: str, wow_host: FakeWowHost
) -> None:
    context = f"fuzz-iso-{uuid.uuid4().hex[:8]}"
    app = App(context, sagas=[IsolationJobs()])
    jobs = JobClient(dev_client, app)
    api = control_api(dev_client, task_queue, jobs)
    a = Names(TENANT_A, context, "nightly", f"a-{uuid.uuid4().hex[:10]}")
    b = Names(TENANT_B, context, "nightly", f"b-{uuid.uuid4().hex[:10]}")
    ghost = Names(TENANT_A, context, "ghost-job", f"ghost-{uuid.uuid4().hex[:10]}")
    marker = f"secret-of-a-{uuid.uuid4().hex}"
    transport = httpx.ASGITransport(app=api)
    try:
        async with (
            CommandSender(wow_host.url) as sender,
            job_worker(dev_client, app, sender),
            httpx.AsyncClient(transport=transport, base_url="http://api") as http,
        ):
            # Tenant A's objects: a pending timer and its job instance, with A's own rule.
            made = await http.post(
                "/commits", json=a.commit(schedule_set(marker), version=1), headers=auth(TOKEN_A)
            )
            assert made.status_code == 200, made.text
            assert [answer["workflowId"] for answer in made.json()] == [a.timer]
            instance = f"/{context}/tenant/{TENANT_A}/schedule/nightly"
            enabled = await http.post(f"{instance}/wow.schedule.enable", headers=auth(TOKEN_A))
            assert enabled.status_code == 200, enabled.text
            job_id = enabled.json()["workflowId"]
            rule = {"expression": A_RULE}
            ruled = await http.post(
                f"{instance}/wow.schedule.reschedule", json=rule, headers=auth(OPERATOR)
            )
            assert ruled.status_code == 200, ruled.text

            async def snapshot() -> tuple[Any, Any, int, int]:
                timer = await http.get(f"/timers/{a.timer}", headers=auth(OPERATOR))
                job = await http.get(instance, headers=auth(OPERATOR))
                assert timer.status_code == job.status_code == 200, (timer.text, job.text)
                return (
                    timer.json(),
                    job.json(),
                    await outside_input(dev_client, a.timer),
                    await outside_input(dev_client, job_id),
                )

            before = await snapshot()
            assert marker in json.dumps(before[0]) and before[1]["expression"] == A_RULE
            secrets = [marker, A_RULE, before[0]["runId"], before[0]["due"]]

            document = (await http.get("/openapi.json")).json()
            aimed = probes(document, a, b)
            ghosts = probes(document, ghost, b)
            assert len(aimed) == len(ghosts)
            covered = {label for label, _ in aimed}
            secured = {
                f"{method.upper()} {path}"
                for path, operations in document["paths"].items()
                for method, operation in operations.items()
                if operation.get("security")
            }
            assert covered == secured

            # A's own token reads what the probes name: they aim at something real.
            for label, probe in aimed:
                if probe.method == "get" and not probe.params and not probe.headers:
                    own = await send(http, probe, TOKEN_A)
                    assert own.status_code == 200, (label, own.text)

            for (label, probe), (_, twin) in zip(aimed, ghosts, strict=True):
                answer = await send(http, probe, TOKEN_B)
                assert answer.status_code in (403, 404), (label, str(probe), answer.text)
                body = answer.json()
                assert set(body) == {"error", "message"}, (label, body)
                leaked = [secret for secret in secrets if secret in answer.text]
                assert not leaked, (label, str(probe), leaked, answer.text)
                # Answered exactly as for objects that do not exist: not even existence shows.
                unknown = (await send(http, twin, TOKEN_B)).json()
                assert (body["error"], _blind(body["message"], a)) == (
                    unknown["error"],
                    _blind(unknown["message"], ghost),
                ), label

            # Filters by A's ids, without naming A's tenant, list only B's own: nothing.
            shown = await until_listed(http, "/timers", {"aggregateId": a.aggregate_id})
            assert [timer["workflowId"] for timer in shown] == [a.timer]
            listed = await http.get(
                "/timers", params={"aggregateId": a.aggregate_id}, headers=auth(TOKEN_B)
            )
            assert listed.status_code == 200 and listed.json()["items"] == [], listed.text
            assert await until_listed(http, "/schedules", {"context": context})
            listed = await http.get(
                "/schedules", params={"context": context}, headers=auth(TOKEN_B)
            )
            assert listed.status_code == 200 and listed.json()["items"] == [], listed.text

            assert await snapshot() == before, "tenant B's requests changed tenant A's objects"
    finally:
        await _terminate_on(dev_client, f"WorkflowId STARTS_WITH 'wow-job:{context}:'")


def _blind(message: str, names: Names) -> str:
    """`message` with the ids of `names` replaced, to compare answers for different ids."""
    for value in (names.timer, names.job, names.aggregate_id):
        message = message.replace(value, "<id>")
    return message


# --- what the edge accepts, a live worker can read ---------------------------------------------


_EDGE_RULES: list[Any] = [
    {"after": 42469833600},  # seconds for 1,346 years: the wedge that was found
    {"after": 1.5},
    {"after": True},
    {"after": "PT876600H"},  # 100 years: the longest accepted
    {"after": "PT876601H"},
    {"after": "PT11797176H"},
    {"after": "PT0.000001S"},
    {"after": "P36525D"},
    {"after": "-PT1M"},
    {"at": "9999-12-29T23:59:59Z"},
    {"at": "9999-12-31T23:59:59+14:00"},
    {"at": "1970-01-01T00:00:00Z"},
    {"at": "1969-12-31T23:59:59Z"},
    {"at": 1796000000},
    {"cron": "0 0 0 30 2 *"},  # never matches
    {"cron": "*/20 * * * * *", "misfire": "CATCH_UP"},
]
_EDGE_TIMES: list[Any] = [1796000000000, 1796000000, 250246368000000]


def _edge_commits(aggregate: str) -> list[dict[str, Any]]:
    """Commits at the edges of what is accepted: every rule with every createTime."""
    made = []
    for n, (rule, created) in enumerate(
        (rule, created) for rule in _EDGE_RULES for created in _EDGE_TIMES
    ):
        made.append(
            {
                "id": f"edge-{n}",
                "contextName": "fuzz",
                "aggregateName": "edge",
                "tenantId": "t",
                "aggregateId": f"{aggregate}-{n}",
                "version": 1,
                "createTime": created,
                "body": [
                    {
                        "id": "e",
                        "name": "wow.ScheduleSet",
                        "body": {
                            "key": "k",
                            "rule": rule,
                            "command": {"type": "fuzz.Edge", "body": {}},
                        },
                    }
                ],
            }
        )
    return made


@pytest.mark.asyncio(loop_scope="session")
async def test_no_commit_the_api_accepts_wedges_a_timer_a_live_worker_runs(
    dev_client: Client, task_queue: str, wow_host: FakeWowHost
) -> None:
    """Commits at the edges of what `POST /commits` accepts, while a timer worker runs the
    timers they start (issue #29): each is accepted or refused with a declared answer, no
    workflow task of any timer started fails (one that could not read its input failed them
    all, forever), and each is shown and cancelled with a declared answer. Timers start at
    once (no start delay), so even one due in a century runs its first workflow task now."""
    app = control_api(dev_client, task_queue, start_delay=False)
    operator = {"Authorization": f"Bearer {OPERATOR}"}
    declared = {code for code in (await _openapi_codes(app, "/commits", "post")) if code.isdigit()}
    started: list[str] = []
    transport = httpx.ASGITransport(app=app)
    async with (
        CommandSender(wow_host.url) as sender,
        timer_worker(dev_client, sender, task_queue=task_queue),
        httpx.AsyncClient(transport=transport, base_url="http://api") as http,
    ):
        for commit in _edge_commits(uuid.uuid4().hex[:8]):
            answer = await http.post("/commits", json=commit, headers=operator)
            assert str(answer.status_code) in declared, (commit, answer.text)
            assert answer.status_code in (200, 400), (commit, answer.text)
            if answer.status_code == 200:
                started += [a["workflowId"] for a in answer.json() if a["outcome"] == "started"]
        assert len(started) >= 8, started
        for workflow_id in started:
            history = await first_task_ended(dev_client.get_workflow_handle(workflow_id))
            failed = [
                e for e in history if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
            ]
            assert not failed, f"{workflow_id}: {failed[0]}"
            path = f"/timers/{quote(workflow_id, safe='')}"
            shown = await http.get(path, headers=operator)
            assert shown.status_code == 200, shown.text
            cancelled = await http.post(f"{path}/cancel", headers=operator)
            assert cancelled.status_code in (200, 409), cancelled.text


async def _openapi_codes(app: FastAPI, path: str, method: str) -> set[str]:
    """The answers the OpenAPI document declares for one operation."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://api"
    ) as http:
        spec = (await http.get("/openapi.json")).json()
    return set(spec["paths"][path][method]["responses"])


# --- the stateful phase: chains of calls, a live worker behind them ----------------------------

STATEFUL_SCENARIOS = int(os.environ.get("WOW_FUZZ_SCENARIOS", "40"))
STATEFUL_STEPS = 6
STATEFUL_CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
STATEFUL_ROOTS = {"POST /commits", "GET /timers", "GET /schedules"}
"""Where a scenario starts: what makes or lists timers and job instances. (Schemathesis' own
guess reads a commit's `tenantId` and `aggregateId` as ids of resources nothing makes.)"""


STATEFUL_CONFIG = schemathesis.Config.from_dict(
    {
        "generation": {"with-security-parameters": False},
        "phases": {"stateful": {"generation": {"mode": "positive"}}},
    }
)
"""Valid input only: what chains of calls reach is the state behind them; invalid input to
each operation is the stateless passes' work."""


class StatefulJobs:
    """A SYSTEM job for the stateful phase to enable, reschedule, show and disable."""

    @on_schedule(name="sweep", cron=NEVER)
    def sweep(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Any]]:
        return []


@pytest_asyncio.fixture(loop_scope="session")
async def own_namespace(dev_server: EmbeddedTemporal) -> Client:
    """A client on a namespace of its own on the session dev server, with the search
    attributes: the stateful phase follows listings to whatever they show, and must reach no
    other test's timers or job instances."""
    namespace = f"fuzz-{uuid.uuid4().hex[:8]}"
    client = await dev_server.connect()
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=namespace, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )

    async def served() -> Client | None:  # once the server's namespace cache has it
        try:
            await register_search_attributes(client, namespace)
            own = await Client.connect(
                dev_server.address, namespace=namespace, data_converter=pydantic_data_converter
            )
            await own.count_workflows()
        except RPCError:
            return None
        return own

    own: Client = await eventually(served, within=30, what=namespace, interval=0.2)
    return own


def stateful_machine(app: FastAPI, token: str, seen: set[str], steps: Counter[str]) -> type[Any]:
    """Schemathesis' state machine over the control API's OpenAPI links; every workflow id an
    answer names is added to `seen`, and each operation's answers counted in `steps`."""
    from schemathesis.specs.openapi import stateful as openapi_stateful

    schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=STATEFUL_CONFIG)
    guess = openapi_stateful.is_likely_root_transition
    with mock.patch.object(
        openapi_stateful,
        "is_likely_root_transition",
        lambda operation, node, produced: (
            operation.label in STATEFUL_ROOTS or guess(operation, node, produced)
        ),
    ):
        base = schema.as_state_machine()
    headers = {"Authorization": f"Bearer {token}"}
    handing_over = schema["/commits"]["POST"]

    class Machine(base):  # type: ignore[misc, valid-type]
        @initialize(target=Bundle("POST /commits -> 200"), rule=st.sampled_from(_KNOWN_RULES))
        def a_known_commit(self, rule: dict[str, Any]) -> StepOutput:
            """Each scenario starts from one timer a valid commit starts (generated commits
            are mostly refused, or start none), then goes where the links and chance lead."""
            step = StepInput.initial(handing_over.Case(body=_known_commit(rule)))
            self.recorder.record_case(case=step.case)  # as Schemathesis' own rules do
            self.control.record_step(step, self.recorder)
            return self._step(step)

        def before_call(self, case: Case[Any]) -> None:
            super().before_call(case)
            case.body = _as_integers(case.body)

        def get_call_kwargs(self, case: Case[Any]) -> dict[str, Any]:
            return {"headers": headers}

        def after_call(self, response: Any, case: Case[Any]) -> None:
            super().after_call(response, case)
            steps[f"{case.operation.label} {response.status_code}"] += 1
            with contextlib.suppress(ValueError):
                body = json.loads(response.content)
                if isinstance(body, dict) and isinstance(body.get("items"), list):
                    body = body["items"]  # a page of timers
                for item in body if isinstance(body, list) else [body]:
                    if not isinstance(item, dict):
                        continue
                    found = item.get("workflowId", item.get("workflow_id"))
                    if isinstance(found, str):
                        seen.add(found)

        def validate_response(self, response: Any, case: Case[Any], **kwargs: Any) -> None:
            case.validate_response(response, checks=STATEFUL_CHECKS, headers=headers)

    assert {rule.removeprefix("RANDOM__") for rule in Machine.root_rules} >= {
        "POST_commits",
        "GET_timers",
        "GET_schedules",
    }, Machine.root_rules
    return Machine


_KNOWN_RULES: list[dict[str, Any]] = [
    {"after": "PT0.2S"},
    {"after": "PT1H"},
    {"cron": "*/20 * * * * *", "misfire": "CATCH_UP"},
    {"cron": "0 0 6 * * *", "zone": "Europe/Amsterdam"},
    {"at": "2099-01-01T00:00:00Z"},
]


def _known_commit(rule: dict[str, Any]) -> dict[str, Any]:
    """A commit of a new aggregate setting one timer by `rule`."""
    return {
        "id": f"st-{uuid.uuid4().hex[:8]}",
        "contextName": "fuzz-st",
        "aggregateName": "order",
        "tenantId": "t1",
        "aggregateId": uuid.uuid4().hex[:10],
        "version": 1,
        "createTime": int(time.time() * 1000),
        "body": [
            {
                "id": "e",
                "name": "wow.ScheduleSet",
                "body": {
                    "key": "grace",
                    "rule": rule,
                    "command": {"type": "fuzz.st.Remind", "body": {}},
                },
            }
        ],
    }


def _as_integers(value: Any) -> Any:
    """`value` with each whole float written as an integer: Schemathesis writes a JSON Schema
    integer as `61.0` (the same value there), which the API refuses on purpose (issue #29)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_as_integers(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_integers(item) for key, item in value.items()}
    return value


@pytest.mark.timeout(240)
@pytest.mark.asyncio(loop_scope="session")
async def test_chains_of_calls_through_the_openapi_links_answer_as_documented_with_a_live_worker(
    own_namespace: Client, wow_host: FakeWowHost
) -> None:
    """Schemathesis' stateful phase (issue #29): scenarios that hand over commits, then show,
    retry and cancel the timers they name, and list, enable, reschedule and disable job
    instances, following the document's links, against timer and job workers that run what
    they start. No answer is a 5xx or undeclared, and no workflow they started fails a task."""
    client = own_namespace
    context = f"fuzz-st-{uuid.uuid4().hex[:8]}"
    task_queue = f"fuzz-st-{uuid.uuid4().hex[:8]}"
    app = App(context, sagas=[StatefulJobs()])
    answer = timedelta(seconds=15)  # a loaded machine's worker answers late, never wrongly
    jobs = JobClient(client, app, answer_timeout=answer)
    api = control_api(client, task_queue, jobs, answer_timeout=answer)
    seen: set[str] = set()
    steps: Counter[str] = Counter()
    machine = stateful_machine(api, OPERATOR, seen, steps)
    transport = httpx.ASGITransport(app=api)
    async with (
        CommandSender(wow_host.url) as sender,
        timer_worker(client, sender, task_queue=task_queue),
        job_worker(client, app, sender),
        httpx.AsyncClient(transport=transport, base_url="http://api") as http,
    ):
        enabled = await http.post(
            f"/{context}/schedule/sweep/wow.schedule.enable", headers=auth(OPERATOR)
        )
        assert enabled.status_code == 200, enabled.text
        assert await until_listed(http, "/schedules", {"context": context})
        await asyncio.to_thread(
            machine.run,
            settings=settings(
                _SETTINGS,
                max_examples=STATEFUL_SCENARIOS,
                stateful_step_count=STATEFUL_STEPS,
            ),
        )
        print("\nstateful phase:", ", ".join(f"{n} x {step}" for step, n in sorted(steps.items())))
        assert steps["POST /commits 200"] >= STATEFUL_SCENARIOS, steps
        followed = [
            "GET /timers/{workflowId} 200",
            "POST /timers/{workflowId}/cancel 200",
        ]
        assert all(steps[step] for step in followed), steps  # links followed to real objects
        for workflow_id in sorted(seen):
            handle = client.get_workflow_handle(workflow_id)
            try:
                failed = [
                    event
                    async for event in handle.fetch_history_events()
                    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
                ]
            except RPCError as error:  # named by an answer, never started (`ignored`)
                assert error.status == RPCStatusCode.NOT_FOUND, error
                continue
            assert not failed, f"{workflow_id}: {failed[0]}"
        for workflow_id in seen:  # nothing keeps running on the shared server
            with contextlib.suppress(RPCError):
                await client.get_workflow_handle(workflow_id).terminate("fuzzing over")
