"""Recurring jobs end to end: the real job workflow and tick activity on the dev server, a real
worker, the fake Wow host, and the control API (in process, real HTTP semantics).

Each test has a context of its own, so instance ids and task queues never meet on the shared
dev server. Crons tick every second or two, so the tests read real time, with margins.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from temporalio.client import Client

from tests.helpers.builders import fast_delivery
from tests.helpers.eventually import eventually
from tests.helpers.quiescent import quiescent
from tests.helpers.wow_host import wow_host
from wow_temporal import (
    App,
    Command,
    JobScope,
    Misfire,
    NamedAggregate,
    SagaContext,
    ScheduleTick,
    on_schedule,
)
from wow_temporal.api import create_app
from wow_temporal.delivery import CommandSender
from wow_temporal.jobs.client import JobClient, JobError, JobNotFoundError
from wow_temporal.jobs.core import HostRule, JobState, RuleLayer
from wow_temporal.testing.wow_host import Arrival, FakeWowHost
from wow_temporal.timers.client import TimerClient
from wow_temporal.worker import job_worker

pytestmark = pytest.mark.asyncio(loop_scope="session")

__all__ = ["wow_host"]

OPERATOR = "operator-secret"
TENANT_TOKENS = {"t1-secret": "t1", "t2-secret": "t2"}
FAST = fast_delivery(3, heartbeat_timeout=timedelta(seconds=2))


class Count(BaseModel):
    """A command body."""

    n: int


@dataclass
class Jobs:
    """A saga with jobs for every test here; `failing` makes `flaky` raise."""

    context: str
    failing: bool = False
    calls: list[tuple[str, ScheduleTick]] = field(default_factory=list)

    @property
    def counter(self) -> NamedAggregate:
        return NamedAggregate(self.context, "counter")

    @on_schedule(name="every-second", cron="* * * * * *")
    def every_second(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Count]]:
        self.calls.append(("every-second", tick))
        return [
            context.command(self.counter.ref(tick.tenant_id, "a"), Count(n=tick.slot)),
            context.command(self.counter.ref(tick.tenant_id, "b"), Count(n=tick.slot)),
        ]

    @on_schedule(name="catch-up", cron="* * * * * *", misfire=Misfire.CATCH_UP)
    async def catch_up(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Count]]:
        self.calls.append(("catch-up", tick))
        return [context.command(self.counter.ref(tick.tenant_id, "c"), Count(n=tick.slot))]

    @on_schedule(name="per-tenant", cron="* * * * * *", scope=JobScope.TENANT)
    def per_tenant(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Count]]:
        self.calls.append(("per-tenant", tick))
        return [context.command(self.counter.ref(tick.tenant_id, "t"), Count(n=tick.slot))]

    @on_schedule(name="flaky", cron="* * * * * *")
    def flaky(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Count]]:
        self.calls.append(("flaky", tick))
        if self.failing:
            raise RuntimeError("the supplier's feed is down")
        return [context.command(self.counter.ref(tick.tenant_id, "f"), Count(n=tick.slot))]

    @on_schedule(name="sharded", cron="* * * * * *", sharded=True)
    def sharded(self, tick: ScheduleTick, context: SagaContext) -> list[Command[Count]]:
        self.calls.append(("sharded", tick))
        ref = self.counter.ref(tick.tenant_id, f"p{tick.partition}")
        return [context.command(ref, Count(n=tick.slot))]


@dataclass
class Stack:
    saga: Jobs
    app: App
    jobs: JobClient
    http: httpx.AsyncClient
    host: FakeWowHost

    def requests_of(self, job: str) -> list[Arrival]:
        return [r for r in self.host.requests if f":{job}" in r.request_id.split("#")[0]]

    async def state(self, workflow_id: str) -> JobState:
        handle = self.jobs.client.get_workflow_handle(workflow_id)
        return await handle.query("state", result_type=JobState)


@contextlib.asynccontextmanager
async def stack(
    client: Client, host: FakeWowHost, rules: dict[str, HostRule] | None = None
) -> AsyncIterator[Stack]:
    context = f"jobs-{uuid.uuid4().hex[:8]}"
    saga = Jobs(context)
    app = App(context, sagas=[saga])
    jobs = JobClient(client, app, host_rules=rules, delivery=FAST)
    api = create_app(TimerClient(client), token=OPERATOR, tenant_tokens=TENANT_TOKENS, jobs=jobs)
    async with (
        CommandSender(host.url) as sender,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://api") as http,
    ):
        worker = job_worker(client, app, sender, host=rules)
        async with worker:
            try:
                yield Stack(saga, app, jobs, http, host)
            finally:
                await _terminate_all(client, context)


async def _terminate_all(client: Client, context: str) -> None:
    async for execution in client.list_workflows(f"WorkflowId STARTS_WITH 'wow-job:{context}:'"):
        with contextlib.suppress(Exception):
            await client.get_workflow_handle(execution.id).terminate("test over")


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_an_enabled_job_ticks_and_sends_its_commands_with_tick_request_ids(
    dev_client: Client, wow_host: FakeWowHost
) -> None:
    async with stack(dev_client, wow_host) as s:
        answer = await s.http.post(
            f"/{s.app.context}/schedule/every-second/wow.schedule.enable", headers=auth(OPERATOR)
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["status"] == "Enabled"
        assert body["workflowId"] == f"wow-job:{s.app.context}:every-second"
        await s.host.wait_for(lambda h: len(s.requests_of("every-second")) >= 6, timeout=15)
        disabled = await s.http.post(
            f"/{s.app.context}/schedule/every-second/wow.schedule.disable", headers=auth(OPERATOR)
        )
        assert disabled.status_code == 200, disabled.text
        assert disabled.json()["status"] == "Disabled"
        seen = len(s.requests_of("every-second"))
        handle = s.jobs.client.get_workflow_handle(f"wow-job:{s.app.context}:every-second")
        await quiescent(handle)  # disabled: no tick in flight, no timer for the next one
        assert len(s.requests_of("every-second")) == seen, "a command was sent after disable"

    requests = s.requests_of("every-second")
    workflow_id = f"wow-job:{s.app.context}:every-second"
    first = requests[0]
    assert first.request_id == f"{workflow_id}#1:0"
    assert requests[1].request_id == f"{workflow_id}#1:1"
    assert first.command_type == f"{Count.__module__}.Count"
    assert first.header("command-aggregate-context") == s.app.context
    assert first.header("command-aggregate-name") == "counter"
    assert first.header("command-aggregate-id") == "a"
    assert first.header("command-tenant-id") == "(0)"
    assert first.message_header("schedule_slot") == "1"
    assert first.message_header("upstream_id") == f"{workflow_id}#1"
    assert first.body == {"n": 1}
    ids = [r.request_id for r in requests]
    assert len(ids) == len(set(ids)), "a request id was sent twice"
    ticks = [t for name, t in s.saga.calls if name == "every-second"]
    assert [t.slot for t in ticks] == list(range(1, len(ticks) + 1))
    assert all(t.tenant_id == "(0)" and t.partition is None for t in ticks)
    assert all(t.due % 1000 == 0 for t in ticks)


async def test_a_tenant_job_has_one_instance_per_tenant_and_tokens_reach_only_their_own(
    dev_client: Client, wow_host: FakeWowHost
) -> None:
    async with stack(dev_client, wow_host) as s:
        base = f"/{s.app.context}/tenant"
        # Wow's route, the header, and the token's own tenant all name the instance.
        by_path = await s.http.post(
            f"{base}/t1/schedule/per-tenant/wow.schedule.enable", headers=auth("t1-secret")
        )
        assert by_path.status_code == 200, by_path.text
        assert by_path.json()["workflowId"] == f"wow-job:{s.app.context}:per-tenant:tenant:t1"
        by_header = await s.http.post(
            f"/{s.app.context}/schedule/per-tenant/wow.schedule.enable",
            headers={**auth(OPERATOR), "Command-Tenant-Id": "t2"},
        )
        assert by_header.status_code == 200, by_header.text
        assert by_header.json()["tenant"] == "t2"

        # t1's token cannot reach t2's instance, by any route; nothing changes.
        for url, headers in [
            (f"{base}/t2/schedule/per-tenant/wow.schedule.disable", auth("t1-secret")),
            (
                f"/{s.app.context}/schedule/per-tenant/wow.schedule.disable",
                {**auth("t1-secret"), "Command-Tenant-Id": "t2"},
            ),
            (f"{base}/t2/schedule/per-tenant", auth("t1-secret")),
        ]:
            method = s.http.get if not url.endswith("disable") else s.http.post
            refused = await method(url, headers=headers)
            assert refused.status_code == 403, (url, refused.text)
        conflicting = await s.http.post(
            f"{base}/t1/schedule/per-tenant/wow.schedule.disable",
            headers={**auth(OPERATOR), "Command-Tenant-Id": "t2"},
        )
        assert conflicting.status_code == 400
        # A TENANT job needs a tenant; a SYSTEM job has none.
        no_tenant = await s.http.post(
            f"/{s.app.context}/schedule/per-tenant/wow.schedule.enable", headers=auth(OPERATOR)
        )
        assert no_tenant.status_code == 400
        assert "TENANT job" in no_tenant.json()["message"]
        tenant_of_system = await s.http.post(
            f"{base}/t1/schedule/every-second/wow.schedule.enable", headers=auth("t1-secret")
        )
        assert tenant_of_system.status_code == 400

        def each_tenant_ticked_twice(h: FakeWowHost) -> bool:
            tenants = [r.header("command-tenant-id") for r in s.requests_of("per-tenant")]
            return tenants.count("t1") >= 2 and tenants.count("t2") >= 2

        await s.host.wait_for(each_tenant_ticked_twice, timeout=10)
        t2 = await s.jobs.show(s.app.context, "per-tenant", tenant="t2")
        assert t2.status == "Enabled"
        ticks = [t for name, t in s.saga.calls if name == "per-tenant"]
        for tenant in ("t1", "t2"):
            slots = [t.slot for t in ticks if t.tenant_id == tenant]
            assert slots[:2] == [1, 2], (tenant, slots)  # each instance numbers its own slots


async def test_bad_input_at_the_job_edges_is_refused_and_changes_nothing(
    dev_client: Client, wow_host: FakeWowHost
) -> None:
    async with stack(dev_client, wow_host) as s:
        ctx = s.app.context
        await s.jobs.enable(ctx, "every-second")
        route = f"/{ctx}/schedule/every-second/wow.schedule.reschedule"
        for body, words in [
            ({"expression": "0 0 25 * * *"}, "hour"),
            ({"zone": "Mars/Olympus"}, "Mars/Olympus"),
            ({"zone": "localtime"}, "localtime"),
            ({"misfire": "SOMETIMES"}, "misfire"),
            ({}, "at least one"),
            ({"cron": "* * * * * *"}, "cron"),
            ({"expression": "0 0 0 30 2 *"}, "never fires"),
        ]:
            answer = await s.http.post(route, json=body, headers=auth(OPERATOR))
            assert answer.status_code == 400, (body, answer.text)
            assert words in answer.json()["message"], (body, answer.json())
        with pytest.raises(JobError, match="hour"):
            await s.jobs.reschedule(ctx, "every-second", {"expression": "0 0 25 * * *"})
        with pytest.raises(JobError, match="never fires"):
            await s.jobs.reschedule(ctx, "every-second", {"expression": "0 0 0 30 2 *"})
        reset = f"/{ctx}/schedule/every-second/wow.schedule.reset"
        for body, words in [
            ({"fields": ["expresion"]}, "fields"),
            ({"fields": "zone"}, "fields"),
            ({"field": ["zone"]}, "field"),
        ]:
            answer = await s.http.post(reset, json=body, headers=auth(OPERATOR))
            assert answer.status_code == 400, (body, answer.text)
            assert words in answer.json()["message"], (body, answer.json())
        unknown = await s.http.post(
            f"/{ctx}/schedule/no-such-job/wow.schedule.enable", headers=auth(OPERATOR)
        )
        assert unknown.status_code == 404
        assert "no job no-such-job" in unknown.json()["message"]
        with pytest.raises(JobNotFoundError):
            await s.jobs.disable(ctx, "no-such-job")
        for headers in ({"Command-Tenant-Id": " "}, {"Command-Tenant-Id": "t" * 500}):
            odd_tenant = await s.http.post(
                f"/{ctx}/schedule/per-tenant/wow.schedule.enable",
                headers={**auth(OPERATOR), **headers},
            )
            assert odd_tenant.status_code == 400, odd_tenant.text
        # A context that is a prefix of this one lists none of its instances.
        prefix = await s.http.get(
            "/schedules", params={"context": ctx[:-2]}, headers=auth(OPERATOR)
        )
        assert prefix.status_code == 200 and prefix.json()["items"] == []
        no_token = await s.http.post(route, json={"zone": "UTC"})
        assert no_token.status_code == 401
        wrong_token = await s.http.post(route, json={"zone": "UTC"}, headers=auth("nope"))
        assert wrong_token.status_code == 401
        shown = await s.jobs.show(ctx, "every-second")
        assert (shown.expression, shown.zone, shown.misfire) == ("* * * * * *", "UTC", "COALESCE")
        assert shown.sources == {"expression": "code", "zone": "code", "misfire": "code"}


async def test_a_failing_handler_is_parked_then_retried_and_later_slots_follow(
    dev_client: Client, wow_host: FakeWowHost
) -> None:
    async with stack(dev_client, wow_host) as s:
        ctx = s.app.context
        s.saga.failing = True
        await s.jobs.enable(ctx, "flaky")

        info = await eventually(
            lambda: s.jobs.show(ctx, "flaky"), within=10, what="parked", interval=0.1,
            holds=lambda info: info.status == "Parked",
        )
        assert "the supplier's feed is down" in (info.parked or "")
        attempts = [t for name, t in s.saga.calls if name == "flaky"]
        assert len(attempts) == FAST.max_attempts and {t.slot for t in attempts} == {1}
        listed = await s.http.get(
            "/schedules", params={"context": ctx, "status": "Parked"}, headers=auth(OPERATOR)
        )
        assert listed.status_code == 200
        # Parked: later slots wait behind it (no tick in flight, no timer to the next slot).
        await quiescent(s.jobs.client.get_workflow_handle(f"wow-job:{ctx}:flaky"))
        assert not s.requests_of("flaky")
        missed = attempts[0].due_at + timedelta(seconds=2)  # slot 2 came due while parked
        await asyncio.sleep(max(0.0, (missed - datetime.now(UTC)).total_seconds()))

        s.saga.failing = False
        retried = await s.http.post(f"/{ctx}/schedule/flaky/retry", headers=auth(OPERATOR))
        assert retried.status_code == 200, retried.text
        await s.host.wait_for(lambda h: len(s.requests_of("flaky")) >= 2, timeout=10)
        flaky = s.requests_of("flaky")
        assert flaky[0].request_id == f"wow-job:{ctx}:flaky#1:0"  # the parked slot, same id
        second = next(t for name, t in s.saga.calls if name == "flaky" and t.slot > 1)
        assert second.skipped >= 1  # COALESCE: the slots missed while parked are counted
        refused = await s.http.post(f"/{ctx}/schedule/flaky/retry", headers=auth(OPERATOR))
        assert refused.status_code == 409, refused.text  # as a timer's retry not parked
        assert refused.json()["error"] == "Conflict"
        assert "only a parked instance" in refused.json()["message"]


async def test_overrides_the_tenants_rule_before_the_hosts_before_the_codes(
    dev_client: Client, wow_host: FakeWowHost
) -> None:
    rules = {"per-tenant": HostRule(layer=RuleLayer(expression="*/2 * * * * *", zone="Asia/Tokyo"))}
    async with stack(dev_client, wow_host, rules) as s:
        ctx = s.app.context
        info = await s.jobs.enable(ctx, "per-tenant", tenant="t1")
        assert (info.expression, info.zone) == ("*/2 * * * * *", "Asia/Tokyo")
        assert info.sources == {"expression": "host", "zone": "host", "misfire": "code"}
        info = await s.jobs.reschedule(
            ctx, "per-tenant", RuleLayer(expression="*/3 * * * * *"), tenant="t1"
        )
        assert (info.expression, info.zone) == ("*/3 * * * * *", "Asia/Tokyo")
        assert info.sources == {"expression": "tenant", "zone": "host", "misfire": "code"}
        assert all(due.second % 3 == 0 for due in info.next_due)
        other = await s.jobs.enable(ctx, "per-tenant", tenant="t2")
        assert other.expression == "*/2 * * * * *"  # t1's own rule is t1's alone


async def test_reset_and_a_null_remove_the_tenants_own_rule_and_show_says_what_it_hides(
    dev_client: Client, wow_host: FakeWowHost
) -> None:
    """Over HTTP (camelCase JSON): the tenant's own expression hides the host's, and show says
    so; a misfire in any case; `wow.schedule.reset` of a field or all of it, and a null in a
    reschedule, bring the host's back; a reset with nothing left to remove answers 200."""
    rules = {"per-tenant": HostRule(layer=RuleLayer(expression="*/2 * * * * *", zone="Asia/Tokyo"))}
    async with stack(dev_client, wow_host, rules) as s:
        ctx = s.app.context
        route = f"/{ctx}/tenant/t1/schedule/per-tenant"
        headers = auth("t1-secret")
        enabled = await s.http.post(f"{route}/wow.schedule.enable", headers=headers)
        assert enabled.status_code == 200, enabled.text

        async def post(verb: str, body: object = None) -> dict[str, Any]:
            answer = await s.http.post(f"{route}/{verb}", json=body, headers=headers)
            assert answer.status_code == 200, (verb, body, answer.text)
            found: dict[str, Any] = answer.json()
            return found

        pinned = await post(
            "wow.schedule.reschedule", {"expression": "*/3 * * * * *", "misfire": "catch_up"}
        )
        assert {"workflowId", "nextSlot", "nextDue", "code", "host", "own", "shadowed"} <= set(
            pinned
        )
        assert "workflow_id" not in pinned and pinned["misfire"] == "CATCH_UP"
        assert pinned["sources"] == {"expression": "tenant", "zone": "host", "misfire": "tenant"}
        assert pinned["own"] == {"expression": "*/3 * * * * *", "zone": None,
                                 "misfire": "CATCH_UP"}
        assert pinned["host"]["expression"] == "*/2 * * * * *"
        assert pinned["code"]["expression"] == "* * * * * *"
        shown = (await s.http.get(route, headers=headers)).json()
        assert shown["shadowed"] == [
            "host says */2 * * * * *, overridden by tenant's */3 * * * * *; `schedule reset` "
            "(or `--field expression`) to follow the host"
        ]
        some = await post("wow.schedule.reset", {"fields": ["misfire"]})
        assert (some["misfire"], some["sources"]["misfire"]) == ("COALESCE", "code")
        assert some["sources"]["expression"] == "tenant"
        unpinned = await post("wow.schedule.reschedule", {"expression": None, "zone": "UTC"})
        assert (unpinned["expression"], unpinned["zone"]) == ("*/2 * * * * *", "UTC")
        assert unpinned["sources"] == {"expression": "host", "zone": "tenant", "misfire": "code"}
        assert unpinned["shadowed"] == [
            "host says zone Asia/Tokyo, overridden by tenant's UTC; `schedule reset` "
            "(or `--field zone`) to follow the host"
        ]
        assert all(datetime.fromisoformat(d).second % 2 == 0 for d in unpinned["nextDue"])
        bare = await post("wow.schedule.reset")
        assert bare["own"] == {"expression": None, "zone": None, "misfire": None}
        assert bare["sources"] == {"expression": "host", "zone": "host", "misfire": "code"}
        assert bare["shadowed"] == []
        again = await post("wow.schedule.reset", {})
        assert {k: v for k, v in again.items() if k != "nextDue"} == {
            k: v for k, v in bare.items() if k != "nextDue"
        }, "nothing to remove: answered all the same"
        # The operator's route with the tenant header, and the client, alike.
        info = await s.jobs.reschedule(ctx, "per-tenant", {"zone": "UTC"}, tenant="t1")
        assert info.sources["zone"] == "tenant"
        info = await s.jobs.reset(ctx, "per-tenant", ["zone"], tenant="t1")
        assert info.sources["zone"] == "host" and info.own == RuleLayer()
        other = await s.http.post(
            f"/{ctx}/schedule/per-tenant/wow.schedule.reset",
            headers={**auth("t2-secret"), "Command-Tenant-Id": "t1"},
        )
        assert other.status_code == 403, other.text


async def test_a_sharded_job_ticks_each_partition_once_per_slot(
    dev_client: Client, wow_host: FakeWowHost
) -> None:
    rules = {"sharded": HostRule(partitions=3)}
    async with stack(dev_client, wow_host, rules) as s:
        started = await s.jobs.bring_to_settings(s.app)
        ids = sorted(i.workflow_id for i in started if i.name == "sharded")
        assert ids == [f"wow-job:{s.app.context}:sharded:partition:{n}" for n in range(3)]
        await s.host.wait_for(
            lambda h: {r.aggregate_id for r in s.requests_of("sharded")} == {"p0", "p1", "p2"}
            and len(s.requests_of("sharded")) >= 9,
            timeout=15,
        )
        await s.jobs.disable(s.app.context, "sharded", partition=0)
        await s.jobs.disable(s.app.context, "sharded", partition=1)
        await s.jobs.disable(s.app.context, "sharded", partition=2)
        ticks = [t for name, t in s.saga.calls if name == "sharded"]
        for partition in range(3):
            dues = [t.due for t in ticks if t.partition == partition]
            assert len(dues) == len(set(dues)), f"partition {partition} ticked a slot twice"
            slots = [t.slot for t in ticks if t.partition == partition]
            assert slots == sorted(slots) and slots[0] == 1
        # Fewer partitions: the ones beyond are disabled; more again: enabled again.
        await s.jobs.enable(s.app.context, "sharded", partition=2)
        fewer = JobClient(dev_client, s.app, host_rules={"sharded": HostRule(partitions=2)})
        retired = [i for i in await fewer.bring_to_settings(s.app) if i.name == "sharded"]
        assert [(i.partition, i.status) for i in retired][-1] == (2, "Disabled")
        back = await s.jobs.bring_to_settings(s.app)
        assert (await s.jobs.show(s.app.context, "sharded", partition=2)).status == "Enabled"
        assert back
        # bring_to_settings also enabled the SYSTEM jobs: they never reset once enabled
        again = await s.jobs.bring_to_settings(s.app)
        every = next(i for i in again if i.name == "every-second")
        assert every.next_slot is not None and every.next_slot > 1


async def test_a_worker_starting_with_a_changed_override_brings_every_tenants_instance_to_it(
    dev_client: Client, wow_host: FakeWowHost
) -> None:
    async with stack(dev_client, wow_host) as s:
        ctx = s.app.context
        for tenant in ("t1", "t2", "t3"):
            await s.jobs.enable(ctx, "per-tenant", tenant=tenant)
        await s.jobs.reschedule(ctx, "per-tenant", {"zone": "Europe/Paris"}, tenant="t3")
        changed = {"per-tenant": HostRule(layer=RuleLayer(expression="*/5 * * * * *"))}
        restarted = JobClient(dev_client, s.app, host_rules=changed, delivery=FAST)
        await restarted.bring_to_settings(s.app)  # what a worker with the new settings does
        for tenant in ("t1", "t2", "t3"):
            info = await s.jobs.show(ctx, "per-tenant", tenant=tenant)
            assert info.expression == "*/5 * * * * *", tenant
            assert info.sources["expression"] == "host"
            assert info.next_slot is not None and info.next_slot >= 1
        t3 = await s.jobs.show(ctx, "per-tenant", tenant="t3")
        assert (t3.zone, t3.sources["zone"]) == ("Europe/Paris", "tenant")
        # Brought once: a second start with the same settings finds nothing to do.
        job = s.app.job("per-tenant")
        assert await restarted._bring_tenants(ctx, job, changed["per-tenant"]) == 0


async def test_an_instance_terminated_by_an_operator_starts_again_without_repeating_a_slot(
    dev_client: Client, wow_host: FakeWowHost
) -> None:
    async with stack(dev_client, wow_host) as s:
        ctx = s.app.context
        await s.jobs.enable(ctx, "catch-up")
        await s.jobs.reschedule(ctx, "catch-up", {"zone": "Asia/Tokyo"})
        await s.host.wait_for(lambda h: len(s.requests_of("catch-up")) >= 2, timeout=10)
        workflow_id = f"wow-job:{ctx}:catch-up"
        await dev_client.get_workflow_handle(workflow_id).terminate("an operator's mistake")
        before = {r.request_id for r in s.requests_of("catch-up")}
        again = await s.jobs.enable(ctx, "catch-up")
        assert again.status == "Enabled"
        assert again.zone == "Asia/Tokyo"  # its own rule carried over
        assert again.next_slot is not None and again.next_slot > len(before)
        await s.host.wait_for(lambda h: len(s.requests_of("catch-up")) >= len(before) + 2)
        after = [r.request_id for r in s.requests_of("catch-up")]
        assert len(after) == len(set(after)), "a request id was sent again after the restart"


async def test_an_enable_with_no_worker_running_counts_from_when_it_was_asked(
    dev_client: Client, wow_host: FakeWowHost
) -> None:
    context = f"jobs-{uuid.uuid4().hex[:8]}"
    saga = Jobs(context)
    app = App(context, sagas=[saga])
    jobs = JobClient(dev_client, app, delivery=FAST, answer_timeout=timedelta(seconds=1))
    try:
        created = await jobs.enable(context, "every-second")  # starts it: no worker needed
        assert created.status == "Enabled"
        await asyncio.sleep(3.2)  # real time: slots come due with no worker (asserted below)
        async with CommandSender(wow_host.url) as sender:
            async with job_worker(dev_client, app, sender):
                await wow_host.wait_for(lambda h: saga.calls, timeout=10)
                first = saga.calls[0][1]
                assert first.skipped >= 2 and first.slot == first.skipped + 1, first
                await jobs.disable(context, "every-second")
            again = await jobs.enable(context, "every-second")  # no worker: goes as a signal
            assert again.note is not None and "signal" in again.note
            seen = len(saga.calls)
            await asyncio.sleep(3.2)  # real time again: the enable's slots come due unrun
            async with job_worker(dev_client, app, sender):
                await wow_host.wait_for(lambda h: len(saga.calls) > seen, timeout=10)
                resumed = saga.calls[seen][1]
                assert resumed.skipped >= 2, resumed  # the seconds since the enable: a misfire
                await jobs.disable(context, "every-second")
    finally:
        await _terminate_all(dev_client, context)
