"""The worker: runs the timer workflows and delivers their commands to the domain host."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from wow_temporal.delivery import CommandSender, DeliveryActivities
from wow_temporal.settings import Settings, SettingsError, TimerSettings
from wow_temporal.timers.client import TIMER_TASK_QUEUE
from wow_temporal.timers.deletion import DeletionRecords, DeletionWorkflow
from wow_temporal.timers.workflow import DeliverySettings, TimerWorkflow

__all__ = ["connect", "delivery_settings", "run_worker", "timer_worker"]

log = logging.getLogger(__name__)

_RUNNER = SandboxedWorkflowRunner(
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
        workflow_runner=_RUNNER,
        max_concurrent_activities=max_concurrent_activities,
        # A timer's first workflow task arrives on the normal queue when its start delay ends,
        # many at once at a popular due time: poll that queue harder than the SDK's default
        # (1 poll in 5), or bursts wait on it (bench/timers.py: 69 -> 134 deliveries/s).
        max_concurrent_workflow_task_polls=20,
        nonsticky_to_sticky_poll_ratio=4.0,
        max_concurrent_activity_task_polls=20,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=3),
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
