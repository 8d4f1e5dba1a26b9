"""The HTTP control API against the real dev server, a real timer worker and the fake Wow host.

The API is called in process through httpx's ASGI transport (real HTTP semantics, no socket);
`serve` is checked once over a real socket. Aggregate ids are unique per test: the dev server
is shared by the session. Listing (visibility) is eventually consistent, so listings are polled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

import httpx
import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RetryConfig

from tests.helpers.builders import fast_delivery
from tests.helpers.docs_page import assert_docs_served_offline
from tests.helpers.eventually import eventually
from wow_temporal import App, Command, JobScope, SagaContext, ScheduleTick, on_schedule
from wow_temporal.api import create_app, serve
from wow_temporal.delivery import CommandSender
from wow_temporal.jobs.client import JobClient
from wow_temporal.model import ScheduleRule
from wow_temporal.settings import Settings
from wow_temporal.testing.wow_host import FakeWowHost
from wow_temporal.timers.client import TimerClient
from wow_temporal.worker import job_worker, timer_worker

pytestmark = pytest.mark.asyncio(loop_scope="session")

OPERATOR = "operator-secret"
TENANT_TOKENS = {"t1-secret": "t1", "t2-secret": "t2"}
T = TypeVar("T")


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def schedule_set(key: str, rule: dict[str, Any], target: dict[str, str] | None = None) -> Any:
    return {
        "key": key,
        "rule": rule,
        "command": {"type": "eshop.order.CancelOrder", "body": {"reason": "PAYMENT_TIMEOUT"}},
        "target": target,
    }


def make_commit(
    aggregate_id: str,
    *events: tuple[str, dict[str, Any]],
    version: int = 1,
    tenant: str = "t1",
) -> dict[str, Any]:
    """A commit shaped as DESIGN.md shows it (Wow's DomainEventStream JSON)."""
    return {
        "id": f"commit-{uuid.uuid4().hex[:10]}",
        "contextName": "eshop-order",
        "aggregateName": "order",
        "tenantId": tenant,
        "aggregateId": aggregate_id,
        "ownerId": "",
        "spaceId": "",
        "version": version,
        "createTime": int(time.time() * 1000),
        "requestId": "r-9",
        "commandId": "c-9",
        "header": {"trace_id": "trace-api"},
        "body": [
            {"id": f"e-{index + 1}", "name": name, "body": body}
            for index, (name, body) in enumerate(events)
        ],
    }


def timer_id(aggregate_id: str, key: str, tenant: str = "t1") -> str:
    return f"wow-timer:eshop-order.order:{tenant}:{aggregate_id}:{key}"


async def polled(
    fetch: Callable[[], Awaitable[T]], check: Callable[[T], bool], within: float = 5.0
) -> T:
    """Poll `fetch` until `check` holds (visibility lags)."""
    value: T = await eventually(fetch, within=within, what="polled", interval=0.2, holds=check)
    return value


@dataclass
class Api:
    """The app over a fresh task queue with its worker running, and an HTTP client on it."""

    http: httpx.AsyncClient
    timers: TimerClient
    host: FakeWowHost
    aggregate_id: str = field(default_factory=lambda: f"order-{uuid.uuid4().hex[:10]}")

    async def listing(
        self, token: str = OPERATOR, expect: int = 1, **params: str
    ) -> list[dict[str, Any]]:
        """`GET /timers` with these filters, polled until it holds `expect` timers."""

        async def fetch() -> list[dict[str, Any]]:
            response = await self.http.get("/timers", params=params, headers=auth(token))
            assert response.status_code == 200, response.text
            page = response.json()
            assert page["truncated"] is False, page
            found: list[dict[str, Any]] = page["items"]
            return found

        return await polled(fetch, lambda found: len(found) == expect)

    async def show(self, workflow_id: str, token: str = OPERATOR) -> httpx.Response:
        return await self.http.get(f"/timers/{workflow_id}", headers=auth(token))


def client_for(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")


@pytest_asyncio.fixture(loop_scope="session")
async def api(dev_client: Client, wow_host: FakeWowHost) -> AsyncIterator[Api]:
    task_queue = f"api-{uuid.uuid4().hex[:8]}"
    timers = TimerClient(
        dev_client,
        task_queue=task_queue,
        delivery=fast_delivery(2),
    )
    app = create_app(timers, token=OPERATOR, tenant_tokens=TENANT_TOKENS)
    async with CommandSender(wow_host.url) as sender:
        worker = timer_worker(dev_client, sender, task_queue=task_queue)
        async with worker, client_for(app) as http:
            yield Api(http, timers, wow_host)


# --- auth and docs --------------------------------------------------------------------------


async def test_tokens_are_required_except_for_health_and_docs(api: Api) -> None:
    missing = await api.http.get("/timers")
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["error"] == "Unauthorized"
    assert "Bearer" in missing.json()["message"]

    for header in ("Bearer nope", "Basic b3A6c2VjcmV0", "Bearer ", OPERATOR):
        wrong = await api.http.post("/commits", content=b"{", headers={"Authorization": header})
        assert wrong.status_code == 401, header
        assert wrong.json()["error"] == "Unauthorized"
        assert wrong.headers["www-authenticate"].startswith("Bearer")

    job = await api.http.post("/ctx/schedule/nightly/wow.schedule.enable")
    assert job.status_code == 401

    assert (await api.http.get("/health")).json() == {"status": "ok"}
    assert (await api.http.get("/docs")).status_code == 200
    assert (await api.http.get("/timers", headers=auth(OPERATOR))).status_code == 200


async def test_openapi_lists_the_routes_and_the_bearer_scheme(api: Api) -> None:
    response = await api.http.get("/openapi.json")
    assert response.status_code == 200
    spec = response.json()
    assert spec["info"]["title"] == "wow-temporal control API"
    assert spec["info"]["description"]
    paths = spec["paths"]
    for path, method in [
        ("/commits", "post"),
        ("/timers", "get"),
        ("/timers/{workflowId}", "get"),
        ("/timers/{workflowId}/retry", "post"),
        ("/timers/{workflowId}/cancel", "post"),
        ("/{context}/schedule/{id}/wow.schedule.enable", "post"),
        ("/{context}/schedule/{id}/wow.schedule.reschedule", "post"),
        ("/{context}/schedule/{id}/wow.schedule.disable", "post"),
        ("/{context}/schedule/{id}/wow.schedule.reset", "post"),
        ("/{context}/tenant/{tenantId}/schedule/{id}/wow.schedule.reset", "post"),
        ("/health", "get"),
    ]:
        assert method in paths[path], path
    schemes = spec["components"]["securitySchemes"]
    (name,) = schemes
    assert schemes[name]["type"] == "http"
    assert schemes[name]["scheme"] == "bearer"
    assert paths["/timers"]["get"]["security"] == [{name: []}]
    assert "security" not in paths["/health"]["get"]

    reschedule = paths["/{context}/schedule/{id}/wow.schedule.reschedule"]["post"]
    body = reschedule["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/RescheduleRequest"}
    assert set(spec["components"]["schemas"]["RescheduleRequest"]["properties"]) == {
        "expression",
        "zone",
        "misfire",
    }
    commits = paths["/commits"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert commits == {"$ref": "#/components/schemas/Commits"}
    assert "Commit" in spec["components"]["schemas"]
    assert "422" not in paths["/timers"]["get"]["responses"]
    assert "400" in paths["/timers"]["get"]["responses"]


async def test_docs_need_no_internet_every_asset_is_served_by_the_app(api: Api) -> None:
    await assert_docs_served_offline(api.http)
    # Public only for the docs' own files; ReDoc (from a CDN) is gone.
    assert (await api.http.get("/docs/assets/%2E%2E/%2E%2E/timers")).status_code == 404
    assert (await api.http.get("/docs/assetsx")).status_code == 401
    assert (await api.http.get("/redoc", headers=auth(OPERATOR))).status_code == 404


async def test_no_token_means_auth_off_with_a_warning(
    dev_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="wow_temporal.api"):
        app = create_app(TimerClient(dev_client), token=None)
    assert any("authentication is OFF" in record.message for record in caplog.records)
    async with client_for(app) as http:
        response = await http.get("/timers", params={"aggregateId": uuid.uuid4().hex})
    assert response.status_code == 200
    assert response.json() == {"items": [], "truncated": False, "limit": 100}
    with pytest.raises(ValueError, match="empty"):
        create_app(TimerClient(dev_client), token="")


# --- the commit JSON in OpenAPI --------------------------------------------------------------

HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
ANNOTATIONS = {"title", "description", "examples", "default", "format"}


def refs_in(node: Any) -> list[str]:
    """Every `$ref` in a JSON document."""
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in refs_in(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in refs_in(value)]
    return []


def resolve(doc: dict[str, Any], ref: str) -> Any:
    """The target of a local `$ref` (a JSON pointer); KeyError when it points nowhere."""
    assert ref.startswith("#/"), ref
    node: Any = doc
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def check_openapi_31(doc: dict[str, Any]) -> None:
    """The structure OpenAPI 3.1 requires of what this document uses, and every `$ref` resolves."""
    assert re.fullmatch(r"3\.1\.\d+", doc["openapi"]), doc["openapi"]
    assert doc["info"]["title"]
    assert doc["info"]["version"]
    schemas = doc["components"]["schemas"]
    for name in schemas:
        assert re.fullmatch(r"[A-Za-z0-9._-]+", name), name
    schemes = doc["components"]["securitySchemes"]
    for path, item in doc["paths"].items():
        assert path.startswith("/"), path
        templated = set(re.findall(r"{([^}]+)}", path))
        for method, operation in item.items():
            assert method in HTTP_METHODS, (path, method)
            assert operation["responses"], (path, method)
            for code, response in operation["responses"].items():
                assert re.fullmatch(r"[1-5]\d\d|default", code), (path, method, code)
                assert response["description"], (path, method, code)
            declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
            assert declared == templated, (path, method)
            for requirement in operation.get("security", []):
                assert set(requirement) <= set(schemes), (path, method)
    found = refs_in(doc)
    assert found
    for ref in found:
        assert ref.startswith("#/components/"), ref
        assert isinstance(resolve(doc, ref), dict), ref
    assert "$defs" not in json.dumps(doc)


def matches(schema: Any, value: Any, doc: dict[str, Any]) -> bool:
    """Whether `value` is valid against this JSON Schema 2020-12 subset (the keywords the
    document uses); any other keyword fails the test, so nothing is passed over unread."""
    if schema is True:
        return True
    if schema is False:
        return False
    unknown = set(schema) - ANNOTATIONS - {
        "$ref", "type", "properties", "required", "additionalProperties", "items", "anyOf",
        "oneOf", "not", "const", "enum", "pattern", "minLength", "maxLength", "minimum",
        "maximum",
    }  # fmt: skip
    assert not unknown, f"keywords the test cannot check: {unknown}"
    checks: list[bool] = []
    if "$ref" in schema:
        checks.append(matches(resolve(doc, schema["$ref"]), value, doc))
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        checks.append(any(json_type(value, kind) for kind in kinds))
    if "const" in schema:
        checks.append(value == schema["const"])
    if "enum" in schema:
        checks.append(value in schema["enum"])
    if "anyOf" in schema:
        checks.append(any(matches(s, value, doc) for s in schema["anyOf"]))
    if "oneOf" in schema:
        checks.append(sum(matches(s, value, doc) for s in schema["oneOf"]) == 1)
    if "not" in schema:
        checks.append(not matches(schema["not"], value, doc))
    if isinstance(value, str):
        if "pattern" in schema:
            checks.append(re.search(schema["pattern"], value) is not None)
        checks.append(len(value) >= schema.get("minLength", 0))
        checks.append(len(value) <= schema.get("maxLength", len(value)))
    if isinstance(value, int | float) and not isinstance(value, bool):
        checks.append(value >= schema.get("minimum", value))
        checks.append(value <= schema.get("maximum", value))
    if isinstance(value, list) and "items" in schema:
        checks.append(all(matches(schema["items"], item, doc) for item in value))
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        checks.append(all(name in value for name in schema.get("required", [])))
        for name, item in value.items():
            if name in properties:
                checks.append(matches(properties[name], item, doc))
            else:
                checks.append(matches(schema.get("additionalProperties", True), item, doc))
    return all(checks)


def json_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    python = {"string": str, "object": dict, "array": list, "boolean": bool, "null": type(None)}
    return isinstance(value, python[kind])


async def openapi_of(api: Api) -> dict[str, Any]:
    response = await api.http.get("/openapi.json")
    assert response.status_code == 200
    doc: dict[str, Any] = response.json()
    return doc


async def test_openapi_is_structurally_openapi_3_1(api: Api) -> None:
    doc = await openapi_of(api)
    check_openapi_31(doc)
    commits = doc["paths"]["/commits"]["post"]["requestBody"]["content"]["application/json"]
    assert resolve(doc, commits["schema"]["$ref"])["anyOf"]


async def test_openapi_links_lead_from_what_names_a_timer_or_job_to_what_acts_on_it(
    api: Api,
) -> None:
    doc = await openapi_of(api)
    linked = set()
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            for name, link in operation["responses"]["200"].get("links", {}).items():
                linked.add((f"{method.upper()} {path}", name))
                pointer, verb = link["operationRef"].removeprefix("#/paths/").rsplit("/", 1)
                target = doc["paths"][pointer.replace("~1", "/").replace("~0", "~")][verb]
                declared = {p["name"] for p in target.get("parameters", []) if p["in"] == "path"}
                assert set(link["parameters"]) == declared, (path, name)
                for expression in link["parameters"].values():
                    assert expression.startswith("$response.body#"), expression
    assert ("POST /commits", "CancelTimer") in linked
    assert ("GET /timers", "ShowTimer") in linked
    assert ("GET /schedules", "RescheduleJob") in linked
    assert ("POST /{context}/schedule/{id}/wow.schedule.enable", "DisableJob") in linked


async def test_openapi_reschedule_needs_one_field_and_commit_names_no_control_character(
    api: Api,
) -> None:
    schemas = (await openapi_of(api))["components"]["schemas"]
    reschedule = schemas["RescheduleRequest"]
    assert [form["required"] for form in reschedule["anyOf"]] == [
        ["expression"],
        ["zone"],
        ["misfire"],
    ]
    commit = schemas["Commit"]["properties"]
    for name in ("contextName", "aggregateName", "tenantId", "aggregateId"):
        assert commit[name]["pattern"] == r"^[^\x00-\x1f\x7f]*$", name


async def test_openapi_rule_is_one_of_three_forms(api: Api) -> None:
    doc = await openapi_of(api)
    schemas = doc["components"]["schemas"]
    rule = schemas["ScheduleRule"]
    forms = {form["title"]: form for form in rule["oneOf"]}
    assert list(forms) == ["at", "after", "cron"]
    assert rule["description"]
    for name, form in forms.items():
        assert form["required"] == [name]
        assert form["additionalProperties"] is False
        assert form["description"]
        assert form["properties"][name]["description"]
        for example in form["examples"]:
            assert matches(rule, example, doc), example
            assert ScheduleRule.model_validate(example).kind == name
    assert set(forms["at"]["properties"]) == {"at"}
    assert forms["at"]["properties"]["at"]["format"] == "date-time"
    assert set(forms["after"]["properties"]) == {"after"}
    # Not RFC 3339's `duration` format: it has no fractions of a second, which Java writes.
    assert "format" not in forms["after"]["properties"]["after"]
    assert "PT0.5S" in forms["after"]["properties"]["after"]["examples"]
    assert ScheduleRule.model_validate({"after": "PT0.5S"}).after_delay == timedelta(seconds=0.5)
    assert "PT30M" in forms["after"]["properties"]["after"]["examples"]
    cron = forms["cron"]["properties"]
    assert set(cron) == {"cron", "zone", "misfire"}
    assert "six fields" in cron["cron"]["description"]
    assert cron["zone"]["default"] == "UTC"
    assert (cron["cron"]["format"], cron["zone"]["format"]) == ("spring-cron", "iana-time-zone")
    assert "localtime" in cron["zone"]["description"]
    assert cron["misfire"]["default"] == "COALESCE"
    assert resolve(doc, cron["misfire"]["$ref"])["enum"] == ["COALESCE", "CATCH_UP"]
    # The timers' own answers show a rule the same way (one schema for both directions).
    assert schemas["TimerSpec"]["properties"]["rule"] == {
        "$ref": "#/components/schemas/ScheduleRule"
    }
    assert not [name for name in schemas if name.endswith(("-Input", "-Output"))]


async def test_openapi_each_event_name_has_its_body(api: Api) -> None:
    doc = await openapi_of(api)
    schemas = doc["components"]["schemas"]
    commit = schemas["Commit"]
    assert resolve(doc, commit["properties"]["body"]["items"]["$ref"]) is schemas["CommitEvent"]
    forms = schemas["CommitEvent"]["oneOf"]
    bodies = {
        form["properties"]["name"].get("const", "*"): form["properties"]["body"] for form in forms
    }
    assert list(bodies) == ["wow.ScheduleSet", "wow.ScheduleCancelled", "wow.AggregateDeleted", "*"]

    schedule_set = resolve(doc, bodies["wow.ScheduleSet"]["$ref"])
    assert set(schedule_set["properties"]) == {"key", "rule", "command", "target"}
    assert schedule_set["required"] == ["key", "rule", "command"]
    assert schedule_set["properties"]["rule"] == {"$ref": "#/components/schemas/ScheduleRule"}
    assert "null" in schedule_set["properties"]["target"]["description"]
    command = resolve(doc, schedule_set["properties"]["command"]["$ref"])
    assert set(command["properties"]) == {"type", "body", "revision"}
    assert command["required"] == ["type"]
    assert "upcasts" in command["properties"]["revision"]["description"]
    assert "256 KiB" in command["properties"]["body"]["description"]
    cancelled = resolve(doc, bodies["wow.ScheduleCancelled"]["$ref"])
    assert set(cancelled["properties"]) == {"key"}
    for key in (schedule_set["properties"]["key"], cancelled["properties"]["key"]):
        assert key["pattern"] == "^[A-Za-z0-9_-]{1,64}$"
    assert resolve(doc, bodies["wow.AggregateDeleted"]["$ref"])["properties"] == {}
    domain = bodies["*"]
    assert domain["type"] == "object"
    assert domain["additionalProperties"] is True
    assert "properties" not in domain
    assert matches(commit, commit["examples"][0], doc)
    assert list(commit["examples"][0])[:2] == ["id", "contextName"]  # as written, not sorted


async def test_commits_are_accepted_and_refused_as_the_schema_says(api: Api) -> None:
    doc = await openapi_of(api)
    commits_schema = doc["components"]["schemas"]["Commits"]
    later = {"at": "2099-01-01T00:00:00+01:00"}
    cron = {"cron": "0 0 0 1 1 *", "zone": "Europe/Amsterdam", "misfire": "CATCH_UP"}
    target = {
        "contextName": "eshop-customer",
        "aggregateName": "customer",
        "tenantId": "t1",
        "aggregateId": "c-1",
    }
    valid: dict[str, Any] = {
        "every event kind": make_commit(
            api.aggregate_id,
            ("eshop.order.OrderCreated", {"items": [{"sku": "a"}]}),
            ("wow.ScheduleSet", schedule_set("grace", {"after": "PT1H"})),
            ("wow.ScheduleSet", schedule_set("nightly", cron, target)),
            ("wow.ScheduleSet", schedule_set("once", later)),
            ("wow.ScheduleCancelled", {"key": "reminder"}),
        ),
        "deleted": make_commit(api.aggregate_id, ("wow.AggregateDeleted", {}), version=2),
        "the schema's example": {
            **doc["components"]["schemas"]["Commit"]["examples"][0],
            "aggregateId": api.aggregate_id,
            "tenantId": "t1",
        },
        "a list": [make_commit(api.aggregate_id, ("eshop.order.OrderPaid", {}), version=3)],
    }
    good_set = schedule_set("k", {"after": "PT1H"})
    invalid: dict[str, Any] = {
        "two rule kinds": ("wow.ScheduleSet", schedule_set("k", {"after": "PT1H", **later})),
        "no rule kind": ("wow.ScheduleSet", schedule_set("k", {"zone": "UTC"})),
        "an unknown rule field": ("wow.ScheduleSet", schedule_set("k", {"every": "PT1H"})),
        "a rule that is a string": ("wow.ScheduleSet", {**good_set, "rule": "PT1H"}),
        "a bad key": ("wow.ScheduleSet", schedule_set("a key!", {"after": "PT1H"})),
        "a key too long": ("wow.ScheduleCancelled", {"key": "k" * 65}),
        "no command": ("wow.ScheduleSet", {"key": "k", "rule": {"after": "PT1H"}}),
        "a command body that is a list": (
            "wow.ScheduleSet",
            {**good_set, "command": {"type": "a.B", "body": [1]}},
        ),
        "an unknown field in a set": ("wow.ScheduleSet", {**good_set, "when": "soon"}),
        "a set without a body": ("wow.ScheduleSet", None),
        "an unknown system event": ("wow.ScheduleMoved", {}),
        "a target without an id": (
            "wow.ScheduleSet",
            {**good_set, "target": {k: v for k, v in target.items() if k != "aggregateId"}},
        ),
    }
    # What JSON Schema cannot say; the descriptions say it, and the API refuses it.
    beyond_schema: dict[str, Any] = {
        "a cron that does not parse": (
            "wow.ScheduleSet",
            schedule_set("k", {"cron": "0 0 25 * * *"}),
        ),
        "a machine's zone": (
            "wow.ScheduleSet",
            schedule_set("k", {"cron": "0 0 6 * * *", "zone": "localtime"}),
        ),
        "a delay of zero": ("wow.ScheduleSet", schedule_set("k", {"after": "PT0S"})),
        "an instant without an offset": (
            "wow.ScheduleSet",
            schedule_set("k", {"at": "2099-01-01T00:00:00"}),
        ),
    }

    async def post(body: Any) -> int:
        response = await api.http.post("/commits", json=body, headers=auth(OPERATOR))
        assert response.status_code in (200, 400), response.text
        return response.status_code

    for case, body in valid.items():
        assert matches(commits_schema, body, doc), case
        assert await post(body) == 200, case
    for case, (name, event_body) in {**invalid, **beyond_schema}.items():
        event: dict[str, Any] = {"id": "e-1", "name": name}
        if event_body is not None:
            event["body"] = event_body
        body = {**make_commit(api.aggregate_id), "body": [event]}
        assert matches(commits_schema, body, doc) is (case in beyond_schema), case
        assert await post(body) == 400, case
    unversioned = {k: v for k, v in make_commit(api.aggregate_id).items() if k != "version"}
    assert not matches(commits_schema, unversioned, doc)
    assert await post(unversioned) == 400


# --- timers ----------------------------------------------------------------------------------


async def test_commit_delivers_its_command_and_the_timer_is_listed_and_shown(api: Api) -> None:
    commit = make_commit(
        api.aggregate_id,
        ("eshop.order.OrderCreated", {"items": 2}),
        ("wow.ScheduleSet", schedule_set("payment-grace-period", {"after": "PT0.5S"})),
    )
    response = await api.http.post("/commits", json=commit, headers=auth(OPERATOR))
    assert response.status_code == 200, response.text
    workflow_id = timer_id(api.aggregate_id, "payment-grace-period")
    (applied,) = response.json()
    assert applied == {
        "workflowId": workflow_id,
        "kind": "set",
        "outcome": "started",
        "reason": applied["reason"],
    }
    assert applied["reason"].startswith("due 20")

    (delivered,) = await api.host.wait_for(
        lambda h: [r for r in h.delivered() if r.aggregate_id == api.aggregate_id], timeout=15
    )
    assert delivered.request_id == f"{commit['id']}:e-2#1"
    assert delivered.command_type == "eshop.order.CancelOrder"
    assert delivered.body == {"reason": "PAYMENT_TIMEOUT"}

    listed = await api.listing(aggregateId=api.aggregate_id, status="delivered")
    assert [timer["workflowId"] for timer in listed] == [workflow_id]
    assert listed[0]["aggregate"] == "eshop-order.order"
    assert listed[0]["tenant"] == "t1"
    assert listed[0]["running"] is False
    assert await api.listing(expect=0, aggregateId=api.aggregate_id, status="Scheduled") == []

    shown = await api.show(workflow_id)
    assert shown.status_code == 200, shown.text
    info = shown.json()
    assert info["status"] == "Delivered"
    assert info["key"] == "payment-grace-period"
    assert info["state"]["delivered"] == 1
    assert info["state"]["spec"]["upstream_id"] == commit["id"]

    # The same commit again changes nothing.
    again = await api.http.post("/commits", json=[commit], headers=auth(OPERATOR))
    assert again.status_code == 200
    assert again.json()[0]["outcome"] == "ignored"


async def test_parked_timer_is_retried_with_the_same_request_id(api: Api) -> None:
    api.host.behave("fail")
    commit = make_commit(
        api.aggregate_id, ("wow.ScheduleSet", schedule_set("grace", {"after": "PT0.1S"}))
    )
    response = await api.http.post("/commits", json=commit, headers=auth(OPERATOR))
    assert response.status_code == 200, response.text
    workflow_id = timer_id(api.aggregate_id, "grace")

    async def status() -> str:
        shown = await api.show(workflow_id)
        assert shown.status_code == 200, shown.text
        value: str = shown.json()["status"]
        return value

    assert await polled(status, lambda s: s == "Parked", within=10) == "Parked"
    failed = [r for r in api.host.requests if r.aggregate_id == api.aggregate_id]
    assert len(failed) == 2  # max_attempts
    assert {r.behaviour for r in failed} == {"fail"}
    parked = await api.listing(aggregateId=api.aggregate_id, status="Parked")
    assert [timer["workflowId"] for timer in parked] == [workflow_id]
    assert "500" in (await api.show(workflow_id)).json()["state"]["parked_error"]

    api.host.behave("ok")
    retried = await api.http.post(f"/timers/{workflow_id}/retry", headers=auth(OPERATOR))
    assert retried.status_code == 200, retried.text
    assert retried.json()["status"] in ("Scheduled", "Delivering", "Delivered")
    (delivered,) = await api.host.wait_for(
        lambda h: [r for r in h.delivered() if r.aggregate_id == api.aggregate_id], timeout=15
    )
    assert delivered.request_id == failed[0].request_id == f"{commit['id']}:e-1#1"

    # Not parked any more: nothing to retry.
    assert await polled(status, lambda s: s == "Delivered") == "Delivered"
    again = await api.http.post(f"/timers/{workflow_id}/retry", headers=auth(OPERATOR))
    assert again.status_code == 409
    assert again.json()["error"] == "Conflict"


async def test_cancel_a_pending_timer(api: Api) -> None:
    commit = make_commit(
        api.aggregate_id, ("wow.ScheduleSet", schedule_set("reminder", {"after": "PT1H"}))
    )
    response = await api.http.post("/commits", json=[commit], headers=auth(OPERATOR))
    assert response.status_code == 200, response.text
    workflow_id = timer_id(api.aggregate_id, "reminder")
    pending = await api.listing(aggregateId=api.aggregate_id, status="Scheduled", running="true")
    assert [timer["workflowId"] for timer in pending] == [workflow_id]
    assert pending[0]["due"] is not None

    not_parked = await api.http.post(f"/timers/{workflow_id}/retry", headers=auth(OPERATOR))
    assert not_parked.status_code == 409
    assert "parked" in not_parked.json()["message"]

    cancelled = await api.http.post(f"/timers/{workflow_id}/cancel", headers=auth(OPERATOR))
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "Cancelled"
    shown = (await api.show(workflow_id)).json()
    assert (shown["status"], shown["running"]) == ("Cancelled", False)

    again = await api.http.post(f"/timers/{workflow_id}/cancel", headers=auth(OPERATOR))
    assert again.status_code == 409
    assert "ended" in again.json()["message"]
    assert api.host.requests == []


async def test_a_listing_cut_at_its_limit_says_so(api: Api) -> None:
    """Issue #38: `GET /timers` cut at `limit` silently; its page says `truncated`, and its
    times are written to the millisecond in UTC."""
    for key in ("first", "second"):
        commit = make_commit(
            api.aggregate_id,
            ("wow.ScheduleSet", schedule_set(key, {"after": "PT1H"})),
            version=1 if key == "first" else 2,
        )
        response = await api.http.post("/commits", json=commit, headers=auth(OPERATOR))
        assert response.status_code == 200, response.text
    await api.listing(expect=2, aggregateId=api.aggregate_id)

    async def page(limit: str) -> dict[str, Any]:
        params = {"aggregateId": api.aggregate_id, "limit": limit}
        response = await api.http.get("/timers", params=params, headers=auth(OPERATOR))
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json()
        return found

    cut = await page("1")
    assert (len(cut["items"]), cut["truncated"], cut["limit"]) == (1, True, 1)
    whole = await page("2")
    assert (len(whole["items"]), whole["truncated"], whole["limit"]) == (2, False, 2)
    due = whole["items"][0]["due"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", due), due
    shown = (await api.show(whole["items"][0]["workflowId"])).json()
    assert shown["due"] == shown["state"]["next_due"] == due  # the state's times alike


async def test_an_unknown_status_is_invalid_request_as_any_bad_parameter(api: Api) -> None:
    """Issue #38: the same fault answered `InvalidStatus` here, `BadRequest` or
    `InvalidRequest` elsewhere."""
    for params in ({"status": "Sleeping"}, {"running": "maybe"}):
        response = await api.http.get("/timers", params=params, headers=auth(OPERATOR))
        assert (response.status_code, response.json()["error"]) == (400, "InvalidRequest")


async def test_unknown_and_malformed_timer_ids(api: Api) -> None:
    missing = timer_id(api.aggregate_id, "nothing")
    for response in (
        await api.show(missing),
        await api.http.post(f"/timers/{missing}/retry", headers=auth(OPERATOR)),
        await api.http.post(f"/timers/{missing}/cancel", headers=auth(OPERATOR)),
    ):
        assert response.status_code == 404
        assert response.json()["error"] == "TimerNotFound"
    for response in (
        await api.show("not-a-timer"),
        await api.http.post("/timers/not-a-timer/cancel", headers=auth(OPERATOR)),
    ):
        assert response.status_code == 400
        assert "not a timer id" in response.json()["message"]


async def test_a_tenant_token_reaches_only_its_tenant(api: Api) -> None:
    rule = schedule_set("grace", {"after": "PT1H"})
    own = make_commit(api.aggregate_id, ("wow.ScheduleSet", rule), tenant="t1")
    other = make_commit(api.aggregate_id, ("wow.ScheduleSet", rule), tenant="t2")
    response = await api.http.post("/commits", json=[own, other], headers=auth(OPERATOR))
    assert response.status_code == 200, response.text
    own_id, other_id = (
        timer_id(api.aggregate_id, "grace"),
        timer_id(api.aggregate_id, "grace", "t2"),
    )
    both = await api.listing(expect=2, aggregateId=api.aggregate_id)
    assert {timer["workflowId"] for timer in both} == {own_id, other_id}

    seen = await api.listing("t1-secret", aggregateId=api.aggregate_id)
    assert [timer["workflowId"] for timer in seen] == [own_id]
    foreign_listing = await api.http.get(
        "/timers",
        params={"aggregateId": api.aggregate_id, "tenant": "t2"},
        headers=auth("t1-secret"),
    )
    assert foreign_listing.status_code == 403  # as GET /schedules refuses it
    assert foreign_listing.json()["error"] == "Forbidden"

    assert (await api.show(own_id, "t1-secret")).status_code == 200
    hidden = await api.show(other_id, "t1-secret")
    missing = await api.show(timer_id(api.aggregate_id, "none", "t2"), "t1-secret")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["error"] == missing.json()["error"] == "TimerNotFound"
    for verb in ("retry", "cancel"):
        refused = await api.http.post(f"/timers/{other_id}/{verb}", headers=auth("t1-secret"))
        assert refused.status_code == 404

    foreign = make_commit(api.aggregate_id, ("wow.ScheduleSet", rule), version=2, tenant="t2")
    forbidden = await api.http.post("/commits", json=foreign, headers=auth("t1-secret"))
    assert forbidden.status_code == 403
    assert "t2" in forbidden.json()["message"]
    target = {
        "contextName": "eshop-order",
        "aggregateName": "order",
        "tenantId": "t2",
        "aggregateId": "x",
    }
    crossing = make_commit(
        api.aggregate_id, ("wow.ScheduleSet", schedule_set("cross", rule["rule"], target))
    )
    assert (
        await api.http.post("/commits", json=crossing, headers=auth("t1-secret"))
    ).status_code == 403

    cancelled = await api.http.post(f"/timers/{own_id}/cancel", headers=auth("t1-secret"))
    assert cancelled.status_code == 200
    assert (
        await api.http.post(f"/timers/{other_id}/cancel", headers=auth("t2-secret"))
    ).status_code == 200


# --- bad input -------------------------------------------------------------------------------


async def test_bad_commits_and_filters_are_400_naming_the_problem(api: Api) -> None:
    async def post(content: bytes) -> dict[str, Any]:
        response = await api.http.post("/commits", content=content, headers=auth(OPERATOR))
        assert response.status_code == 400, response.text
        body: dict[str, Any] = response.json()
        assert set(body) == {"error", "message"}
        return body

    good = make_commit(api.aggregate_id, ("wow.ScheduleSet", schedule_set("k", {"after": "PT1H"})))

    def variant(**changes: Any) -> bytes:
        return json.dumps({**good, **changes}).encode()

    assert (await post(b"{not json"))["error"] == "InvalidJson"
    assert (await post(b"[" * 100_000))["error"] == "InvalidJson"
    assert "JSON object" in (await post(b"42"))["message"]
    assert "version" in (await post(variant(version=0)))["message"]
    assert (
        "aggregateId" in (await post(json.dumps({**good, "aggregateId": None}).encode()))["message"]
    )
    unknown = variant(body=[{"id": "e-1", "name": "wow.ScheduleMoved", "body": {}}])
    assert "unknown system event 'wow.ScheduleMoved'" in (await post(unknown))["message"]
    bad_key = variant(
        body=[
            {
                "id": "e-1",
                "name": "wow.ScheduleSet",
                "body": schedule_set("bad key!", {"after": "PT1H"}),
            }
        ]
    )
    message = (await post(bad_key))["message"]
    assert "invalid key 'bad key!'" in message
    assert "e-1" in message
    bad_rule = variant(
        body=[
            {
                "id": "e-1",
                "name": "wow.ScheduleSet",
                "body": schedule_set("k", {"cron": "61 * * * * *"}),
            }
        ]
    )
    assert "Invalid cron expression" in (await post(bad_rule))["message"]
    # Every missing field is named in one answer, not a few per request.
    partial = {key: value for key, value in good.items() if key in ("id", "header", "body")}
    assert (await post(json.dumps(partial).encode()))["message"] == (
        "invalid commit: missing required fields: contextName, aggregateName, tenantId, "
        "aggregateId, version, createTime"
    )
    # Strict: a boolean is not a timestamp, a string not a version.
    for name, value in (("createTime", False), ("createTime", "1764470000000"), ("version", "3")):
        said = (await post(variant(**{name: value})))["message"]
        assert said.startswith(f"invalid commit: {name}: Input should be a valid integer"), said
    for after, said in (
        ("-PT1M", "needs a positive duration such as PT30M, got '-PT1M'"),
        ("30 minutes", "is an ISO-8601 duration of weeks, days, hours, minutes and seconds, "
         "such as PT30M, PT36H, P1DT12H or PT0.5S (no months or years: they have no fixed "
         "length), got '30 minutes'"),
    ):
        rule = schedule_set("k", {"after": after})
        event = {"id": "e-1", "name": "wow.ScheduleSet", "body": rule}
        message = (await post(variant(body=[event])))["message"]
        assert message.endswith(f"rule.after: ScheduleRule.after {said}"), message
    # A bad second commit: nothing of the list is applied.
    listed = await post(json.dumps([good, json.loads(bad_key)]).encode())
    assert listed["message"].startswith("commit [1]:")
    assert (await api.show(timer_id(api.aggregate_id, "k"))).status_code == 404

    for params in (
        {"status": "Sleeping"},
        {"limit": "0"},
        {"limit": "1001"},
        {"running": "maybe"},
        {"limit": "10.0"},  # a number is written in digits: no lax reading of a float
        {"limit": "1e2"},
    ):
        response = await api.http.get("/timers", params=params, headers=auth(OPERATOR))
        assert response.status_code == 400, params
        assert response.json()["message"]
    for path in ("/timers", "/schedules"):
        response = await api.http.get(path, params={"limit": "10.0"}, headers=auth(OPERATOR))
        assert response.json()["message"] == (
            "limit: a whole number in digits, such as 3, got '10.0'"
        )
    partition = await api.http.get(
        "/ctx/schedule/nightly", params={"partition": "1.0"}, headers=auth(OPERATOR)
    )
    assert partition.status_code == 400
    assert partition.json()["message"] == (
        "partition: a whole number in digits, such as 3, got '1.0'"
    )
    assert (
        "Sleeping"
        in (
            await api.http.get("/timers", params={"status": "Sleeping"}, headers=auth(OPERATOR))
        ).json()["message"]
    )


async def test_oversized_bodies_are_413(api: Api) -> None:
    big = b"[" + b" " * 1_048_576 + b"]"
    response = await api.http.post("/commits", content=big, headers=auth(OPERATOR))
    assert response.status_code == 413
    assert response.json()["error"] == "ContentTooLarge"

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(20):
            yield b" " * 100_000

    streamed = await api.http.post("/commits", content=chunks(), headers=auth(OPERATOR))
    assert streamed.status_code == 413
    assert streamed.json()["error"] == "ContentTooLarge"

    small = create_app(api.timers, token=OPERATOR, max_body_bytes=100)
    async with client_for(small) as http:
        rule = {"expression": "0 0 6 * * *", "zone": "Europe/Amsterdam" + " " * 100}
        response = await http.post(
            "/ctx/schedule/nightly/wow.schedule.reschedule", json=rule, headers=auth(OPERATOR)
        )
    assert response.status_code == 413


async def test_commits_that_would_lose_a_command_are_400_and_nothing_is_applied(api: Api) -> None:
    """Two schedule events under one event id, or one commit id for two commits, would share a
    request id: the host would answer the second command as a duplicate (issue #36)."""
    good = make_commit(api.aggregate_id, ("wow.ScheduleSet", schedule_set("a", {"after": "PT1H"})))
    twins = make_commit(
        api.aggregate_id,
        ("wow.ScheduleSet", schedule_set("b", {"after": "PT1H"})),
        ("wow.ScheduleSet", schedule_set("c", {"after": "PT1H"})),
        version=2,
    )
    for event in twins["body"]:
        event["id"] = "e-1"
    reused = {**twins, "id": good["id"], "body": twins["body"][:1]}

    async def post(body: Any) -> str:
        response = await api.http.post("/commits", json=body, headers=auth(OPERATOR))
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "InvalidCommit"
        message: str = response.json()["message"]
        return message

    assert (await post([good, twins])).startswith(
        f"commit [1]: commit {twins['id']!r}: event id 'e-1' is given to 2 schedule events"
    )
    assert (await post([good, reused])).startswith(
        f"commit id {good['id']!r} is given to two different commits in this batch"
    )
    for key in ("a", "b", "c"):
        assert (await api.show(timer_id(api.aggregate_id, key))).status_code == 404, key


async def test_what_fuzzing_found_is_refused_as_400_before_temporal_is_asked(api: Api) -> None:
    """The inputs tests/system/test_fuzz.py found answered 500, 502, 503 or 409, or silently
    ignored."""

    async def refused(response: httpx.Response, error: str, says: str) -> None:
        assert response.status_code == 400, response.text
        assert response.json()["error"] == error, response.text
        assert says in response.json()["message"], response.text

    async def timers(params: list[tuple[str, str]]) -> httpx.Response:
        return await api.http.get("/timers", params=params, headers=auth(OPERATOR))

    # A misspelt filter, or one given twice, would list every timer instead of the one asked.
    await refused(await timers([("aggregate_id", "42")]), "UnknownParameter", "'aggregate_id'")
    twice = [("aggregateId", "1"), ("aggregateId", "2")]
    await refused(await timers(twice), "RepeatedParameter", "'aggregateId'")
    jobs = await api.http.get("/schedules", params={"tenantId": "t1"}, headers=auth(OPERATOR))
    await refused(jobs, "UnknownParameter", "'tenantId'")
    # A NUL makes Temporal's visibility fail (retried as "unavailable" for a long while).
    await refused(await timers([("aggregateId", "a\x00b")]), "InvalidRequest", "aggregateId")
    nul = await api.http.get("/schedules", params={"context": "\x00"}, headers=auth(OPERATOR))
    await refused(nul, "InvalidRequest", "context")

    def commit(**changes: Any) -> str:
        rule = schedule_set("k", {"after": "PT1H"})
        return json.dumps({**make_commit(api.aggregate_id, ("wow.ScheduleSet", rule)), **changes})

    async def post(content: str) -> httpx.Response:
        return await api.http.post("/commits", content=content, headers=auth(OPERATOR))

    # createTime past year 9999 (was 500), ids too long for Temporal (was 502), ids with a
    # control character (were accepted, then no listing could find them).
    await refused(await post(commit(createTime=10**15)), "InvalidCommit", "out of range")
    await refused(await post(commit(aggregateId="x" * 1000)), "InvalidCommit", "bytes")
    await refused(await post(commit(tenantId="t\x00")), "InvalidCommit", "control character")
    # A rule or a time a timer could not read back (issue #29): numbers where the spec shows
    # ISO-8601 text, 1,346 years, a createTime in seconds, lax integers. None starts a timer.
    numeric = json.loads(commit())
    numeric["body"][0]["body"]["rule"] = {"after": 42469833600}
    await refused(await post(json.dumps(numeric)), "InvalidCommit", "ISO-8601 duration")
    numeric["body"][0]["body"]["rule"] = {"at": 1796000000}
    await refused(await post(json.dumps(numeric)), "InvalidCommit", "ISO-8601 instant")
    numeric["body"][0]["body"]["rule"] = {"after": "PT876601H"}
    await refused(await post(json.dumps(numeric)), "InvalidCommit", "at most 100 years")
    await refused(await post(commit(createTime=1796000000)), "InvalidCommit", "in seconds")
    await refused(await post(commit(createTime=999999999999)), "InvalidCommit", "in seconds")
    await refused(await post(commit(id="c" * 257)), "InvalidCommit", "at most 256")
    await refused(await post(commit(version=2**63)), "InvalidCommit", "less than or equal")
    # Text that is no ISO-8601 instant or delay, which a lax parser read as something else:
    # `2026` as 33 minutes past 1970, `30:00` as 30 hours, `P1M` as 30 days.
    for lax_rule in ({"at": "2026"}, {"at": "1796000000"}, {"after": "30:00"},
                     {"after": "1 day"}, {"after": "P1M"}):
        numeric["body"][0]["body"]["rule"] = lax_rule
        await refused(await post(json.dumps(numeric)), "InvalidCommit", "ISO-8601")
    # A command body the data converter could not read back: nested too deep, or NaN.
    numeric["body"][0]["body"]["rule"] = {"after": "PT1H"}
    deep: dict[str, Any] = {}
    for _ in range(300):
        deep = {"a": deep}
    numeric["body"][0]["body"]["command"]["body"] = deep
    await refused(await post(json.dumps(numeric)), "InvalidCommit", "levels deep")
    numeric["body"][0]["body"]["command"]["body"] = {"x": 1}
    await refused(
        await post(json.dumps(numeric).replace('{"x": 1}', '{"x": NaN}')), "InvalidJson", "NaN"
    )
    for lax in ({"createTime": False}, {"createTime": "1796000000000"}, {"version": "3"}):
        await refused(await post(commit(**lax)), "InvalidCommit", "valid integer")
    # A malformed timer id is bad input for retry and cancel too (was 409 Conflict).
    for verb in ("retry", "cancel"):
        malformed = await api.http.post(f"/timers/wow-timer:bad/{verb}", headers=auth(OPERATOR))
        await refused(malformed, "InvalidTimerId", "not a timer id")
    assert (await api.show(timer_id(api.aggregate_id, "k"))).status_code == 404

    spec = (await api.http.get("/openapi.json")).json()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            answers = set(operation["responses"])
            assert "413" in answers, (method, path)  # the guard's body limit
            assert ("401" in answers) == ("security" in operation), (method, path)
            if "security" in operation:
                assert "502" in answers, (method, path)  # Temporal refused the call


# --- jobs ------------------------------------------------------------------------------------


async def test_job_routes_answer_unknown_job_and_validate_their_input(api: Api) -> None:
    for command in ("enable", "disable"):
        response = await api.http.post(
            f"/eshop-inventory/schedule/receive-deliveries/wow.schedule.{command}",
            headers=auth(OPERATOR),
        )
        assert response.status_code == 404
        assert response.json()["error"] == "JobNotFound"
        assert response.json()["message"].startswith(
            "no instance of job receive-deliveries in context eshop-inventory"
        )
    reschedule = "/eshop-inventory/schedule/receive-deliveries/wow.schedule.reschedule"
    rule = {"expression": "0 0 7 * * *", "zone": "Europe/Amsterdam", "misfire": "CATCH_UP"}
    response = await api.http.post(reschedule, json=rule, headers=auth(OPERATOR))
    assert response.status_code == 404
    assert response.json()["error"] == "JobNotFound"

    bad_name = await api.http.post(
        "/eshop-inventory/schedule/bad.name!/wow.schedule.enable", headers=auth(OPERATOR)
    )
    assert bad_name.status_code == 400
    assert "invalid job name 'bad.name!'" in bad_name.json()["message"]

    async def rescheduled(body: Any) -> dict[str, Any]:
        answer = await api.http.post(reschedule, json=body, headers=auth(OPERATOR))
        assert answer.status_code == 400, answer.text
        found: dict[str, Any] = answer.json()
        return found

    bad_cron = await rescheduled({"expression": "0 0 25 * * *"})
    assert bad_cron["message"].startswith('expression: Invalid cron expression "0 0 25 * * *"')
    assert "hour" in bad_cron["message"]
    assert (
        "unknown time zone 'Mars/Olympus'"
        in (await rescheduled({"zone": "Mars/Olympus"}))["message"]
    )
    assert (
        "unknown time zone 'localtime': 'localtime' depends on the machine"
        in (await rescheduled({"zone": "localtime"}))["message"]
    )
    assert "misfire" in (await rescheduled({"misfire": "SOMETIMES"}))["message"]
    assert "cron" in (await rescheduled({"cron": "0 0 7 * * *"}))["message"]
    assert "at least one" in (await rescheduled({}))["message"]
    not_json = await api.http.post(
        reschedule,
        content=b"{",
        headers={**auth(OPERATOR), "Content-Type": "application/json"},
    )
    assert not_json.status_code == 400

    other_tenant = await api.http.post(
        "/eshop-inventory/schedule/receive-deliveries/wow.schedule.enable",
        params={"tenant": "t2"},
        headers=auth("t1-secret"),
    )
    assert other_tenant.status_code == 403


class _ListedJobs:
    """A SYSTEM job and a TENANT job that never come due during a test."""

    @on_schedule(name="sweep", cron="0 0 0 1 1 *", zone="Europe/Amsterdam")
    def sweep(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Any]]:
        return []

    @on_schedule(name="per-tenant", cron="0 30 6 1 1 *", scope=JobScope.TENANT)
    def per_tenant(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Any]]:
        return []


async def test_listed_job_instances_say_what_showing_them_says(
    dev_client: Client, wow_host: FakeWowHost
) -> None:
    """`GET /schedules` names each instance's rule, processor and next due times, as `GET
    /{context}/schedule/{id}` does (visibility alone knows only the status)."""
    context = f"api-listed-{uuid.uuid4().hex[:8]}"
    domain = App(context, sagas=[_ListedJobs()])
    jobs = JobClient(dev_client, domain)
    app = create_app(
        TimerClient(dev_client), token=OPERATOR, tenant_tokens=TENANT_TOKENS, jobs=jobs
    )
    async with (
        CommandSender(wow_host.url) as sender,
        job_worker(dev_client, domain, sender),
        client_for(app) as http,
    ):
        for path, token in (
            (f"/{context}/schedule/sweep/wow.schedule.enable", OPERATOR),
            (f"/{context}/tenant/t1/schedule/per-tenant/wow.schedule.enable", "t1-secret"),
        ):
            enabled = await http.post(path, headers=auth(token))
            assert enabled.status_code == 200, enabled.text

        async def listing(token: str) -> list[dict[str, Any]]:
            answer = await http.get("/schedules", params={"context": context}, headers=auth(token))
            assert answer.status_code == 200, answer.text
            page = answer.json()
            assert (page["truncated"], page["limit"]) == (False, 100)
            found: list[dict[str, Any]] = page["items"]
            return sorted(found, key=lambda info: str(info["name"]))

        listed = await polled(lambda: listing(OPERATOR), lambda found: len(found) == 2)
        shown = [
            (await http.get(path, headers=auth(OPERATOR))).json()
            for path in (
                f"/{context}/tenant/t1/schedule/per-tenant",
                f"/{context}/schedule/sweep",
            )
        ]
        assert listed == shown
        tenants, system = listed
        assert (system["expression"], system["zone"]) == ("0 0 0 1 1 *", "Europe/Amsterdam")
        assert system["processor"] and system["nextDue"]
        assert (tenants["expression"], tenants["zone"]) == ("0 30 6 1 1 *", "UTC")
        assert tenants["tenant"] == "t1" and tenants["nextDue"]
        # A tenant's token lists its own instance, as its own show says it.
        assert await listing("t1-secret") == [tenants]

    # No worker answers now: the listing still answers, within one answer timeout, with what
    # visibility knows, and says so.
    patient = JobClient(dev_client, domain, answer_timeout=timedelta(seconds=1))
    app = create_app(TimerClient(dev_client), token=OPERATOR, jobs=patient)
    try:
        async with client_for(app) as http:
            answer = await http.get(
                "/schedules", params={"context": context}, headers=auth(OPERATOR)
            )
        assert answer.status_code == 200, answer.text
        found = answer.json()["items"]
        assert sorted((info["name"], info["status"], info["expression"]) for info in found) == [
            ("per-tenant", "Enabled", None),
            ("sweep", "Enabled", None),
        ]
        assert {info["note"] for info in found} == {
            "no worker answered the query in time: only the listed status is known"
        }
    finally:
        for info in listed:
            await dev_client.get_workflow_handle(info["workflowId"]).terminate("test over")


# --- availability and serving ----------------------------------------------------------------


async def test_temporal_unreachable_is_503() -> None:
    unreachable = await Client.connect(
        "127.0.0.1:1",
        lazy=True,
        retry_config=RetryConfig(max_retries=0),
        data_converter=pydantic_data_converter,
    )
    app = create_app(TimerClient(unreachable), token=OPERATOR)
    async with client_for(app) as http:
        for response in (
            await http.get("/timers", headers=auth(OPERATOR)),
            await http.get("/timers/wow-timer:a.b:t:1:k", headers=auth(OPERATOR)),
        ):
            assert response.status_code == 503
            assert response.json()["error"] == "TemporalUnavailable"

        ready = await asyncio.wait_for(http.get("/ready"), 60)  # public, like /health; answers
        assert ready.status_code == 503
        body = ready.json()
        assert set(body) == {"error", "message"}
        assert body["error"] == "TemporalUnavailable"
        assert body["message"].startswith("Temporal at 127.0.0.1:1 (namespace default) is ")
        assert "\n" not in body["message"]
        # Liveness does not ask Temporal.
        assert (await http.get("/health")).json() == {"status": "ok"}


async def test_ready_when_temporal_answers(api: Api, dev_client: Client) -> None:
    ready = await api.http.get("/ready")  # no token: public, like /health
    assert ready.status_code == 200, ready.text
    assert ready.json() == {
        "status": "ok",
        "temporal": dev_client.service_client.config.target_host,
        "namespace": dev_client.namespace,
    }
    spec = (await api.http.get("/openapi.json")).json()
    operation = spec["paths"]["/ready"]["get"]
    assert "security" not in operation
    assert operation["responses"]["503"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorBody"
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_serve_runs_uvicorn_until_stopped(dev_client: Client) -> None:
    port = free_port()
    stop = asyncio.Event()
    settings = Settings(api_token=OPERATOR, api_port=port)
    serving = asyncio.create_task(serve(settings, TimerClient(dev_client), stop=stop))
    url = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=url) as http:

        async def health() -> dict[str, Any] | None:
            with contextlib.suppress(httpx.ConnectError):
                return dict((await http.get("/health")).json())
            return None

        assert await eventually(health, within=5, what="serving") == {"status": "ok"}
        assert (await http.get("/timers")).status_code == 401
        listed = await http.get(
            "/timers", params={"aggregateId": uuid.uuid4().hex}, headers=auth(OPERATOR)
        )
        assert listed.status_code == 200
    stop.set()
    await asyncio.wait_for(serving, timeout=10)


async def test_serve_on_a_taken_port_raises(dev_client: Client) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        settings = Settings(api_token=OPERATOR, api_port=taken.getsockname()[1])
        with pytest.raises(OSError, match="could not listen"):
            await asyncio.wait_for(serve(settings, TimerClient(dev_client)), timeout=10)
