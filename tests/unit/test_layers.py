"""The package's layers, read from its import statements: no module imports from a layer above
its own (so a lower part never reaches back up into one that builds on it), and the pure cores
import nothing of Temporal or of I/O, however indirectly."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "wow_temporal"

LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(names.split())
    for names in (
        "errors health logs",
        "cron search_attributes updates",
        "engine",
        "model",
        "ids settings wire",
        "domain metrics tracing",
        "delivery",
        "timers jobs",
        "connection",
        "api worker",
        "host __init__",
        "dev",
        "cli testing",
        "_entry",
    )
)
"""The top-level modules and subpackages, lowest first; a part imports only from its own part
or from a lower layer."""

PURE = (
    "cron",
    "engine.frozen",
    "engine.listing",
    "engine.slots",
    "engine.text",
    "host.guard",
    "jobs.core",
    "model",
    "timers.admission",
    "timers.changes",
    "timers.core",
    "timers.fold",
    "timers.keylocks",
    "timers.readahead",
    "timers.status",
)
"""The functional core: no Temporal, no HTTP, no database, directly or through what it imports."""

IMPURE = ("temporalio", "httpx", "fastapi", "starlette", "uvicorn", "sqlite3", "psycopg")


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"


MODULES = {_name(path): path for path in PACKAGE.rglob("*.py")}


@cache
def _imports(module: str) -> frozenset[str]:
    """Every module `module` imports anywhere in its text (package-relative for ours), and the
    packages those are in (importing `wow_temporal.a.b` runs `a/__init__` first)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(module, node.module or "", node.level)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    found.update(parent for name in set(found) for parent in _parents(name))
    return frozenset(_ours(name) or name for name in found if _ours(name) != "")


def _absolute(module: str, name: str, level: int) -> str:
    """An import's module as an absolute name (`from ..a import b` in `wow_temporal.x.y`)."""
    if level == 0:
        return name
    package = f"wow_temporal.{module}".split(".")
    if MODULES[module].name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _parents(name: str) -> list[str]:
    """The packages importing `name` runs first, but the package root (it imports its names
    lazily, on first use)."""
    parts = name.split(".")
    return [".".join(parts[:n]) for n in range(2, len(parts))]


def _ours(name: str) -> str | None:
    """`name` package-relative if it is one of our modules, "" if ours but not a module (an
    imported name), None if not ours."""
    if name == "wow_temporal":
        return "__init__"
    if not name.startswith("wow_temporal."):
        return None
    relative = name.removeprefix("wow_temporal.")
    return relative if relative in MODULES else ""


def _part(module: str) -> str:
    return module.split(".")[0]


def _layer(module: str) -> int:
    (index,) = (i for i, layer in enumerate(LAYERS) if _part(module) in layer)
    return index


def _reached(module: str) -> Iterator[str]:
    seen = {module}
    stack = [module]
    while stack:
        for name in _imports(stack.pop()):
            yield name
            if name in MODULES and name not in seen:
                seen.add(name)
                stack.append(name)


def test_every_part_has_a_layer() -> None:
    parts = {_part(module) for module in MODULES}
    declared = set().union(*LAYERS)
    assert parts == declared, f"undeclared {parts - declared}, gone {declared - parts}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_reaches_up(module: str) -> None:
    upward = sorted(
        name
        for name in _imports(module)
        if name in MODULES and _part(name) != _part(module) and _layer(name) >= _layer(module)
    )
    assert not upward, f"{module} (layer {_layer(module)}) imports {upward} from its layer or above"


@pytest.mark.parametrize("module", PURE)
def test_the_cores_are_pure(module: str) -> None:
    impure = sorted({n for n in _reached(module) if n.split(".")[0] in IMPURE})
    assert not impure, f"{module} reaches {impure}"
