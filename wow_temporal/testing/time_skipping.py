"""The time-skipping test server (`wow-temporal[testing]` installs it): started with the
project's search attributes, and its clock moved on without hanging on a leaked lock."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.testservice.v1 import UnlockTimeSkippingRequest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from wow_temporal.dev.binaries import find_test_server
from wow_temporal.search_attributes import SEARCH_ATTRIBUTES, indexed_value_types

__all__ = ["skip_time", "start_time_skipping"]


async def start_time_skipping() -> WorkflowEnvironment:
    """Start the time-skipping test environment with our search attributes."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(find_test_server()),
        data_converter=pydantic_data_converter,
    )
    # The test server cannot list search attributes, only add them: add ours, fresh server.
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes=indexed_value_types(SEARCH_ATTRIBUTES),
        )
    )
    return env


_STALL_S = 10.0
"""Real seconds a virtual-clock sleep may make no headway before its lock is taken as leaked."""

_log = logging.getLogger(__name__)


async def skip_time(
    env: WorkflowEnvironment,
    duration: timedelta,
    *,
    timeout_s: float = 120.0,
    stall_s: float = _STALL_S,
) -> None:
    """Move the time-skipping server's clock on by `duration`, as `env.sleep` does, but never
    hang on the test server's leaked time-skipping lock.

    The Java test server counts time-skipping locks, and a workflow task holds one while it is
    outstanding. When the worker completes a task of a run the server has already closed (the
    run that just continued as new: the server answers "workflow execution already completed";
    its continue-as-new is not atomic, temporalio/sdk-java#1538), that task's lock is never
    released: from then on the clock only runs in real time, and a sleep of hours never returns.
    A sleep that makes no headway for `stall_s` real seconds therefore releases one lock;
    called only while the caller has nothing of its own in flight, the count is balanced again
    once the sleep relocks at its end. Raises `TimeoutError` after `timeout_s` real seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    sleep = asyncio.ensure_future(env.sleep(duration))
    try:
        while True:
            done, _ = await asyncio.wait({sleep}, timeout=stall_s)
            if done:
                await sleep
                return
            if loop.time() > deadline:
                raise TimeoutError(
                    f"the time-skipping server did not move its clock on by {duration} in "
                    f"{timeout_s:g}s (real time)"
                )
            _log.warning(
                "the time-skipping server's clock is stuck (a leaked time-skipping lock): "
                "releasing it"
            )
            with contextlib.suppress(RPCError):  # "unbalanced": nothing was leaked after all
                await env.client.test_service.unlock_time_skipping(
                    UnlockTimeSkippingRequest(), timeout=timedelta(seconds=10)
                )
    finally:
        if not sleep.done():
            sleep.cancel()
