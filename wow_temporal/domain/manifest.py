"""The manifest: each function's command, the services it takes, what it produces and schedules,
and the jobs' rules, as
JSON (`wow-temporal manifest --app module:attr`), since no compiler reads a function's body."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from wow_temporal.domain.app import App

__all__ = ["manifest"]


def manifest(apps: Iterable[App]) -> dict[str, Any]:
    """Each context's aggregates (command functions), sagas (event and rejection handlers) and
    jobs, with the types they take, produce and schedule."""
    return {"contexts": [_context(app) for app in apps]}


def _context(app: App) -> dict[str, Any]:
    aggregates = []
    for name, model in sorted(app.models.items()):
        aggregates.append(
            {
                "aggregate": f"{app.context}.{name}",
                "class": model.cls.__qualname__,
                "state": model.state_cls.__qualname__,
                "functions": [
                    {
                        "function": function.name,
                        "command": function.command_type,
                        "creates": function.create or function.allow_create,
                        "takes": [getattr(t, "__name__", str(t)) for t in function.extras],
                        "produces": list(function.produces),
                        "schedules": list(function.schedules),
                    }
                    for function in sorted(model.functions.values(), key=lambda f: f.name)
                ],
                "sourcing": sorted(model.sourcing),
            }
        )
    sagas: dict[str, dict[str, Any]] = {}
    for handler in app.event_handlers:
        saga = sagas.setdefault(handler.processor, {"saga": handler.processor, "functions": []})
        saga["functions"].append(
            {
                "function": handler.name,
                "event": handler.event_name,
                "schedules": list(handler.schedules),
            }
        )
    for rejected in app.rejected_handlers:
        saga = sagas.setdefault(rejected.processor, {"saga": rejected.processor, "functions": []})
        saga["functions"].append(
            {"function": rejected.name, "rejected": list(rejected.command_types) or ["*"]}
        )
    jobs = [
        {
            "name": job.name,
            "function": job.processor,
            "cron": job.definition.cron,
            "zone": job.definition.zone,
            "scope": job.definition.scope.value,
            "sharded": job.definition.sharded,
            "misfire": job.definition.misfire.value,
        }
        for job in sorted(app.jobs.values(), key=lambda j: j.name)
    ]
    return {
        "context": app.context,
        "aggregates": aggregates,
        "sagas": sorted(sagas.values(), key=lambda s: s["saga"]),
        "jobs": jobs,
    }
