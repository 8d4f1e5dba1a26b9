"""The timers: `apply` hands commits' schedule events to them, the `timers` group lists, shows,
retries and cancels them."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError

from wow_temporal.cli._common import (
    _Address,
    _CommandError,
    _configure_logging,
    _connect,
    _echo_json,
    _fail,
    _load_apps,
    _Namespace,
    _run,
    _settings,
)
from wow_temporal.model import InvalidCommitError, explain

if TYPE_CHECKING:
    from temporalio.client import Client

    from wow_temporal.settings import Settings
    from wow_temporal.timers.admission import Admitted
    from wow_temporal.timers.check import CheckReport
    from wow_temporal.timers.core import TimerState

timers_app = typer.Typer(
    no_args_is_help=True, help="List, show, retry, cancel and check timers."
)


def apply_commits(
    files: Annotated[
        list[Path], typer.Argument(help="JSON files of commits (one commit or a list); - is stdin.")
    ],
    address: _Address = None,
    namespace: _Namespace = None,
) -> None:
    """Hand commits' schedule events to the timers (as a host's relay would); every commit of
    every file is admitted before Temporal is reached, so a bad one changes nothing."""
    from wow_temporal.timers.admission import admit
    from wow_temporal.timers.client import TimerClient

    batch: list[Admitted] = []
    for path in files:
        try:
            text = sys.stdin.read() if str(path) == "-" else path.read_text()
            data = json.loads(text)
        except (OSError, json.JSONDecodeError) as error:
            raise _fail(f"{path}: {error}") from None
        try:  # each file admitted on its own, so the error names the file
            batch.extend(admit(data if isinstance(data, list) else [data]))
        except InvalidCommitError as error:
            raise _fail(f"{path}: {_one_line(error)}") from None
    try:
        commits = admit(batch)  # and what the files get wrong together
    except InvalidCommitError as error:
        raise _fail(_one_line(error)) from None
    settings = _settings(address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

    async def work() -> None:
        client = await _connect(settings)
        timers = TimerClient.from_settings(client, settings)
        for answers in await timers.apply_many(commits):
            for applied in answers:
                typer.echo(
                    f"{applied.outcome:<9} {applied.kind:<6} {applied.workflow_id}  "
                    f"{applied.reason}".rstrip()
                )

    _run(work)


def _one_line(error: Exception) -> str:
    """An error's message on one line (a commit's text may hold a line break)."""
    return " ".join(str(error).split())


@timers_app.command("list")
def timers_list(
    aggregate: Annotated[str | None, typer.Option(help="context.aggregate")] = None,
    aggregate_id: Annotated[str | None, typer.Option("--aggregate-id")] = None,
    tenant: Annotated[str | None, typer.Option()] = None,
    key: Annotated[str | None, typer.Option()] = None,
    status: Annotated[
        str | None, typer.Option(help="Scheduled, Parked, Delivered, Rejected, Cancelled, …")
    ] = None,
    running: Annotated[bool | None, typer.Option("--running/--closed")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 100,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    address: _Address = None,
    namespace: _Namespace = None,
) -> None:
    """List timers matching the filters (the same query works in the Web UI)."""
    from wow_temporal.timers.client import TimerClient, TimerFilter

    settings = _settings(address=address, namespace=namespace)
    try:
        where = TimerFilter(
            aggregate=aggregate,
            aggregate_id=aggregate_id,
            tenant=tenant,
            key=key,
            status=status,  # any case of a Status name
            running=running,
        )
    except ValidationError as error:
        raise _fail(explain(error)) from None
    _configure_logging(settings, logging.WARNING)

    async def work() -> None:
        client = await _connect(settings)
        found = await TimerClient.from_settings(client, settings).list(where, limit=limit)
        if as_json:
            _echo_json([info.model_dump(mode="json") for info in found])
            return
        typer.echo(f"# {where.query()}", err=True)
        for info in found:
            due = info.due.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if info.due else "-"
            typer.echo(f"{info.status:<10} {due:<21} {info.workflow_id}")

    _run(work)


@timers_app.command("show")
def timers_show(workflow_id: str, address: _Address = None, namespace: _Namespace = None) -> None:
    """Show one timer with its full state."""
    from wow_temporal.timers.client import TimerClient

    settings = _settings(address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

    async def work() -> None:
        client = await _connect(settings)
        _echo_json(await TimerClient.from_settings(client, settings).show(workflow_id))

    _run(work)


@timers_app.command("check")
def timers_check(
    app_reference: Annotated[
        str,
        typer.Option(
            "--app", help="module:attr of the App(s) about to be deployed, e.g. workers.eshop:apps"
        ),
    ],
    limit: Annotated[
        int, typer.Option(min=1, max=1_000_000, help="Running timers to read at most.")
    ] = 10_000,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the findings as a JSON list.")
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(help="Fail (exit 1) also when a timer's state cannot be read, or the "
                     "limit leaves timers unread."),
    ] = False,
    address: _Address = None,
    namespace: _Namespace = None,
) -> None:
    """Before a deploy: list each running timer whose command the apps would refuse (an
    unknown type, a revision no upcaster reads, a body invalid after upcasting). Read-only.
    Exit 1 if any is refused, 0 if none, 2 if the check cannot run."""
    apps = _load_apps(app_reference)
    settings = _settings(address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

    async def work() -> CheckReport:
        from wow_temporal.timers.client import TimerClient

        timers = TimerClient.from_settings(await _reach(settings), settings)
        return await timers.check(apps, limit=limit, progress=_progress)

    report = _run(work)
    if as_json:
        _echo_json([finding.model_dump(mode="json") for finding in report.findings])
    else:
        for finding in report.findings:
            typer.echo(finding.line())
    typer.echo(f"# {report.summary()}", err=True)
    if not report.passed(strict=strict):
        raise typer.Exit(1)


async def _reach(settings: Settings) -> Client:
    """Connect for a check: Temporal out of reach is exit 2, not 1, which says "refused"."""
    try:
        return await _connect(settings)
    except _CommandError as error:
        raise _CommandError(str(error), 2) from None


def _progress(read: int) -> None:
    typer.echo(f"# {read} running timers read", err=True)


@timers_app.command("retry")
def timers_retry(
    workflow_id: str, address: _Address = None, namespace: _Namespace = None
) -> None:
    """Retry a parked timer's delivery now (same request id)."""
    _operate(workflow_id, "retry", address, namespace)


@timers_app.command("cancel")
def timers_cancel(
    workflow_id: str, address: _Address = None, namespace: _Namespace = None
) -> None:
    """Cancel a pending or parked timer."""
    _operate(workflow_id, "cancel", address, namespace)


def _operate(
    workflow_id: str, operation: str, address: str | None, namespace: str | None
) -> None:
    from wow_temporal.timers.client import TimerClient

    settings = _settings(address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

    async def work() -> None:
        timers = TimerClient.from_settings(await _connect(settings), settings)
        state = await getattr(timers, operation)(workflow_id)
        typer.echo(f"{workflow_id}: {_outcome(state)}")

    _run(work)


def _outcome(state: TimerState) -> str:
    """What an operation did, in words that stay true: a retried slot is delivered again at
    once (the state the update answers still says `Scheduled`, a moment before `Delivering`)."""
    from wow_temporal.timers.core import Status

    if state.status is Status.SCHEDULED and state.pending is not None:
        slot = state.pending
        return f"retried: slot {slot.slot} is being delivered again (request id {slot.request_id})"
    return state.status.value

