"""The timers: `apply` hands commits' schedule events to them, the `timers` group lists, shows,
retries and cancels them."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
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
    cut_line,
)
from wow_temporal.engine.listing import LIST_DEFAULT, LIST_LIMIT
from wow_temporal.engine.text import instant_text
from wow_temporal.model import InvalidCommitError, explain
from wow_temporal.timers.client import TimerInfo, TimerPage

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
        str | None,
        typer.Option(help="Scheduled, Parked, Delivered, Rejected, Cancelled, NeverDue, …"),
    ] = None,
    running: Annotated[bool | None, typer.Option("--running/--closed")] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=LIST_LIMIT, help=f"At most this many (1 to {LIST_LIMIT:,}).")
    ] = LIST_DEFAULT,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the answer of GET /timers: items, truncated.")
    ] = False,
    address: _Address = None,
    namespace: _Namespace = None,
) -> None:
    """List timers matching the filters, newest first (the same query works in the Web UI);
    a last line says when more matched than --limit."""
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
        raise _fail(f"--{explain(error)}") from None
    _configure_logging(settings, logging.WARNING)

    async def work() -> None:
        client = await _connect(settings)
        page = await TimerClient.from_settings(client, settings).page(where, limit=limit)
        if as_json:
            _echo_json(page)
            return
        typer.echo(f"# {where.query()}", err=True)
        for line in listing_lines(page):
            typer.echo(line)
        if page.truncated:
            typer.echo(truncated_line(page), err=True)

    _run(work)


LIST_HEADER = f"{'STATUS':<10} {'WHEN':<30} WORKFLOW ID"
"""The header of `timers list`: WHEN is `due …` while a timer runs, `ended …` once it ended."""


def listing_lines(page: TimerPage) -> list[str]:
    """`timers list`'s lines: a header, then one timer a line, its status, when it is due (or
    when it ended: an ended timer's due time is past and says nothing) and its workflow id."""
    lines = [LIST_HEADER]
    for info in page.items:
        lines.append(f"{info.status:<10} {_when(info):<30} {info.workflow_id}")
    return lines


def _when(info: TimerInfo) -> str:
    if info.ended is not None:
        return f"ended {instant_text(info.ended)}"
    if info.due is not None:
        return f"due {instant_text(info.due)}"
    return "never due" if info.running else "-"


def truncated_line(page: TimerPage) -> str:
    """Said when the listing was cut at `--limit`."""
    return cut_line(page.limit)


@timers_app.command("show")
def timers_show(
    workflow_id: str,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the answer of GET /timers/{workflowId}.")
    ] = False,
    address: _Address = None,
    namespace: _Namespace = None,
) -> None:
    """Show one timer: status, aggregate, key, command and target, due and end times, counts
    and the last outcome (`--json`: in full, as the control API answers)."""
    from wow_temporal.timers.client import TimerClient

    _timer_id(workflow_id)
    settings = _settings(address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

    async def work() -> None:
        client = await _connect(settings)
        info = await TimerClient.from_settings(client, settings).show(workflow_id)
        if as_json:
            _echo_json(info)
            return
        for line in show_lines(info):
            typer.echo(line)

    _run(work)


def show_lines(info: TimerInfo) -> list[str]:
    """`timers show`'s text: one fact a line, each named, as `schedule show` prints a job."""
    lines = [f"{info.workflow_id}: {info.status}"]

    def add(name: str, text: str) -> None:
        lines.append(f"  {name:<11} {text}")

    tenant = f", tenant {info.tenant}" if info.tenant else ""
    add("aggregate", f"{info.aggregate} {info.aggregate_id}{tenant}")
    add("key", info.key)
    state = info.state
    spec = state.spec if state is not None else None
    if spec is not None:
        revision = f" (revision {spec.command.revision})" if spec.command.revision else ""
        add("command", f"{spec.command.type}{revision} → {spec.target}")
        add("rule", spec.rule.describe())
        add("set by", f"commit {spec.upstream_id}")
    add("due", _due(info))
    if info.ended is not None:
        add("ended", instant_text(info.ended))
    if state is None:
        add("state", "not known: no worker answered" if info.running else "not known")
    else:
        _state_lines(state, add)
    for text in info.waiting:
        add("waiting", text)
    return lines


def _due(info: TimerInfo) -> str:
    state = info.state
    if state is not None and state.pending is not None:
        pending = state.pending
        return (
            f"{instant_text(pending.due)} (slot {pending.slot}, request id "
            f"{pending.request_id}, {pending.skipped} skipped)"
        )
    due = info.due or (state.next_due if state is not None else None)
    if due is not None:
        return instant_text(due)
    return "never" if info.running else "- (ended)"


def _state_lines(state: TimerState, add: Callable[[str, str], None]) -> None:
    """The counts with their names, and what happened last."""
    add("delivered", f"{state.delivered} command(s) the host decided Ok")
    add("rejected", f"{state.rejected} command(s) the host refused")
    version, index = state.applied
    if version > 0:
        add("applied", f"commit version {version}, schedule event {index} (the last change "
            "applied: an older or equal one changes nothing)")
    if state.last_outcome:
        add("last", state.last_outcome)
    if state.parked_error:
        add("parked", state.parked_error)
    if state.last_change:
        add("change", state.last_change)
    if state.unreadable:
        add("unreadable", f"{state.unreadable} change(s) refused: {state.last_unreadable}")


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

    _timer_id(workflow_id)
    settings = _settings(address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

    async def work() -> None:
        timers = TimerClient.from_settings(await _connect(settings), settings)
        state = await getattr(timers, operation)(workflow_id)
        typer.echo(f"{workflow_id}: {_outcome(state)}")

    _run(work)


def _timer_id(workflow_id: str) -> None:
    """A malformed timer id is bad input (exit 2), said before Temporal is reached."""
    from wow_temporal.timers.client import TimerError, check_timer_id

    try:
        check_timer_id(workflow_id)
    except TimerError as error:
        raise _fail(str(error)) from None


def _outcome(state: TimerState) -> str:
    """What an operation did, in words that stay true: a retried slot is delivered again at
    once (the state the update answers still says `Scheduled`, a moment before `Delivering`)."""
    from wow_temporal.timers.core import Status

    if state.status is Status.SCHEDULED and state.pending is not None:
        slot = state.pending
        return f"retried: slot {slot.slot} is being delivered again (request id {slot.request_id})"
    return state.status.value

