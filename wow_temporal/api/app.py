"""`create_app`: the control API assembled from its parts (guard, error handlers, routes,
OpenAPI), over a `TimerClient` and a `JobClient`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fastapi import Depends, FastAPI

from wow_temporal.api.auth import Guard, Tokens
from wow_temporal.api.docs import ASSETS_URL, DOCS_URL, install_docs
from wow_temporal.api.errors import install_error_handlers
from wow_temporal.api.health import health_routes
from wow_temporal.api.jobs import job_router
from wow_temporal.api.openapi import install_openapi
from wow_temporal.api.params import declared_query_only
from wow_temporal.api.timers import timer_router
from wow_temporal.jobs.client import JobClient
from wow_temporal.timers.client import TimerClient

log = logging.getLogger(__name__)

_DESCRIPTION = """\
Control the durable scheduled commands of wow-temporal: hand over the
schedule events of commits (`POST /commits`), list, show, retry and cancel aggregate timers, and
enable, reschedule or disable recurring job instances (the spec's
`POST /{context}/schedule/{id}/wow.schedule.*` route).

Every route except `/health`, `/ready` and these docs needs `Authorization: Bearer <token>`.
The operator's token reaches every tenant; a tenant's token reaches only that tenant's timers
and jobs. Errors are JSON: `{"error": "<kind>", "message": "<what was wrong>"}`.
"""


def create_app(
    timers: TimerClient,
    *,
    token: str | None,
    tenant_tokens: Mapping[str, str] | None = None,
    max_body_bytes: int = 1_048_576,
    jobs: JobClient | None = None,
) -> FastAPI:
    """The control API over `timers` and `jobs` (None: a `JobClient` that knows no App, which
    operates existing job instances but creates none).

    `token` is the operator's bearer token (every tenant); `tenant_tokens` maps a token to the
    one tenant it reaches. No token at all turns auth off, for development only.
    """
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be at least 1, got {max_body_bytes}")
    tokens = Tokens(token, tenant_tokens)
    if not tokens.enabled:
        log.warning(
            "control API authentication is OFF: no WOW_API_TOKEN is set, anyone who can reach "
            "the port can control every tenant's timers (set one outside development)"
        )

    app = FastAPI(
        title="wow-temporal control API",
        description=_DESCRIPTION,
        version="0.1.0",
        docs_url=None,  # served by install_docs, from the app's own files
        redoc_url=None,
        dependencies=[Depends(declared_query_only)],
    )
    install_error_handlers(app)
    public = frozenset(path for path in ("/health", "/ready", app.openapi_url, DOCS_URL) if path)
    app.add_middleware(
        Guard,
        tokens=tokens,
        public=public,
        public_prefixes=(ASSETS_URL + "/",),
        max_body_bytes=max_body_bytes,
    )
    install_docs(app)
    app.include_router(health_routes(timers.client))
    app.state.timers = timers  # what the timer routes operate (`api.timers.Timers`)
    app.state.jobs = jobs if jobs is not None else JobClient(timers.client)
    app.include_router(timer_router)
    app.include_router(job_router)
    install_openapi(app)
    return app
