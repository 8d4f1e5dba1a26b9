"""The worker: runs the timer workflows and, for an `App`, its job instances; delivers their
commands to the domain host.

`run_worker` is the production worker (`wow-temporal worker`): health endpoints on a port of
their own (`wow_temporal.health`), a start that waits for Temporal instead of failing, the
concurrency limits of `wow.worker.*`, and a graceful stop (see `run_worker`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal

from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.worker import (
    PollerBehavior,
    PollerBehaviorAutoscaling,
    PollerBehaviorSimpleMaximum,
    Worker,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from wow_temporal.connection import PROBE_TIMEOUT, connect, connect_reason, probe
from wow_temporal.delivery import CommandSender, DeliveryActivities
from wow_temporal.domain.app import App
from wow_temporal.errors import WowTemporalError
from wow_temporal.health import HealthServer, Readiness
from wow_temporal.jobs.client import JobClient, job_task_queue
from wow_temporal.jobs.core import HostRule
from wow_temporal.jobs.directory import TenantsWorkflow
from wow_temporal.jobs.overrides import host_rules
from wow_temporal.jobs.tick import CommandSink, TickActivities
from wow_temporal.jobs.workflow import JobWorkflow
from wow_temporal.metrics import (
    PARKED_INTERVAL,
    client_meter,
    exporting_runtime,
    record_parked,
)
from wow_temporal.settings import (
    DeliverySettings,
    Settings,
    SettingsError,
    WorkerSettings,
)
from wow_temporal.timers.client import TIMER_TASK_QUEUE
from wow_temporal.timers.deletion import DeletionRecords, DeletionWorkflow
from wow_temporal.timers.workflow import TimerWorkflow

__all__ = [
    "CONNECT_RETRY",
    "PARKED_QUERIES",
    "PROBE_INTERVAL",
    "WORKFLOW_RUNNER",
    "WorkerFailedError",
    "connect",
    "connect_reason",
    "count_parked",
    "job_worker",
    "pollers",
    "probe",
    "run_worker",
    "timer_worker",
]

log = logging.getLogger(__name__)

CONNECT_RETRY = 3.0
"""Seconds between attempts to reach Temporal while the worker starts (one log line each)."""

PROBE_INTERVAL = 3.0
"""Seconds between the readiness probes of Temporal while the worker runs."""

STICKY_TIMEOUT = timedelta(seconds=3)
"""How long a workflow task waits for the worker that ran its workflow before others take it."""

WORKFLOW_RUNNER = SandboxedWorkflowRunner(
    # The model and the pure cores are deterministic: share them with the sandbox, do not
    # re-import them for every workflow run.
    restrictions=SandboxRestrictions.default.with_passthrough_modules(
        "wow_temporal", "pydantic", "pydantic_core", "httpx", "zoneinfo"
    )
)


def pollers(setting: Literal["auto"] | int) -> PollerBehavior:
    """The SDK's poller behaviour for `wow.worker.*-pollers`: autoscaling, or at most n."""
    if setting == "auto":
        return PollerBehaviorAutoscaling()
    return PollerBehaviorSimpleMaximum(maximum=setting)


def timer_worker(
    client: Client,
    sender: CommandSender,
    *,
    task_queue: str = TIMER_TASK_QUEUE,
    activities: Sequence[Any] | None = None,
    max_concurrent_activities: int = 200,
    max_concurrent_workflow_tasks: int | None = None,
    graceful_shutdown_timeout: timedelta = timedelta(0),
    workflow_pollers: PollerBehavior | None = None,
    activity_pollers: PollerBehavior | None = None,
    late_after: timedelta | None = None,
) -> Worker:
    """A worker for the timer workflows, the deletion records and the delivery activity
    (which checks the deletion records before it sends; replaceable in tests).
    `max_concurrent_workflow_tasks` None is the SDK's default (100); pollers autoscale unless
    given; a delivery whose first attempt starts more than `late_after` after its due time is
    counted in `wow_deliveries_late` (`wow.timers.poll-interval`; None: not counted)."""
    if activities is None:
        deletions = DeletionRecords(client, task_queue=task_queue)
        delivery = DeliveryActivities(sender, deletions=deletions, late_after=late_after)
        activities = [delivery.deliver]
    return _worker(
        client,
        task_queue,
        [TimerWorkflow, DeletionWorkflow],
        list(activities),
        max_concurrent_activities=max_concurrent_activities,
        max_concurrent_workflow_tasks=max_concurrent_workflow_tasks,
        graceful_shutdown_timeout=graceful_shutdown_timeout,
        workflow_pollers=workflow_pollers,
        activity_pollers=activity_pollers,
    )


def _worker(
    client: Client,
    task_queue: str,
    workflows: Sequence[type],
    activities: Sequence[Any],
    *,
    max_concurrent_activities: int,
    max_concurrent_workflow_tasks: int | None,
    graceful_shutdown_timeout: timedelta,
    workflow_pollers: PollerBehavior | None,
    activity_pollers: PollerBehavior | None,
) -> Worker:
    """A worker tuned as every wow-temporal worker is: the shared sandbox, autoscaling pollers
    unless told, and a short sticky timeout."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=list(workflows),
        activities=list(activities),
        workflow_runner=WORKFLOW_RUNNER,
        max_concurrent_activities=max_concurrent_activities,
        max_concurrent_workflow_tasks=max_concurrent_workflow_tasks,
        graceful_shutdown_timeout=graceful_shutdown_timeout,
        # Pollers scale with the backlog the server reports, on the sticky queue (the
        # workflow tasks that follow a delivery) and the normal one (a timer's first task,
        # when its start delay ends) alike. Fixed pollers starved one or the other under
        # load: a fixed 4:1 split for the normal queue let sticky tasks pile up and time out
        # in a loop; an even one let delayed starts wait (bench/soak.py, 1,500 aggregates in
        # 90 s: 688 task timeouts and p99 5.9 s, or p99 26 s; autoscaling: 0 and p99 3.1 s).
        workflow_task_poller_behavior=workflow_pollers or PollerBehaviorAutoscaling(),
        activity_task_poller_behavior=activity_pollers or PollerBehaviorAutoscaling(),
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
    max_concurrent_workflow_tasks: int | None = None,
    graceful_shutdown_timeout: timedelta = timedelta(0),
    workflow_pollers: PollerBehavior | None = None,
    activity_pollers: PollerBehavior | None = None,
) -> Worker:
    """A worker for `app`'s job instances (on `job_task_queue(app.context)`) and their ticks,
    whose commands go to `sink`; `host` is the override each tick brings back to its instance."""
    ticks = TickActivities(app, sink, host=host)
    return _worker(
        client,
        task_queue or job_task_queue(app.context),
        [JobWorkflow, TenantsWorkflow],
        [ticks.tick],
        max_concurrent_activities=max_concurrent_activities,
        max_concurrent_workflow_tasks=max_concurrent_workflow_tasks,
        graceful_shutdown_timeout=graceful_shutdown_timeout,
        workflow_pollers=workflow_pollers,
        activity_pollers=activity_pollers,
    )


class WorkerFailedError(WowTemporalError, RuntimeError):
    """A worker stopped by itself (a fatal error of the Temporal SDK): the process should exit
    non-zero so that it is restarted."""


def _where(settings: Settings) -> str:
    config = settings.temporal_connect_config()
    return f"{config['target_host']} (namespace {config['namespace']})"


async def _wait(stop: asyncio.Event, seconds: float) -> bool:
    """Wait `seconds` or until `stop` is set; True when it is."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    return stop.is_set()


async def connect_until_up(
    settings: Settings, readiness: Readiness, stop: asyncio.Event, runtime: Runtime | None = None
) -> Client | None:
    """Connect, and while Temporal cannot be reached say so (one warning per attempt, every
    `CONNECT_RETRY` seconds, and as `/readyz`'s reason) and try again; None if `stop` is set
    first. An address the SDK refuses outright is a `SettingsError`: retrying cannot help."""
    where = _where(settings)
    attempt = 0
    while not stop.is_set():
        attempt += 1
        try:
            client = await connect(settings, runtime)
        except SettingsError:
            raise
        except ValueError as error:  # the SDK refuses the address itself
            raise SettingsError(f"invalid Temporal address {where}: {error}") from None
        except RuntimeError as error:
            text = str(error)
            if not text.startswith("Failed client connect"):
                raise
            reason = f"cannot reach Temporal at {where}: {connect_reason(text)}"
        else:
            if attempt > 1:
                log.info("connected to Temporal at %s after %d attempts", where, attempt)
            return client
        readiness.set_unready(reason)
        log.warning("%s; retrying in %gs (attempt %d)", reason, CONNECT_RETRY, attempt)
        await _wait(stop, CONNECT_RETRY)
    return None


async def _watch(
    client: Client, workers: Sequence[Worker], readiness: Readiness, stop: asyncio.Event
) -> None:
    """Keep `readiness` true to Temporal and the workers, logging each change once."""
    where = f"Temporal at {client.service_client.config.target_host}"
    said: str | None = ""  # "": nothing said yet; None: ready
    while not stop.is_set():
        reason = await probe(client)
        if reason is None and not all(worker.is_running for worker in workers):
            reason = "the worker is not polling yet"
        if stop.is_set():
            return
        if reason is None:
            readiness.set_ready()
            if said:
                log.info("ready again: %s answers", where)
        else:
            readiness.set_unready(reason)
            if reason != said:
                log.warning("not ready: %s", reason)
        said = reason
        await _wait(stop, PROBE_INTERVAL if reason is None else 1.0)


PARKED_QUERIES = {
    "timer": "WorkflowType = 'wow.Timer' AND ExecutionStatus = 'Running' AND WowStatus = 'Parked'",
    "job": "WorkflowType = 'wow.Job' AND ExecutionStatus = 'Running' AND WowStatus = 'Parked'",
}
"""The visibility queries behind the `wow_parked` gauge, by kind (the README's saved views)."""


async def count_parked(client: Client, stop: asyncio.Event) -> None:
    """Keep the `wow_parked` gauge to what visibility counts, every `PARKED_INTERVAL` s (for
    display only: visibility lags; a failed count keeps the last value)."""
    meter = client_meter(client)
    failing = False
    while not stop.is_set():
        for kind, query in PARKED_QUERIES.items():
            try:
                counted = await client.count_workflows(query, rpc_timeout=PROBE_TIMEOUT)
            except Exception as error:  # visibility away or slow: keep the last value
                if not failing:  # once per outage; e.g. `wow-temporal setup` was not run
                    log.warning("cannot count the parked %ss (wow_parked): %s", kind, error)
                failing = True
                continue
            if failing:
                log.info("counting the parked timers and jobs again (wow_parked)")
            failing = False
            record_parked(meter, kind, counted.count)
        await _wait(stop, PARKED_INTERVAL)


async def run_worker(
    settings: Settings,
    *,
    client: Client | None = None,
    stop: asyncio.Event | None = None,
    app: App | None = None,
    readiness: Readiness | None = None,
) -> None:
    """Run the timers (and `app`'s jobs) until `stop` is set (or forever), delivering to
    `settings.host_url`. At start, every SYSTEM instance of `app` is brought to the host's
    override and enabled unless `wow.schedules.<name>.enabled` is false.

    Health: with `wow.worker.health-port` (8081; 0: off), `/livez` answers 200 from the start
    and `/readyz` 200 only while Temporal answers a probe (every `PROBE_INTERVAL` s, within
    `PROBE_TIMEOUT`) and the workers poll; 503 with the reason otherwise (`readiness` is that
    state, for callers that serve it themselves).

    Start: without a `client`, Temporal is connected to with `connect_until_up`: a worker
    started before Temporal (or while it is away) stays up, unready, and keeps trying, as a
    Kubernetes Deployment expects.

    Stop: when `stop` is set (the CLI sets it on SIGTERM and SIGINT) the worker turns unready,
    stops polling (no new deliveries or ticks are taken) and lets those in flight finish for up
    to `wow.worker.shutdown-timeout` (30 s); then the SDK cancels what is left, and returns.
    A delivery being sent when it is cancelled still waits for the host's answer (at most the
    sender's 10 s timeout), so its outcome is recorded. Nothing unfinished is lost: an attempt
    that did not report back is timed out by Temporal (the activity's heartbeat timeout, 5 s)
    and retried by another worker with the same request id, which a host that had already
    decided it answers `DuplicateRequestId` (delivered); a tick is retried the same way with
    its request ids. Give Kubernetes a `terminationGracePeriodSeconds` longer than the shutdown
    timeout plus that send timeout.

    Raises `WorkerFailedError` when a worker stops by itself (a fatal SDK error), so that the
    process exits non-zero and is restarted.
    """
    if settings.host_url is None:
        raise SettingsError("WOW_HOST_URL (wow.host-url): the worker needs the domain host's URL")
    rules = host_rules(settings, app) if app is not None else {}  # a bad override fails first
    stop = stop if stop is not None else asyncio.Event()
    readiness = readiness if readiness is not None else Readiness("connecting to Temporal")
    async with contextlib.AsyncExitStack() as stack:
        if settings.worker.health_port:
            health = HealthServer(readiness, settings.worker.health_port)
            await stack.enter_async_context(health)
            log.info("health on port %d: /livez, /readyz", health.port)
        if client is None:
            runtime = exporting_runtime(
                settings.telemetry, settings.worker.metrics_port, "wow.worker.metrics-port"
            )
            client = await connect_until_up(settings, readiness, stop, runtime)
            if client is None:
                log.info("stopped before Temporal could be reached")
                return
        sender = await stack.enter_async_context(CommandSender(settings.host_url))
        await _run_workers(settings, client, sender, readiness, stop, app=app, rules=rules)
        log.info("stopped")


def _limits(options: WorkerSettings) -> dict[str, Any]:
    """The keyword arguments of `timer_worker` and `job_worker` that `wow.worker.*` sets."""
    return {
        "max_concurrent_activities": options.max_concurrent_activities,
        "max_concurrent_workflow_tasks": options.max_concurrent_workflow_tasks,
        "graceful_shutdown_timeout": options.shutdown_timeout,
        "workflow_pollers": pollers(options.workflow_pollers),
        "activity_pollers": pollers(options.activity_pollers),
    }


async def _run_workers(
    settings: Settings,
    client: Client,
    sender: CommandSender,
    readiness: Readiness,
    stop: asyncio.Event,
    *,
    app: App | None,
    rules: dict[str, HostRule],
) -> None:
    """Run the timer worker (and `app`'s job worker, with the host's `rules`) until `stop` is
    set or one fails, then shut them down, letting what is in flight finish
    (`wow.worker.shutdown-timeout`)."""
    queue = settings.timers.task_queue
    limits = _limits(settings.worker)
    bound = settings.timers.poll_interval
    workers = [timer_worker(client, sender, task_queue=queue, late_after=bound, **limits)]
    if app is not None:
        workers.append(job_worker(client, app, sender, host=rules, **limits))
    runs = [asyncio.create_task(worker.run()) for worker in workers]
    try:
        log.info(
            "timer worker on task queue %s, namespace %s, delivering to %s",
            queue,
            client.namespace,
            settings.host_url,
        )
        if app is not None:
            await _start_jobs(client, app, rules, settings.timers.delivery)
        await _until_stopped(client, workers, runs, readiness, stop)
        log.info(
            "stopping: polling stopped, waiting up to %gs for the deliveries and ticks in flight",
            settings.worker.shutdown_timeout.total_seconds(),
        )
    finally:
        stop.set()
        await asyncio.gather(*(worker.shutdown() for worker in workers), return_exceptions=True)
        await asyncio.gather(*runs, return_exceptions=True)


async def _start_jobs(
    client: Client, app: App, rules: dict[str, HostRule], delivery: DeliverySettings
) -> None:
    """Bring `app`'s SYSTEM job instances to the host's override (and enabled or not)."""
    jobs = JobClient(client, app, host_rules=rules, delivery=delivery)
    for info in await jobs.bring_to_settings(app):
        log.info("job %s: %s, %s %s", info.workflow_id, info.status, info.expression, info.zone)
    log.info(
        "job worker for %s on task queue %s: %s",
        app.context,
        job_task_queue(app.context),
        ", ".join(sorted(app.jobs)) or "no jobs",
    )


async def _until_stopped(
    client: Client,
    workers: Sequence[Worker],
    runs: Sequence[asyncio.Task[None]],
    readiness: Readiness,
    stop: asyncio.Event,
) -> None:
    """Keep readiness and the parked gauge up to date until `stop` is set or a worker stops
    by itself (`WorkerFailedError`); the worker is then unready."""
    watch = asyncio.create_task(_watch(client, workers, readiness, stop))
    parked = asyncio.create_task(count_parked(client, stop))
    stopping = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([stopping, *runs], return_when=asyncio.FIRST_COMPLETED)
    stop.set()  # ends the watch and the counts, whichever came first
    await watch
    await parked
    failed = [run for run in runs if run in done]
    if failed:
        error = failed[0].exception()
        readiness.set_unready(f"the worker stopped: {error}")
        raise WorkerFailedError(f"the worker stopped: {error}") from error
    readiness.set_unready("shutting down")
