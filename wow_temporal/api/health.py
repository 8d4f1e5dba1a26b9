"""Liveness: `/health` answers as long as the API process does (it does not ask Temporal)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel


class Health(BaseModel):
    """The liveness answer."""

    status: Literal["ok"] = "ok"


def health_routes() -> APIRouter:
    """The public `/health` route."""
    router = APIRouter(tags=["health"])

    @router.get("/health")
    async def health() -> Health:
        """Liveness: the API process answers (it does not ask Temporal)."""
        return Health()

    return router
