"""Every answer other than 2xx: the `ErrorBody` JSON, the exception routes raise, and the
handlers that turn FastAPI's, Starlette's and Temporal's exceptions into it (never a bare 500).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

from wow_temporal.errors import WowTemporalError

log = logging.getLogger(__name__)


class ErrorBody(BaseModel):
    """Every error answer: a stable kind and a message naming what was wrong."""

    error: str
    message: str


class ApiError(WowTemporalError):
    """An answer other than 2xx, raised anywhere in a route."""

    def __init__(
        self, status: int, error: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.headers = dict(headers or {})


_KINDS = {
    400: "InvalidRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    413: "ContentTooLarge",
    415: "UnsupportedMediaType",
}


def error_response(
    status: int, error: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The `ErrorBody` answer, for code outside a route (middleware, handlers)."""
    return JSONResponse(
        ErrorBody(error=error, message=message).model_dump(),
        status_code=status,
        headers=dict(headers or {}),
    )


def _validation_message(error: RequestValidationError) -> str:
    """`where: what` for the first problems of a request, as the caller wrote the names."""
    parts = []
    for item in list(error.errors())[:3]:
        loc = [str(p) for p in item.get("loc", ()) if p not in ("body", "query", "path")]
        message = str(item.get("msg", "invalid")).removeprefix("Value error, ")
        if item.get("type") == "json_invalid":
            message = f"not JSON: {item.get('ctx', {}).get('error', message)}"
            loc = []
        parts.append(f"{'.'.join(loc)}: {message}" if loc else message)
    return "; ".join(parts) or "invalid request"


def _rpc_error(error: RPCError) -> ApiError:
    """Temporal could not be asked (503) or refused the call (502)."""
    if error.status in (
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.CANCELLED,
    ):
        return ApiError(503, "TemporalUnavailable", f"Temporal is unavailable: {error.message}")
    return ApiError(502, "TemporalError", f"Temporal refused the call: {error.message}")


def install_error_handlers(app: FastAPI) -> None:
    """Answer every exception a route or FastAPI raises with an `ErrorBody`."""

    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.error, exc.message, exc.headers)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        kind = _KINDS.get(exc.status_code, "HttpError")
        return error_response(exc.status_code, kind, str(exc.detail), exc.headers)

    async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(400, "InvalidRequest", _validation_message(exc))

    async def temporal_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RPCError)
        mapped = _rpc_error(exc)
        log.warning("%s %s: %s", request.method, request.url.path, mapped.message)
        return error_response(mapped.status, mapped.error, mapped.message)

    async def update_timeout(request: Request, exc: Exception) -> JSONResponse:
        return error_response(
            503, "TemporalUnavailable", "Temporal did not complete the update in time"
        )

    async def runtime_error(request: Request, exc: Exception) -> JSONResponse:
        if "client connect" in str(exc):  # a lazy client that cannot reach Temporal
            message = f"Temporal is unavailable: {exc}"
            log.warning("%s %s: %s", request.method, request.url.path, message)
            return error_response(503, "TemporalUnavailable", message)
        return await unexpected(request, exc)

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
        return error_response(500, "InternalError", f"internal error: {type(exc).__name__}")

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(RPCError, temporal_error)
    app.add_exception_handler(WorkflowUpdateRPCTimeoutOrCancelledError, update_timeout)
    app.add_exception_handler(RuntimeError, runtime_error)
    app.add_exception_handler(Exception, unexpected)


_COMMON: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in (
        (400, "Bad input; the message says what"),
        (502, "Temporal refused the call"),
        (503, "Temporal is unavailable"),
    )
}
_TEXTS = {
    403: "Another tenant's data",
    404: "Not found",
    409: "Not possible in the current state",
}

GUARD_RESPONSES: dict[str, dict[str, str]] = {
    "401": {"description": "Missing or invalid bearer token"},
    "413": {"description": "Body too large"},
    "400": {"description": "Invalid request (an undeclared or repeated query parameter, …)"},
}
"""What the guard answers before any route is reached (401 only where a token is needed; 400
for a query parameter the route does not declare): the OpenAPI document declares them on
every operation it guards, where the route does not already."""


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error answers a route that asks Temporal documents in OpenAPI: the common ones
    (bad input, Temporal refusing or unavailable) plus `codes`; the guard's are added to
    every operation by the document itself."""
    extra: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorBody, "description": _TEXTS[code]} for code in codes
    }
    return {**_COMMON, **extra}
