"""The worker: runs the timer workflows and delivers their commands to the domain host."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import PollerBehaviorAutoscaling, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from wow_temporal.delivery import CommandSender, DeliveryActivities
from wow_temporal.settings import Settings, SettingsError, TimerSettings
from wow_temporal.timers.client import TIMER_TASK_QUEUE
from wow_temporal.timers.deletion import DeletionRecords, DeletionWorkflow
from wow_temporal.timers.workflow import DeliverySettings, TimerWorkflow

__all__ = ["connect", "delivery_settings", "run_worker", "timer_worker"]

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


async def connect(settings: Settings) -> Client:
    """A client on the Temporal namespace the settings name (pydantic data converter)."""
    return await Client.connect(**settings.temporal_connect_config())


async def run_worker(
    settings: Settings,
    *,
    client: Client | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run the timers until `stop` is set (or forever), delivering to `settings.host_url`."""
    if settings.host_url is None:
        raise SettingsError("WOW_HOST_URL (wow.host-url): the worker needs the domain host's URL")
    client = client or await connect(settings)
    async with CommandSender(settings.host_url) as sender:
        worker = timer_worker(client, sender)
        log.info(
            "timer worker on task queue %s, namespace %s, delivering to %s",
            TIMER_TASK_QUEUE,
            client.namespace,
            settings.host_url,
        )
        async with worker:
            await (stop.wait() if stop is not None else asyncio.Event().wait())
