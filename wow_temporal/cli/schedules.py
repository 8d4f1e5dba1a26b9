"""The `schedule` group: list, show, enable, disable, reschedule, reset and retry the instances
of recurring jobs."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from wow_temporal.cli._common import (
    _Address,
    _configure_logging,
    _connect,
    _echo_json,
    _fail,
    _jobs,
    _load_app,
    _Namespace,
    _run,
    _settings,
    cut_line,
)
from wow_temporal.engine import zoned_text
from wow_temporal.engine.listing import LIST_DEFAULT, LIST_LIMIT
from wow_temporal.model import InvalidScheduleError, explain, validate_key, zone_info

if TYPE_CHECKING:
    from wow_temporal.jobs.client import JobInfo
    from wow_temporal.jobs.core import RuleField


class _NoLayer:
    """An absent layer, described as the empty one is."""

    @staticmethod
    def describe() -> str:
        return "nothing"


_EMPTY = _NoLayer()

schedule_app = typer.Typer(
    no_args_is_help=True,
    help="List, show, enable, disable, reschedule, reset and retry recurring job instances.",
)

_Context = Annotated[str, typer.Argument(help="The bounded context, e.g. eshop-inventory.")]
_Name = Annotated[str, typer.Argument(help="The job's name, e.g. receive-deliveries.")]
_Tenant = Annotated[
    str | None, typer.Option(help="The tenant of a TENANT job's instance.")
]
_Partition = Annotated[
    int | None, typer.Option(min=0, help="The partition of a sharded job's instance.")
]
_Json = Annotated[bool, typer.Option("--json", help="Print the instance as JSON.")]
_AppRef = Annotated[
    str | None,
    typer.Option("--app", help="module:attr of the App, to create an instance that is not there."),
]


@schedule_app.command("list")
def schedule_list(
    context: Annotated[str | None, typer.Option(help="Only this context's jobs.")] = None,
    name: Annotated[str | None, typer.Option("--job", help="Only this job.")] = None,
    tenant: _Tenant = None,
    status: Annotated[str | None, typer.Option(help="Enabled, Disabled or Parked.")] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=LIST_LIMIT, help=f"At most this many (1 to {LIST_LIMIT:,}).")
    ] = LIST_DEFAULT,
    as_json: _Json = False,
    address: _Address = None,
    namespace: _Namespace = None,
) -> None:
    """List the running job instances (as visibility lists them: it may lag a second)."""
    from wow_temporal.jobs.client import JobFilter

    try:
        where = JobFilter(context=context, name=name, tenant=tenant, status=status)
    except ValidationError as error:
        raise _fail(f"--{explain(error)}") from None
    settings = _settings(address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

    async def work() -> None:
        jobs = _jobs(await _connect(settings), settings, None)
        page = await jobs.page(where, limit=limit)
        if as_json:
            _echo_json(page.model_dump(mode="json"))
            return
        typer.echo(f"{'STATUS':<9} WORKFLOW ID")
        for info in page.items:
            typer.echo(f"{info.status:<9} {info.workflow_id}")
        if page.truncated:
            typer.echo(cut_line(page.limit), err=True)

    _run(work)


@schedule_app.command("show")
def schedule_show(
    context: _Context, name: _Name, tenant: _Tenant = None, partition: _Partition = None,
    as_json: _Json = False,
    address: _Address = None, namespace: _Namespace = None,
) -> None:
    """Show one instance: the rule in force and where it comes from, next due times, last ticks."""
    _job_operation(
        "show", context, name, tenant, partition, None, as_json, None,
        address=address, namespace=namespace,
    )


@schedule_app.command("enable")
def schedule_enable(
    context: _Context, name: _Name, tenant: _Tenant = None, partition: _Partition = None,
    as_json: _Json = False,
    address: _Address = None, namespace: _Namespace = None, app_ref: _AppRef = None,
) -> None:
    """Enable an instance (wow.schedule.enable): ticks from the next due time after now."""
    _job_operation(
        "enable", context, name, tenant, partition, None, as_json, app_ref,
        address=address, namespace=namespace,
    )


@schedule_app.command("disable")
def schedule_disable(
    context: _Context, name: _Name, tenant: _Tenant = None, partition: _Partition = None,
    as_json: _Json = False,
    address: _Address = None, namespace: _Namespace = None,
) -> None:
    """Disable an instance (wow.schedule.disable): in force when this returns."""
    _job_operation(
        "disable", context, name, tenant, partition, None, as_json, None,
        address=address, namespace=namespace,
    )


@schedule_app.command("reschedule")
def schedule_reschedule(
    context: _Context,
    name: _Name,
    expression: Annotated[
        str | None, typer.Option(help='Six-field Spring cron, e.g. "0 0 6 * * *".')
    ] = None,
    zone: Annotated[str | None, typer.Option(help="IANA zone the expression is read in.")] = None,
    misfire: Annotated[
        str | None, typer.Option(help="COALESCE or CATCH_UP (any case).")
    ] = None,
    tenant: _Tenant = None,
    partition: _Partition = None,
    as_json: _Json = False,
    address: _Address = None,
    namespace: _Namespace = None,
) -> None:
    """Give an instance its own rule (wow.schedule.reschedule): any of expression, zone, misfire
    (above the host's override; `schedule reset` removes it)."""
    from wow_temporal.jobs.core import RuleLayer, reschedule_refusal

    try:
        rule = RuleLayer.model_validate(
            {"expression": expression, "zone": zone, "misfire": misfire}
        )
    except ValidationError as error:
        raise _fail(explain(error)) from None
    problem = "give at least one of --expression, --zone or --misfire" if rule.empty else (
        reschedule_refusal(rule)
    )
    if problem is not None:
        raise _fail(problem)
    _job_operation(
        "reschedule", context, name, tenant, partition, rule, as_json, None,
        address=address, namespace=namespace,
    )


@schedule_app.command("reset")
def schedule_reset(
    context: _Context,
    name: _Name,
    fields: Annotated[
        list[str] | None,
        typer.Option(
            "--field",
            help="Remove only this field of the instance's own rule: expression, zone or "
            "misfire (repeat it for more); none: all of it.",
        ),
    ] = None,
    tenant: _Tenant = None,
    partition: _Partition = None,
    as_json: _Json = False,
    address: _Address = None,
    namespace: _Namespace = None,
) -> None:
    """Remove an instance's own rule (wow.schedule.reset): the host's override, or the code's,
    is in force again, next due counted from now. Nothing to remove: shown as it is."""
    from wow_temporal.jobs.core import RULE_FIELDS

    wanted = None
    if fields:
        wanted = [f.strip().lower() for f in fields]
        unknown = [f for f in wanted if f not in RULE_FIELDS]
        if unknown:
            raise _fail(f"--field {unknown[0]!r}: use expression, zone or misfire")
    _job_operation(
        "reset", context, name, tenant, partition, None, as_json, None,
        address=address, namespace=namespace, fields=wanted,
    )


@schedule_app.command("retry")
def schedule_retry(
    context: _Context, name: _Name, tenant: _Tenant = None, partition: _Partition = None,
    as_json: _Json = False,
    address: _Address = None, namespace: _Namespace = None,
) -> None:
    """Retry an instance's parked tick (same request ids); later slots follow by the policy."""
    _job_operation(
        "retry", context, name, tenant, partition, None, as_json, None,
        address=address, namespace=namespace,
    )


def _job_operation(
    operation: str,
    context: str,
    name: str,
    tenant: str | None,
    partition: int | None,
    rule: Any,
    as_json: bool,
    app_ref: str | None,
    *,
    address: str | None,
    namespace: str | None,
    fields: list[str] | None = None,
) -> None:
    try:
        validate_key(name, "job name")
    except InvalidScheduleError as error:
        raise _fail(str(error)) from None
    domain = _load_app(app_ref)
    if domain is not None and domain.context != context:
        raise _fail(f"--app {app_ref}: its context is {domain.context}, not {context}")
    settings = _settings(domain, address=address, namespace=namespace)
    _configure_logging(settings, logging.WARNING)

    async def work() -> None:
        jobs = _jobs(await _connect(settings), settings, domain)
        where: dict[str, Any] = {"tenant": tenant, "partition": partition}
        if rule is not None:
            info = await jobs.reschedule(context, name, rule, **where)
        elif operation == "reset":
            info = await jobs.reset(context, name, _rule_fields(fields), **where)
        else:
            info = await getattr(jobs, operation)(context, name, **where)
        _echo_job(info, as_json)

    _run(work)


def _rule_fields(fields: list[str] | None) -> list[RuleField] | None:
    """`--field`s as the rule's field names (checked already)."""
    from wow_temporal.jobs.core import RULE_FIELDS

    return None if fields is None else [f for f in RULE_FIELDS if f in fields]


def _echo_layers(info: JobInfo) -> None:
    """The layers, lowest first (each field comes from the highest that sets it), and each
    field of the host's override the instance's own layer hides."""
    if info.code is None:
        return
    owner = "tenant" if info.tenant not in (None, "(0)") else "operator"
    typer.echo(
        f"  layers    code {info.code.expression} {info.code.zone} {info.code.misfire.value}"
        f" < host {(info.host or _EMPTY).describe()} < {owner} {(info.own or _EMPTY).describe()}"
    )
    for text in info.shadowed:
        typer.echo(f"  shadowed  {text}")


def _echo_job(info: JobInfo, as_json: bool) -> None:
    if as_json:
        _echo_json(info)
        return
    typer.echo(f"{info.workflow_id}: {info.status}")
    if info.expression is not None:
        sources = info.sources
        typer.echo(
            f"  rule      {info.expression} ({sources.get('expression')}), zone {info.zone} "
            f"({sources.get('zone')}), misfire {info.misfire} ({sources.get('misfire')})"
        )
    _echo_layers(info)
    if info.processor:
        typer.echo(f"  handler   {info.processor}, next slot {info.next_slot}")
    zone = zone_info(info.zone or "UTC")
    for due in info.next_due:
        typer.echo(f"  next      {zoned_text(due, zone)}")
    if info.parked:
        typer.echo(f"  parked    {info.parked}")
    for record in info.recent[-5:]:
        typer.echo(
            f"  slot {record.slot:<4} {zoned_text(record.due, zone)} "
            f"{record.outcome} ({record.commands} commands, skipped {record.skipped})"
            + (f": {record.detail}" if record.detail else "")
        )
    for text in info.notices:
        typer.echo(f"  notice    {text}")
    if info.note:
        typer.echo(f"  note      {info.note}")

