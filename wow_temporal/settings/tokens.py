"""Bearer tokens in settings: the operator's, each tenant's (inline or from a mounted file),
checked at load. Every message names the tenant and what is wrong, never the token: messages
reach logs."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

from wow_temporal.settings.values import blank_is_none

__all__ = ["OperatorToken", "TenantTokens", "TenantTokensFile", "TokensFile", "not_the_operator"]


def _token(value: Any) -> str | None:
    """The operator's token: blank is "not set"; a YAML number is refused, not reformatted."""
    value = blank_is_none(value)
    if value is None:
        return None
    return _checked_token(value, "")


def _checked_token(value: Any, whose: str) -> str:
    """A non-empty string token without surrounding whitespace (which no request could send)."""
    if not isinstance(value, str):
        raise ValueError(f"{whose}must be a string, got {type(value).__name__} (quote it in YAML)")
    if not value.strip():
        raise ValueError(f"{whose}must not be empty")
    if value != value.strip():
        raise ValueError(f"{whose}must not start or end with whitespace")
    return value


def _tenant_token_map(value: Any) -> dict[str, tuple[str, ...]]:
    """Tenant id -> its tokens, from `{t1: token}` or `{t1: [new, old]}` (several to rotate).

    No token may be shared by two tenants: the API could not tell which tenant is calling.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(
            "must be a mapping of tenant id to token (or to a list of tokens), "
            f"got {type(value).__name__}"
        )
    tenants: dict[str, tuple[str, ...]] = {}
    owners: dict[str, str] = {}
    for raw_tenant, raw_tokens in value.items():
        tenant = _tenant_id(raw_tenant)
        if tenant in tenants:
            raise ValueError(f"tenant {tenant!r} is given twice")
        listed = [raw_tokens] if isinstance(raw_tokens, str) else raw_tokens
        if not isinstance(listed, list | tuple) or not listed:
            raise ValueError(
                f"tenant {tenant!r}: give a token or a non-empty list of tokens, "
                f"got {type(raw_tokens).__name__}"
            )
        whose = f"tenant {tenant!r}: a token "
        tokens = tuple(dict.fromkeys(_checked_token(token, whose) for token in listed))
        for token in tokens:
            owner = owners.setdefault(token, tenant)
            if owner != tenant:
                raise ValueError(f"tenants {owner!r} and {tenant!r} share a token")
        tenants[tenant] = tokens
    return tenants


def _tenant_id(value: Any) -> str:
    """A tenant id: a non-blank string, or a YAML integer key such as `1001:` read as text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"tenant ids must be non-empty strings, got {value!r}")
    return value


TenantTokens = Annotated[dict[str, tuple[str, ...]], BeforeValidator(_tenant_token_map)]
"""Tenant id -> its tokens, from `{t1: token}` or `{t1: [new, old]}`."""


class TenantTokensFile(BaseModel):
    """A tenant-token file (`wow.api.tenant-tokens-file`) and the tokens it held when loaded."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    path: Path
    tenants: TenantTokens = Field(repr=False)
    """Tenant id -> its tokens, as in `wow.api.tenant-tokens`."""


def _tokens_file(value: Any) -> TenantTokensFile | None:
    """Read and check a tenant-token file (YAML or JSON) now, so a bad secret fails at start."""
    value = blank_is_none(value)
    if value is None or isinstance(value, TenantTokensFile):
        return value
    if not isinstance(value, str | os.PathLike):
        raise ValueError(f"must be a file path, got {type(value).__name__}")
    path = Path(value)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: cannot read: not UTF-8 text") from None
    except OSError as error:
        raise ValueError(f"{path}: cannot read: {error.strerror or error}") from None
    document = _parse_tokens(text, path)
    if not document:
        raise ValueError(f"{path}: holds no tenant tokens")
    try:
        tenants = _tenant_token_map(document)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    return TenantTokensFile(path=path, tenants=tenants)


_QUOTED = re.compile(r"'[^']*'" + r'|"[^"]*"')


def _hide_word(quoted: re.Match[str]) -> str:
    """A quoted name in a YAML problem as `'…'`; a character (`','`) or `'<scalar>'` stays."""
    text = quoted[0]
    return text if len(text) <= 4 or text[1] == "<" else "'…'"


def _parse_tokens(text: str, path: Path) -> Any:
    """JSON if it starts with `{`, else YAML; a parse error says where, never the text there."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            where = f"line {error.lineno}, column {error.colno}"
            raise ValueError(f"{path}: malformed JSON: {error.msg} at {where}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        # str(error) quotes the offending line, which may hold a token: keep only the position,
        # and no quoted word of the problem (an undefined alias `*x` is named in it).
        problem = _QUOTED.sub(_hide_word, str(getattr(error, "problem", None) or "cannot parse"))
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{path}: malformed YAML: {problem}{where}") from None


def _file_path(value: TenantTokensFile | None) -> str | None:
    """A tenant-token file dumps as its path: the tokens stay in the file."""
    return None if value is None else str(value.path)


OperatorToken = Annotated[str | None, BeforeValidator(_token)]
"""The operator's token; blank is "not set"."""
TokensFile = Annotated[
    TenantTokensFile | None, BeforeValidator(_tokens_file), PlainSerializer(_file_path)
]
"""A tenant-token file, read and checked at load; it dumps as its path."""


def not_the_operator(
    tenants: Mapping[str, tuple[str, ...]], operator: str | None, where: str
) -> None:
    """A tenant's token must not be the operator's, which reaches every tenant."""
    for tenant, tokens in tenants.items():
        if operator is not None and operator in tokens:
            raise ValueError(
                f"{where}tenant {tenant!r} has the operator's token "
                "(wow.api.token, WOW_API_TOKEN): give each tenant its own"
            )
