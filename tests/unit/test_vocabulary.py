"""The CLI, the control API and their docs speak one language (issue #38): every error code the
API can answer is in docs/control-api.md's table, the limits the docs state are the code's, every
CLI command and API route is documented, and the CLI's names are the API's, kebab-case for
camelCase."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest
import typer.main
from temporalio.service import RPCError, RPCStatusCode

from wow_temporal.api import errors as api_errors
from wow_temporal.api.app import create_app
from wow_temporal.cli import app as cli_app
from wow_temporal.cli._common import _temporal_away
from wow_temporal.timers.client import LIST_DEFAULT, LIST_LIMIT

ROOT = Path(__file__).resolve().parents[2]
CLI_DOC = (ROOT / "docs" / "cli.md").read_text()
API_DOC = (ROOT / "docs" / "control-api.md").read_text()
_RAISED = re.compile(r"(?:ApiError|error_response)\(\s*(\d{3}),\s*\"(\w+)\"")
_KIND = re.compile(r"^\s*(\d{3}): \"(\w+)\",$", re.MULTILINE)


def _section(page: str, heading: str) -> str:
    start = page.index(f"\n## {heading}\n")
    end = page.find("\n## ", start + 1)
    return page[start : end if end != -1 else len(page)]


def _rows(text: str) -> list[list[str]]:
    """A Markdown table's body rows, their cells stripped (`\\|` inside a cell kept)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows[1:] if rows else rows


def _answered() -> set[tuple[int, str]]:
    """Every (status, code) the API's modules answer with."""
    found: set[tuple[int, str]] = set()
    for path in sorted((ROOT / "wow_temporal" / "api").glob("*.py")):
        text = path.read_text()
        found |= {(int(s), code) for s, code in _RAISED.findall(text)}
        found |= {(int(s), code) for s, code in _KIND.findall(text)}
    return found


def _documented_codes() -> set[tuple[str, str]]:
    return {
        (status, error.strip("`"))
        for status, error, _ in _rows(_section(API_DOC, "Error codes"))
    }


def test_every_error_code_the_api_answers_is_in_the_table_with_its_status() -> None:
    answered = _answered()
    assert len(answered) > 15  # the pattern finds them at all
    documented = _documented_codes()
    assert {(str(s), code) for s, code in answered} <= documented
    assert ("any other", "HttpError") in documented  # `_KINDS`' fallback
    stale = {code for _, code in documented} - {code for _, code in answered} - {"HttpError"}
    assert not stale, f"documented codes no route answers: {stale}"


def test_the_same_fault_has_one_code() -> None:
    """`InvalidStatus` was an unknown status filter, `InvalidRequest` any other bad value."""
    codes = [code for _, code in _answered()]
    assert "InvalidStatus" not in codes
    statuses: dict[str, set[int]] = {}
    for status, code in _answered():
        statuses.setdefault(code, set()).add(status)
    assert all(len(found) == 1 for found in statuses.values()), statuses


@pytest.mark.parametrize("status", list(RPCStatusCode))
def test_the_cli_exits_1_where_the_api_answers_503(status: RPCStatusCode) -> None:
    error = RPCError("refused", status, b"")
    assert _temporal_away(error) == (api_errors._rpc_error(error).status == 503)


def _openapi() -> dict[str, Any]:
    document: dict[str, Any] = create_app(MagicMock(), token="t", jobs=MagicMock()).openapi()
    return document


def _query(document: dict[str, Any], path: str, method: str = "get") -> dict[str, Any]:
    return {
        p["name"]: p.get("schema", {})
        for p in document["paths"][path][method]["parameters"]
        if p["in"] == "query"
    }


def _command(*path: str) -> Any:
    """A command of the CLI (typer's click, vendored from typer 0.24: read by its attributes)."""
    command: Any = typer.main.get_command(cli_app)
    for name in path:
        command = command.commands[name]
    return command


def _option(command: Any, name: str) -> Any:
    (found,) = [p for p in command.params if p.param_type_name == "option" and p.name == name]
    return found


def test_the_limits_the_docs_state_are_the_codes() -> None:
    document = _openapi()
    timers = _query(document, "/timers")["limit"]
    schedules = _query(document, "/schedules")["limit"]
    cli_limit = _option(_command("timers", "list"), "limit")
    assert (timers["maximum"], timers["default"]) == (LIST_LIMIT, LIST_DEFAULT)
    assert (cli_limit.max, cli_limit.default) == (LIST_LIMIT, LIST_DEFAULT)

    limits = {row[0]: row[1] for row in _rows(_section(API_DOC, "Limits"))}
    said = limits["`limit` of `GET /timers` (`--limit` of `timers list`)"]
    assert said == f"1 to {LIST_LIMIT:,}, default {LIST_DEFAULT}"
    assert limits["`limit` of `GET /schedules`"] == (
        f"{schedules['minimum']} to {schedules['maximum']:,}, default {schedules['default']}"
    )
    body = inspect.signature(create_app).parameters["max_body_bytes"].default
    assert body == 1 << 20
    assert limits["a request's body (`POST /commits`, a reschedule)"].startswith(
        f"1 MiB ({body:,} bytes)"
    )
    assert f"`--limit` of `timers list`: 1 to {LIST_LIMIT:,}, default {LIST_DEFAULT}" in CLI_DOC
    count = _option(_command("cron"), "count")
    assert f"(default {count.default}, at most {count.max:,})" in CLI_DOC


def _leaves(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if hasattr(command, "commands"):
        return [
            leaf
            for name, sub in command.commands.items()
            for leaf in _leaves(sub, (*path, name))
        ]
    return [path]


def test_every_cli_command_is_in_the_table() -> None:
    documented: set[tuple[str, ...]] = set()
    for row in _rows(CLI_DOC[: CLI_DOC.index("\n## ")]):
        words = row[0].strip("`").split()
        if len(words) < 2 or words[0] != "wow-temporal":
            continue
        for i, word in enumerate(words[1:3], start=1):
            if "\\|" in word:  # `timers list\|show`: each of them
                documented |= {(*words[1:i], name) for name in word.split("\\|")}
                break
        else:
            documented.add((words[1],))
            if len(words) > 2 and not words[2].startswith(("-", "[", '"', "F")):
                documented.add((words[1], words[2]))
    leaves = _leaves(_command())
    assert len(leaves) > 15
    missing = [" ".join(leaf) for leaf in leaves if leaf not in documented]
    assert not missing, f"commands docs/cli.md does not list: {missing}"


def test_every_route_is_in_the_table() -> None:
    """Each route once, as `METHOD /path`; a TENANT job's `/{context}/tenant/{tenantId}/…`
    twin of a route is said once for all of them."""
    table = " ".join(row[0] for row in _rows(API_DOC[: API_DOC.index("\n## ")]))
    documented = set(re.findall(r"`(GET|POST|PUT|DELETE) (/[^`]*)`", table))
    routes = {
        (method.upper(), path)
        for path, operations in _openapi()["paths"].items()
        for method in operations
        if "/tenant/{tenantId}/" not in path
    }
    assert routes - documented == set()
    assert "/{context}/tenant/{tenantId}/schedule/{id}" in API_DOC
    assert documented - routes <= {("GET", "/openapi.json"), ("GET", "/docs")}


def test_the_cli_spells_the_apis_names() -> None:
    """`--aggregate-id` is `aggregateId`: each filter of `timers list` is a query parameter
    of `GET /timers` (kebab-case there, camelCase here), and no other."""
    query = set(_query(_openapi(), "/timers"))
    options = {
        re.sub(r"-(\w)", lambda m: m.group(1).upper(), p.opts[0].removeprefix("--"))
        for p in _command("timers", "list").params
        if p.param_type_name == "option" and p.name not in ("as_json", "address", "namespace")
    }
    assert options == query
    row = next(r for r in _rows(CLI_DOC) if r[0] == "`--aggregate-id`")
    assert row[1:] == ["`aggregateId`", "`aggregate_id`"]
