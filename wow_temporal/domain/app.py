"""`App`: one bounded context's domain code, with the recurring jobs its sagas declare."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from wow_temporal.domain._marks import marked
from wow_temporal.domain.aggregate import AggregateModel
from wow_temporal.domain.jobs import JOB_ATTRIBUTE, JobDefinition, check_handler
from wow_temporal.domain.saga import (
    EventHandler,
    RejectedHandler,
    event_handlers,
    rejected_handlers,
)
from wow_temporal.domain.upcasting import FIRST_REVISION, Upcaster, Upcasting, revision_of

__all__ = ["App", "Job", "load_app", "load_apps"]

_CONTEXT = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")


@dataclass(frozen=True, slots=True)
class Job:
    """A recurring job of an app: its definition and the saga method that handles its ticks."""

    definition: JobDefinition
    handler: Callable[..., Any]
    processor: str
    """The subscription, `<processor>.<function>` (e.g. `InventorySaga.on_schedule`)."""

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.handler)


class App:
    """A bounded context's domain: `App("eshop-order", aggregates=[Order], services=[policy])`.

    Aggregates are classes (`@aggregate`), read once; their functions get the `services` they
    take by type. `upcasters` (`@upcaster`) bring a command scheduled long ago to the revision
    its class declares now; a chain with a gap refuses the app, naming it. Sagas are instances
    of plain classes (their services injected by the user): their `@on_event`, `@on_rejected`
    and `@on_schedule` methods react to events, refusals and jobs' ticks. A duplicate or bad
    definition raises `ValueError` naming it.
    """

    def __init__(
        self,
        context: str,
        sagas: Iterable[object] = (),
        aggregates: Iterable[object] = (),
        services: Iterable[object] = (),
        upcasters: Iterable[Upcaster] = (),
    ) -> None:
        if not isinstance(context, str) or not _CONTEXT.fullmatch(context):
            raise ValueError(
                f"invalid context name {context!r}: use letters, digits, '_', '-' and '.'"
            )
        self.context = context
        self.sagas = tuple(sagas)
        self.aggregates = tuple(aggregates)
        self.services = tuple(services)
        jobs: dict[str, Job] = {}
        for saga in self.sagas:
            for job in _jobs_of(saga):
                if job.name in jobs:
                    raise ValueError(
                        f"job {job.name}: declared twice in context {context} "
                        f"({jobs[job.name].processor} and {job.processor})"
                    )
                jobs[job.name] = job
        self.jobs: Mapping[str, Job] = MappingProxyType(jobs)
        models: dict[str, AggregateModel] = {}
        for cls in self.aggregates:
            model = AggregateModel.of(cls, context)  # type: ignore[arg-type]
            name = model.named.aggregate_name
            if name in models:
                raise ValueError(
                    f"aggregate {name}: declared twice in context {context} "
                    f"({models[name].cls.__name__} and {model.cls.__name__})"
                )
            models[name] = model
        self.models: Mapping[str, AggregateModel] = MappingProxyType(models)
        self.bound = {name: model.bind(self.services) for name, model in models.items()}
        """For each aggregate, the services each of its functions takes."""
        self.event_handlers: tuple[EventHandler, ...] = tuple(
            handler for saga in self.sagas for handler in event_handlers(saga)
        )
        self.rejected_handlers: tuple[RejectedHandler, ...] = tuple(
            handler for saga in self.sagas for handler in rejected_handlers(saga)
        )
        self.upcasting = Upcasting(upcasters, _revisions(models.values()))
        """The upcasters, checked against the revisions the aggregates' commands are at."""

    def model(self, aggregate: str) -> AggregateModel:
        """The aggregate of that name; `KeyError` naming the known ones."""
        try:
            return self.models[aggregate]
        except KeyError:
            known = ", ".join(sorted(self.models)) or "none"
            raise KeyError(
                f"no aggregate {aggregate} in context {self.context} (aggregates: {known})"
            ) from None

    def job(self, name: str) -> Job:
        """The job of that name; `KeyError` naming the known ones."""
        try:
            return self.jobs[name]
        except KeyError:
            known = ", ".join(sorted(self.jobs)) or "none"
            raise KeyError(f"no job {name} in context {self.context} (jobs: {known})") from None

    def __repr__(self) -> str:
        return (
            f"App({self.context!r}, aggregates={sorted(self.models)}, jobs={sorted(self.jobs)})"
        )


def _revisions(models: Iterable[AggregateModel]) -> dict[str, str]:
    """Each command type the aggregates handle, with the revision its body class declares
    (the first when it declares none)."""
    return {
        kind: revision_of(function.command) or FIRST_REVISION
        for model in models
        for kind, function in model.functions.items()
    }


def _jobs_of(saga: object) -> list[Job]:
    if isinstance(saga, type):
        raise ValueError(
            f"sagas are instances: pass {saga.__name__}(...), not the class {saga.__name__}"
        )
    found = []
    cls = type(saga)
    for attribute, definition, _ in marked(cls, JOB_ATTRIBUTE):
        if not isinstance(definition, JobDefinition):
            continue
        handler = getattr(saga, attribute)
        check_handler(handler, definition.name, bound=True)
        found.append(Job(definition, handler, f"{cls.__name__}.{attribute}"))
    return found


def load_app(reference: str) -> App:
    """The one `App` that `module:attr` names (the current directory importable, as uvicorn
    does); `ValueError` saying what is wrong."""
    apps = load_apps(reference)
    if len(apps) != 1:
        raise ValueError(f"--app {reference!r}: names {len(apps)} apps, give one")
    return apps[0]


def load_apps(reference: str) -> list[App]:
    """The apps `module:attr` names: one `App`, a list or tuple of them, or a factory of either
    (several bounded contexts served together, as the e-shop's order and inventory are)."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"--app {reference!r}: give module:attr, e.g. myshop.inventory:app")
    import importlib
    import os
    import sys

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"--app {reference!r}: cannot import {module_name}: {error}") from None
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise ValueError(f"--app {reference!r}: {module_name} has no {attribute}")
        value = getattr(value, part)
    if callable(value) and not isinstance(value, (App, type)):
        try:
            value = value()  # a factory: `module:create_apps`
        except Exception as error:
            raise ValueError(
                f"--app {reference!r}: {attribute}() failed: {type(error).__name__}: {error}"
            ) from None
    apps = list(value) if isinstance(value, (list, tuple)) else [value]
    for app in apps:
        if not isinstance(app, App):
            raise ValueError(
                f"--app {reference!r}: {attribute} holds a {type(app).__name__}, not an App"
            )
    contexts = [app.context for app in apps]
    if len(set(contexts)) != len(contexts) or not apps:
        raise ValueError(f"--app {reference!r}: give one App per context (got {contexts})")
    return apps
