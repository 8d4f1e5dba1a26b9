"""The OpenAPI document at `/openapi.json`: FastAPI's, plus the commit models that
`POST /commits` reads by hand, and without FastAPI's 422 (invalid input answers 400 here).
The guard's answers (401 where a token is needed, 413 everywhere) are declared on every
operation. The document is also the contract requests are held to: `params.declared_query_only`
refuses a query parameter it does not declare for the route.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue

from wow_temporal.api.errors import GUARD_RESPONSES
from wow_temporal.api.timers import COMMITS_SCHEMA
from wow_temporal.model import Commit

_COMMITS_BODY = TypeAdapter(Commit | list[Commit])
_ERROR_CONTENT = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}


class _ExamplesAsWritten(GenerateJsonSchema):
    """Pydantic's generator, but an example keeps its keys in the order it was written.

    Pydantic sorts every key but those of `properties` and `default`; a sorted example commit
    reads `aggregateId` first and an event's `body` before its `name`.
    """

    def sort(self, value: JsonSchemaValue, parent_key: str | None = None) -> JsonSchemaValue:
        found: JsonSchemaValue = _sorted(value, parent_key)
        return found


def _sorted(value: Any, parent_key: str | None) -> Any:
    if parent_key == "examples":
        return value
    if isinstance(value, list):
        return [_sorted(item, parent_key) for item in value]
    if not isinstance(value, dict):
        return value
    keys = value if parent_key in ("properties", "default") else sorted(value)
    return {key: _sorted(value[key], key) for key in keys}


def _commit_schemas(existing: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAPI components for the `POST /commits` body (`Commits`), in validation mode.

    A model FastAPI already documents differently (its output shape) gets an `-Input` name.
    """
    prefix = "#/components/schemas/"
    schema = _COMMITS_BODY.json_schema(
        ref_template=prefix + "{model}", schema_generator=_ExamplesAsWritten
    )
    defs: dict[str, Any] = schema.pop("$defs", {})
    renamed = {
        name: f"{name}-Input" for name in defs if existing.get(name, defs[name]) != defs[name]
    }
    text = json.dumps({"defs": defs, "root": schema})
    for name, new in renamed.items():
        text = text.replace(f'"{prefix}{name}"', f'"{prefix}{new}"')
    result = json.loads(text)
    found: dict[str, Any] = {
        renamed.get(name, name): value for name, value in result["defs"].items()
    }
    found[COMMITS_SCHEMA] = {"title": COMMITS_SCHEMA, **result["root"]}
    return found


def _operation(path: str, method: str) -> str:
    """An OpenAPI `operationRef` to the operation at `path` and `method` of this document."""
    return "#/paths/" + path.replace("~", "~0").replace("/", "~1") + "/" + method


def _timer_links(pointer: str) -> dict[str, Any]:
    """Links from an answer naming a timer at `pointer` to showing, retrying and cancelling it."""
    return {
        name: {
            "operationRef": _operation(path, method),
            "parameters": {"workflowId": f"$response.body#{pointer}/workflowId"},
        }
        for name, path, method in (
            ("ShowTimer", "/timers/{workflowId}", "get"),
            ("RetryTimer", "/timers/{workflowId}/retry", "post"),
            ("CancelTimer", "/timers/{workflowId}/cancel", "post"),
        )
    }


_JOB_OPERATIONS = (
    ("ShowJob", "", "get"),
    ("EnableJob", "/wow.schedule.enable", "post"),
    ("DisableJob", "/wow.schedule.disable", "post"),
    ("RescheduleJob", "/wow.schedule.reschedule", "post"),
    ("RetryJob", "/retry", "post"),
)
"""What can be done to a SYSTEM job instance, by the suffix of `/{context}/schedule/{id}`."""


def _job_links(pointer: str) -> dict[str, Any]:
    """Links from an answer naming a SYSTEM job instance at `pointer` to what can be done to it."""
    return {
        name: {
            "operationRef": _operation(f"/{{context}}/schedule/{{id}}{suffix}", method),
            "parameters": {
                "context": f"$response.body#{pointer}/context",
                "id": f"$response.body#{pointer}/name",
            },
        }
        for name, suffix, method in _JOB_OPERATIONS
    }


_LINKS: dict[tuple[str, str], dict[str, Any]] = {
    ("/commits", "post"): _timer_links("/0"),
    ("/timers", "get"): _timer_links("/items/0"),
    ("/timers/{workflowId}", "get"): _timer_links(""),
    ("/schedules", "get"): _job_links("/items/0"),
    **{
        (f"/{{context}}/schedule/{{id}}{suffix}", method): _job_links("")
        for _, suffix, method in _JOB_OPERATIONS
    },
}
"""OpenAPI links: which answer names a timer or a job instance that other operations take,
for clients that follow them and for Schemathesis' stateful phase."""


def _add_links(paths: dict[str, Any]) -> None:
    for (path, method), links in _LINKS.items():
        paths[path][method]["responses"]["200"]["links"] = links


def install_openapi(app: FastAPI) -> None:
    """Serve this document (built once, on first request) as the app's OpenAPI."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(_commit_schemas(components))
            # Invalid input answers 400 with an ErrorBody here, never FastAPI's 422; the
            # guard's answers (401 where a token is needed, 413 everywhere) are declared.
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    answers = operation.setdefault("responses", {})
                    answers.pop("422", None)
                    for code, text in GUARD_RESPONSES.items():
                        if code == "401" and not operation.get("security"):
                            continue
                        answers.setdefault(code, {**text, "content": _ERROR_CONTENT})
            components.pop("HTTPValidationError", None)
            components.pop("ValidationError", None)
            _add_links(schema.get("paths", {}))
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
