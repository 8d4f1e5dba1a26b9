"""Who may call: bearer tokens (the operator's reaches every tenant, a tenant's only its own),
the ASGI guard that checks them before anything else is read and caps the body size, the
`CallerDep` dependency through which a route learns its caller, and `TenantScope`, the tenant
a request acts on, worked out once from its caller and the tenant it names.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wow_temporal.api.errors import ApiError, error_response

_CALLER_KEY = "wow.caller"


@dataclass(frozen=True)
class Caller:
    """Who is calling: `tenant` None reaches every tenant (the operator, or auth off)."""

    tenant: str | None


class Tokens:
    """The accepted bearer tokens, compared in constant time."""

    def __init__(self, token: str | None, tenant_tokens: Mapping[str, str] | None) -> None:
        if token is not None and not token:
            raise ValueError("the operator token must not be empty (use None to turn auth off)")
        self._all: list[tuple[bytes, Caller]] = []
        if token is not None:
            self._all.append((token.encode(), Caller(tenant=None)))
        for tenant_token, tenant in (tenant_tokens or {}).items():
            if not tenant_token:
                raise ValueError(f"the token of tenant {tenant!r} must not be empty")
            if tenant_token == token:
                raise ValueError(f"tenant {tenant!r} has the operator's token")
            self._all.append((tenant_token.encode(), Caller(tenant=tenant)))

    @property
    def enabled(self) -> bool:
        return bool(self._all)

    def caller(self, presented: str) -> Caller | None:
        """The caller a token belongs to, or None; every token is compared (no early exit)."""
        found = None
        given = presented.encode()
        for token, caller in self._all:
            if hmac.compare_digest(given, token):
                found = caller
        return found


class _BodyTooLarge(StarletteHTTPException):
    """Raised from `receive` when a body without a Content-Length grows past the limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")


class Guard:
    """ASGI middleware: bearer auth before anything else is read, then the body size limit.

    `public` paths (exact) and paths under `public_prefixes` need no token.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: Tokens,
        public: frozenset[str],
        public_prefixes: tuple[str, ...] = (),
        max_body_bytes: int,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.public = public
        self.public_prefixes = public_prefixes
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        path: str = scope["path"]
        root: str = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :] or "/"
        if path in self.public or path.startswith(self.public_prefixes):
            caller: Caller | None = Caller(tenant=None)
        else:
            problem = self._authenticate(headers.get("authorization"))
            if isinstance(problem, JSONResponse):
                await problem(scope, receive, send)
                return
            caller = problem
        scope[_CALLER_KEY] = caller

        length = headers.get("content-length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_body_bytes:
            too_large = error_response(
                413,
                "ContentTooLarge",
                f"the request body is {int(length)} bytes, more than the "
                f"{self.max_body_bytes} allowed",
            )
            await too_large(scope, receive, send)
            return

        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise _BodyTooLarge(self.max_body_bytes)
            return message

        await self.app(scope, limited, send)

    def _authenticate(self, authorization: str | None) -> Caller | JSONResponse:
        if not self.tokens.enabled:
            return Caller(tenant=None)
        scheme, _, presented = (authorization or "").strip().partition(" ")
        if not authorization or scheme.lower() != "bearer" or not presented.strip():
            return error_response(
                401,
                "Unauthorized",
                "this route needs 'Authorization: Bearer <token>'",
                {"WWW-Authenticate": "Bearer"},
            )
        caller = self.tokens.caller(presented.strip())
        if caller is None:
            return error_response(
                401,
                "Unauthorized",
                "the bearer token is not valid",
                {"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        return caller


_bearer = HTTPBearer(
    auto_error=False,
    description="The operator's token (WOW_API_TOKEN) or a tenant's token.",
)


async def _caller(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
) -> Caller:
    """The caller the guard authenticated (the Security part declares the scheme in OpenAPI)."""
    caller = request.scope.get(_CALLER_KEY)
    if not isinstance(caller, Caller):
        raise ApiError(401, "Unauthorized", "not authenticated", {"WWW-Authenticate": "Bearer"})
    return caller


CallerDep = Annotated[Caller, Depends(_caller)]
"""A route parameter that is the authenticated caller (and marks the route as needing a token)."""


@dataclass(frozen=True)
class TenantScope:
    """The tenant a request acts on: a tenant's token acts on its own (naming another is 403),
    the operator's on the tenant the request names, or on every tenant (`tenant` None).

    Routes get one from a dependency (`CallerScope`, or one that reads where the route names a
    tenant) and never work the tenant out themselves.
    """

    tenant: str | None
    caller: Caller

    @classmethod
    def of(cls, caller: Caller, *named: str | None) -> TenantScope:
        """The scope of a request naming `named` tenants (by path, header or query; None where
        it names none): 400 if they disagree, 403 if the caller does not reach the one named."""
        given = {value for value in named if value is not None}
        if len(given) > 1:
            raise ApiError(
                400, "InvalidRequest", f"the request names more than one tenant: {sorted(given)}"
            )
        asked = next(iter(given), None)
        if caller.tenant is None:
            return cls(asked, caller)
        if asked is not None and asked != caller.tenant:
            raise ApiError(
                403,
                "Forbidden",
                f"this token reaches only tenant {caller.tenant!r}, not {asked!r}",
            )
        return cls(caller.tenant, caller)

    def reaches(self, tenant: str) -> bool:
        """Whether the caller may act on `tenant`'s objects."""
        return self.caller.tenant is None or tenant == self.caller.tenant


async def _caller_scope(caller: CallerDep) -> TenantScope:
    return TenantScope.of(caller)


CallerScope = Annotated[TenantScope, Depends(_caller_scope)]
"""A route parameter that is the caller's own scope: the tenant of a tenant's token, every
tenant for the operator (for routes that name no tenant, or check each object they get)."""
