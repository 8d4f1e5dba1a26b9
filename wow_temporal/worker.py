"""The worker: runs the timer workflows and, for an `App`, its job instances; delivers their
commands to the domain host."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import PollerBehaviorAutoscaling, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from wow_temporal.delivery import CommandSender, DeliveryActivities
from wow_temporal.domain.app import App
from wow_temporal.jobs.client import JobClient, job_task_queue
from wow_temporal.jobs.core import HostRule
from wow_temporal.jobs.directory import TenantsWorkflow
from wow_temporal.jobs.overrides import host_rules
from wow_temporal.jobs.tick import CommandSink, TickActivities
from wow_temporal.jobs.workflow import JobWorkflow
from wow_temporal.settings import Settings, SettingsError, TimerSettings
from wow_temporal.timers.client import TIMER_TASK_QUEUE
from wow_temporal.timers.deletion import DeletionRecords, DeletionWorkflow
from wow_temporal.timers.workflow import DeliverySettings, TimerWorkflow

__all__ = [
    "WORKFLOW_RUNNER",
    "connect",
    "delivery_settings",
    "job_worker",
    "run_worker",
    "timer_worker",
]

log = logging.getLogger(__name__)

STICKY_TIMEOUT = timedelta(seconds=3)
"""How long a workflow task waits for the worker that ran its workflow before others take it."""

WORKFLOW_RUNNER = SandboxedWorkflowRunner(
    # The model and the pure cores are deterministic: share them with the sandbox, do not
    # re-import them for every workflow run.
    restrictions=SandboxRestrictions.default.with_passthrough_modules(
        "wow_temporal", "pydantic", "pydantic_core", "httpx", "zoneinfo"
    )
)


def delivery_settings(timers: TimerSettings) -> DeliverySettings:
    """The delivery retry policy of `wow.timers.*`."""
    return DeliverySettings(
        max_attempts=timers.max_attempts,
        initial_interval=timers.retry_initial_interval,
        max_interval=timers.retry_max_interval,
        backoff=timers.retry_backoff,
    )


def timer_worker(
    client: Client,
    sender: CommandSender,
    *,
    task_queue: str = TIMER_TASK_QUEUE,
    activities: Sequence[Any] | None = None,
    max_concurrent_activities: int = 200,
) -> Worker:
    """A worker for the timer workflows, the deletion records and the delivery activity
    (which checks the deletion records before it sends; replaceable in tests)."""
    if activities is None:
        deletions = DeletionRecords(client, task_queue=task_queue)
        activities = [DeliveryActivities(sender, deletions=deletions).deliver]
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[TimerWorkflow, DeletionWorkflow],
        activities=list(activities),
        workflow_runner=WORKFLOW_RUNNER,
        max_concurrent_activities=max_concurrent_activities,
        # Pollers scale with the backlog the server reports, on the sticky queue (the
        # workflow tasks that follow a delivery) and the normal one (a timer's first task,
        # when its start delay ends) alike. Fixed pollers starved one or the other under
        # load: a fixed 4:1 split for the normal queue let sticky tasks pile up and time out
        # in a loop; an even one let delayed starts wait (bench/soak.py, 1,500 aggregates in
        # 90 s: 688 task timeouts and p99 5.9 s, or p99 26 s; autoscaling: 0 and p99 3.1 s).
        workflow_task_poller_behavior=PollerBehaviorAutoscaling(),
        activity_task_poller_behavior=PollerBehaviorAutoscaling(),
        # A task on the sticky queue of a worker that died goes to the others this soon
        # (10 s by default; 30 s kept deliveries waiting that long after a worker was killed).
        sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT,
    )


def job_worker(
    client: Client,
    app: App,
    sink: CommandSink,
    *,
    task_queue: str | None = None,
    host: Mapping[str, HostRule] | None = None,
    max_concurrent_activities: int = 200,
) -> Worker:
    """A worker for `app`'s job instances (on `job_task_queue(app.context)`) and their ticks,
    whose commands go to `sink`; `host` is the override each tick brings back to its instance."""
    ticks = TickActivities(app, sink, host=host)
    return Worker(
        client,
        task_queue=task_queue or job_task_queue(app.context),
        workflows=[JobWorkflow, TenantsWorkflow],
        activities=[ticks.tick],
        workflow_runner=WORKFLOW_RUNNER,
        max_concurrent_activities=max_concurrent_activities,
        workflow_task_poller_behavior=PollerBehaviorAutoscaling(),
        activity_task_poller_behavior=PollerBehaviorAutoscaling(),
        sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT,
    )


async def connect(settings: Settings) -> Client:
    """A client on the Temporal namespace the settings name (pydantic data converter)."""
    return await Client.connect(**settings.temporal_connect_config())


async def run_worker(
    settings: Settings,
    *,
    client: Client | None = None,
    stop: asyncio.Event | None = None,
    app: App | None = None,
) -> None:
    """Run the timers (and `app`'s jobs) until `stop` is set (or forever), delivering to
    `settings.host_url`. At start, every SYSTEM instance of `app` is brought to the host's
    override and enabled unless `wow.schedules.<name>.enabled` is false."""
    if settings.host_url is None:
        raise SettingsError("WOW_HOST_URL (wow.host-url): the worker needs the domain host's URL")
    rules = host_rules(settings, app) if app is not None else {}
    client = client or await connect(settings)
    async with CommandSender(settings.host_url) as sender, contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(timer_worker(client, sender))
        log.info(
            "timer worker on task queue %s, namespace %s, delivering to %s",
            TIMER_TASK_QUEUE,
            client.namespace,
            settings.host_url,
        )
        if app is not None:
            await stack.enter_async_context(job_worker(client, app, sender, host=rules))
            jobs = JobClient(
                client, app, host_rules=rules, delivery=delivery_settings(settings.timers)
            )
            for info in await jobs.bring_to_settings(app):
                log.info("job %s: %s, %s %s", info.workflow_id, info.status, info.expression,
                         info.zone)
            log.info(
                "job worker for %s on task queue %s: %s",
                app.context,
                job_task_queue(app.context),
                ", ".join(sorted(app.jobs)) or "no jobs",
            )
        await (stop.wait() if stop is not None else asyncio.Event().wait())
