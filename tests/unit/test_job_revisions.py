"""A job's command carries the revision its class declares, so the host reads it as written:
never taken for a revision-1 body and upcast again (found by review of #37)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from workers.eshop.order import ORDER, CancelCause, CancelOrder, order_app
from wow_temporal.delivery import wire_command
from wow_temporal.domain.commands import Command
from wow_temporal.host.service import CommandMessage, _read_as_now
from wow_temporal.jobs.tick import TickRequest, _delivery

pytestmark = pytest.mark.unit


def test_a_jobs_revised_command_is_read_as_written() -> None:
    app = order_app()
    ref = ORDER.ref("t1", "o-1")
    command = Command(ref, CancelOrder(cause=CancelCause(code="NIGHTLY", detail="x")))
    request = TickRequest(
        workflow_id="wf", context="eshop-order", job="j", tenant="t1", slot=1, due=0
    )
    delivery = _delivery(request, SimpleNamespace(name="j"), command, 0)  # type: ignore[arg-type]
    assert delivery.command.revision == "2"
    sent = wire_command(delivery)
    message = CommandMessage(
        type=sent.type, ref=ref, body=sent.body, request_id=sent.request_id, headers=sent.headers
    )
    assert message.schedule is not None  # a tick's command carries its slot, as a timer's
    read = _read_as_now(app, message)
    assert isinstance(read, CommandMessage), read
    assert read.body == {"cause": {"code": "NIGHTLY", "detail": "x"}}
