"""Liveness and readiness: `/health` answers as long as the API process does (it does not ask
Temporal); `/ready` answers 200 only while Temporal answers a cheap call, 503 otherwise.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel
from temporalio.client import Client

from wow_temporal.api.errors import ApiError, ErrorBody
from wow_temporal.connection import probe

READY_TIMEOUT = timedelta(seconds=2)
"""How long `/ready` waits for Temporal before answering 503."""


class Health(BaseModel):
    """The liveness answer."""

    status: Literal["ok"] = "ok"


class Ready(BaseModel):
    """The readiness answer: Temporal answered, at this address and namespace."""

    status: Literal["ok"] = "ok"
    temporal: str
    """The Temporal frontend's address, as the API connects to it."""
    namespace: str


def health_routes(client: Client) -> APIRouter:
    """The public `/health` and `/ready` routes (`client`: the Temporal connection to check)."""
    router = APIRouter(tags=["health"])

    @router.get("/health")
    async def health() -> Health:
        """Liveness: the API process answers (it does not ask Temporal)."""
        return Health()

    @router.get(
        "/ready",
        responses={503: {"model": ErrorBody, "description": "Temporal does not answer"}},
    )
    async def ready() -> Ready:
        """Readiness: Temporal answers a cheap call (its system info) within two seconds."""
        reason = await probe(client, READY_TIMEOUT)
        if reason is not None:
            raise ApiError(503, "TemporalUnavailable", reason)
        return Ready(temporal=client.service_client.config.target_host, namespace=client.namespace)

    return router
