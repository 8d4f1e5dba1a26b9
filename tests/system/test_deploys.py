"""A deploy never silently drops a pending timer's command (issue #37), on the dev server with a
real HTTP host redeployed between the schedule and its slot: with the upcaster, each command
scheduled by the old build is delivered once and decided on the upcast body; without it, each
parks with the host's reason instead of ending, and once the upcaster is deployed an operator's
retry delivers each once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client

from tests.apps.notes import KEY, NOTE, notes_v1, notes_v2
from tests.helpers.eshop_stack import EshopStack, new_tenant, timer_result
from tests.helpers.eventually import eventually
from wow_temporal import App
from wow_temporal.ids import timer_workflow_id
from wow_temporal.model import AggregateRef
from wow_temporal.timers.core import Status

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(90)]

DUE_MS = 1_500
"""When the notes written by the old build remind: after the redeploy."""


@pytest_asyncio.fixture(loop_scope="session")
async def stack(dev_client: Client, tmp_path: Path) -> AsyncIterator[EshopStack]:
    async with EshopStack(
        dev_client, tmp_path / "domain.db", grace=timedelta(minutes=5), apps=[notes_v1]
    ) as started:
        yield started


async def redeploy(stack: EshopStack, app: App) -> None:
    """The host restarts on the same store with another build of the notes context."""
    await stack.stop_runtime()
    stack.apps = [*(a for a in stack.apps if a.context != NOTE.context_name), app]
    stack.start_runtime()


async def written(stack: EshopStack, refs: list[AggregateRef]) -> None:
    """Each note written by the build deployed now, its timer started in Temporal."""
    for ref in refs:
        answer = await stack.send("notes.Write", ref, {"millis": DUE_MS})
        assert answer.ok, answer

    def started() -> bool:
        handed = {commit.aggregate_id for commit, _ in stack.timers.handed}
        return all(ref.aggregate_id in handed for ref in refs)

    await eventually(started, within=20, what="the relay starts the timers", interval=0.05)


async def reminded(stack: EshopStack, ref: AggregateRef) -> list[str]:
    data = await stack.read(ref)
    assert data is not None
    return [
        event["body"]["text"]
        for commit in data["commits"]
        for event in commit["body"]
        if event["name"] == "notes.Reminded"
    ]


async def test_a_command_scheduled_by_the_old_build_is_upcast_and_decided_once(
    stack: EshopStack, dev_client: Client
) -> None:
    refs = [NOTE.ref(new_tenant(), f"n-{n}") for n in range(3)]
    await redeploy(stack, notes_v1)
    await written(stack, refs)
    await redeploy(stack, notes_v2())
    states = await asyncio.gather(
        *(timer_result(dev_client, timer_workflow_id(ref, KEY)) for ref in refs)
    )
    assert [state.status for state in states] == [Status.DELIVERED] * 3
    assert [await reminded(stack, ref) for ref in refs] == [[f"en: due after {DUE_MS} ms"]] * 3


async def test_without_its_upcaster_it_parks_and_an_operators_retry_delivers_it_once(
    stack: EshopStack, dev_client: Client
) -> None:
    refs = [NOTE.ref(new_tenant(), f"p-{n}") for n in range(3)]
    await redeploy(stack, notes_v1)
    await written(stack, refs)
    await redeploy(stack, notes_v2(upcasting=False))  # the deploy forgot the upcaster
    ids = [timer_workflow_id(ref, KEY) for ref in refs]

    async def parked() -> list[Any]:
        return [await stack.timers.timers.show(workflow_id) for workflow_id in ids]

    shown = await eventually(
        parked,
        within=30,
        what="each parked",
        holds=lambda infos: all(info.status == Status.PARKED.value for info in infos),
    )
    for info in shown:
        assert info.running and info.state is not None
        assert "CommandValidation" in info.state.parked_error
        assert "no upcaster reads it" in info.state.parked_error
    assert [await reminded(stack, ref) for ref in refs] == [[]] * 3
    await redeploy(stack, notes_v2())  # the fix
    for workflow_id in ids:
        await stack.timers.timers.retry(workflow_id)
    states = await asyncio.gather(*(timer_result(dev_client, workflow_id) for workflow_id in ids))
    assert [state.status for state in states] == [Status.DELIVERED] * 3
    assert [await reminded(stack, ref) for ref in refs] == [[f"en: due after {DUE_MS} ms"]] * 3
