"""The HTTP control API: hand over commits, list, show, retry and cancel timers, control jobs.

`create_app` builds the FastAPI app over a `TimerClient` and a `JobClient`; `serve`
runs it on uvicorn. Every route but `/health` and the OpenAPI docs needs a bearer token: the
operator's token reaches every tenant, a tenant's token only its own tenant's timers and jobs.
Bad input always answers a 4xx `{"error": ..., "message": ...}`, never a 500.

Modules: `app` (assembly), `server` (uvicorn), `auth` (tokens, guard, caller, the `TenantScope`
a request acts on), `errors` (`ErrorBody` and the mapping of exceptions to it), `health`,
`timers` and `jobs` (routes at module level, over `app.state.timers` and `app.state.jobs`),
`openapi` (the document), `docs` (Swagger UI at `/docs`, from the app's own files).
"""

from __future__ import annotations

from wow_temporal.api.app import create_app
from wow_temporal.api.errors import ErrorBody
from wow_temporal.api.jobs import JobInfo, RescheduleRequest
from wow_temporal.api.server import serve

__all__ = [
    "ErrorBody",
    "JobInfo",
    "RescheduleRequest",
    "create_app",
    "serve",
]
