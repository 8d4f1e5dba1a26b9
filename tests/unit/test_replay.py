"""Replay tests: every history under tests/histories (recorded from real runs by
tests/record_histories.py) replays against today's workflow code without nondeterminism.

A change to a workflow that would break the timers and job instances already running (a command
added, removed or reordered, a different activity or timer) fails here, naming the history. To
change a workflow safely: branch with `workflow.patched(...)` (and keep the old history), or
give the changed workflow a new type name; re-record with tests/record_histories.py only for
new histories, never to make an old one pass.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.common import RawValue
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

with workflow.unsafe.imports_passed_through():
    from wow_temporal.jobs.directory import TenantsWorkflow
    from wow_temporal.jobs.workflow import JobWorkflow
    from wow_temporal.timers.core import TimerState
    from wow_temporal.timers.deletion import DeletionWorkflow
    from wow_temporal.timers.workflow import TimerWorkflow
    from wow_temporal.worker import WORKFLOW_RUNNER

HISTORIES = Path(__file__).parent.parent / "histories"  # no resolve() in the workflow sandbox
FILES = sorted(HISTORIES.glob("*.json"))
WORKFLOWS = [TimerWorkflow, DeletionWorkflow, JobWorkflow, TenantsWorkflow]
"""Every workflow the workers run (`wow_temporal.worker`: timer_worker and job_worker)."""
WORKFLOW_TYPES = {"wow.Timer", "wow.AggregateDeletion", "wow.Job", "wow.JobTenants"}


def load(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(f"replay-{path.stem}", path.read_text())


def workflow_type(path: Path) -> str:
    first = json.loads(path.read_text())["events"][0]
    return str(first["workflowExecutionStartedEventAttributes"]["workflowType"]["name"])


def replayer(*workflows: type, traced: bool = False) -> Replayer:
    """A replayer of `workflows`; `traced`: with the tracing interceptor production workers
    have when their spans are exported (`wow.tracing.client_interceptors`)."""
    return Replayer(
        workflows=list(workflows),
        data_converter=pydantic_data_converter,
        workflow_runner=WORKFLOW_RUNNER,
        interceptors=[TracingInterceptor()] if traced else [],
    )


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "traced"])
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
async def test_recorded_history_replays(path: Path, traced: bool) -> None:
    result = await replayer(*WORKFLOWS, traced=traced).replay_workflow(
        load(path), raise_on_replay_failure=False
    )
    if result.replay_failure is not None:
        pytest.fail(
            f"{path.name} no longer replays: a change to the {workflow_type(path)} workflow "
            f"would break its running executions ({type(result.replay_failure).__name__}: "
            f"{result.replay_failure}). Patch the change with workflow.patched(...) or give "
            "the workflow a new type name; do not re-record this history to make it pass.",
            pytrace=False,
        )


def test_every_workflow_has_recorded_histories() -> None:
    recorded = {workflow_type(path) for path in FILES}
    assert recorded >= WORKFLOW_TYPES, f"no history recorded for {WORKFLOW_TYPES - recorded}"
    assert len(FILES) >= 14


@workflow.defn(name="wow.Timer")
class ChangedTimerWorkflow(TimerWorkflow):
    """`wow.Timer` as a careless change would leave it: the same workflow, except that it now
    sleeps a moment before its first step (a timer command that the recorded runs never
    issued)."""

    @workflow.run
    async def run(self, raw: RawValue) -> TimerState:
        await workflow.sleep(timedelta(seconds=1))
        return await super().run(raw)


@workflow.defn(name="wow.Timer")
class PatchedTimerWorkflow(TimerWorkflow):
    """The same change behind `workflow.patched`: new runs sleep first, recorded ones don't."""

    @workflow.run
    async def run(self, raw: RawValue) -> TimerState:
        if workflow.patched("sleep-first"):
            await workflow.sleep(timedelta(seconds=1))
        return await super().run(raw)


async def test_a_changed_workflow_fails_to_replay() -> None:
    """The replay test catches a break: the changed copy of `wow.Timer` is nondeterministic
    against a recorded history, and the same change behind a patch is not."""
    history = load(HISTORIES / "timer_one_shot.json")
    broken = await replayer(ChangedTimerWorkflow, DeletionWorkflow).replay_workflow(
        history, raise_on_replay_failure=False
    )
    assert isinstance(broken.replay_failure, workflow.NondeterminismError), broken.replay_failure
    patched = await replayer(PatchedTimerWorkflow, DeletionWorkflow).replay_workflow(
        history, raise_on_replay_failure=False
    )
    assert patched.replay_failure is None, patched.replay_failure
