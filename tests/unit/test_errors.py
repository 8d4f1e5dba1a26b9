"""Every public error of the package derives from one root, `WowTemporalError` (issue #40):
a caller catches whatever wow-temporal raises with one `except`, and the built-in bases
callers already catch (`ValueError`, `LookupError`, `RuntimeError`) are kept."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import wow_temporal
from wow_temporal.errors import WowTemporalError
from wow_temporal.jobs.client import JobError, JobNotFoundError
from wow_temporal.search_attributes import (
    SearchAttributeError,
    indexed_value_types,
    register_search_attributes,
)
from wow_temporal.settings import SettingsError
from wow_temporal.timers.client import TimerError, TimerNotFoundError


def _public_errors() -> dict[str, type[BaseException]]:
    """Each public exception class defined in a module of the package, by its full name."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(wow_temporal.__path__, "wow_temporal."):
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")
            ):
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_public_error_of_every_module_derives_from_the_root() -> None:
    errors = _public_errors()
    assert len(errors) > 30  # the walk reaches the package's modules at all
    assert "wow_temporal.timers.operations.TimerNotFoundError" in errors
    assert "wow_temporal.dev.errors.PortInUseError" in errors
    outside = sorted(name for name, cls in errors.items() if not issubclass(cls, WowTemporalError))
    assert not outside, f"public errors that do not derive from WowTemporalError: {outside}"


def test_the_root_is_exported_from_the_package() -> None:
    assert wow_temporal.WowTemporalError is WowTemporalError
    assert "WowTemporalError" in wow_temporal.__all__


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (TimerError, ValueError),
        (JobError, ValueError),
        (SettingsError, ValueError),
        (SearchAttributeError, ValueError),
        (TimerNotFoundError, LookupError),
        (JobNotFoundError, LookupError),
    ],
)
def test_the_builtin_bases_callers_catch_are_kept(
    error: type[Exception], builtin: type[Exception]
) -> None:
    assert issubclass(error, WowTemporalError)
    assert issubclass(error, builtin)


def test_timers_and_jobs_have_the_same_error_shapes() -> None:
    """`JobNotFoundError` is to `JobError` what `TimerNotFoundError` is to `TimerError`."""
    for family, not_found in ((TimerError, TimerNotFoundError), (JobError, JobNotFoundError)):
        assert not_found.__bases__ == (family, LookupError)
        assert family.__bases__ == (WowTemporalError, ValueError)


def test_search_attributes_raise_their_own_error() -> None:
    with pytest.raises(SearchAttributeError, match="Nope"):
        indexed_value_types({"WowProbe": "Nope"})


async def test_a_name_registered_with_another_type_is_a_search_attribute_error() -> None:
    """What `setup` reports (exit 1) on a namespace that has `WowDue` as a Keyword."""
    listed = SimpleNamespace(
        custom_attributes=indexed_value_types({"WowDue": "Keyword"}), system_attributes={}
    )

    async def list_search_attributes(request: Any) -> SimpleNamespace:
        return listed

    client: Any = SimpleNamespace(
        operator_service=SimpleNamespace(list_search_attributes=list_search_attributes)
    )
    with pytest.raises(SearchAttributeError, match="WowDue"):
        await register_search_attributes(client, "default")


def test_search_attributes_import_nothing_of_the_dev_stack() -> None:
    """`setup` registers them on a production namespace: the dev stack is not its concern."""
    source = Path(wow_temporal.__file__).with_name("search_attributes.py").read_text()
    imported = [
        node.module or ""
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom)
    ] + [
        alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import)
        for alias in node.names
    ]
    assert "wow_temporal.errors" in imported  # the walk reads the imports at all
    assert not [name for name in imported if name.startswith("wow_temporal.dev")]
