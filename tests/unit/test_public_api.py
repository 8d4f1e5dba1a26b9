"""The public API is what the docs say it is (as httpx guards its own): `wow_temporal.__all__`
is exactly the names `docs/api.md` lists, each importable from `wow_temporal`, and nothing
public is exported by accident."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

import wow_temporal

API_PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def _documented() -> list[str]:
    """The names in the first column of the API page's tables: `| `name` | is |`."""
    text = API_PAGE.read_text(encoding="utf-8")
    return re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)` \|", text, flags=re.MULTILINE)


def test_the_docs_list_exactly_the_public_api() -> None:
    documented = _documented()
    assert len(documented) == len(set(documented)), "a name is listed twice in docs/api.md"
    exported = set(wow_temporal.__all__)
    unexported = sorted(set(documented) - exported)
    assert not unexported, f"docs/api.md lists names wow_temporal does not export: {unexported}"
    undocumented = sorted(exported - set(documented))
    assert not undocumented, f"wow_temporal exports names docs/api.md does not list: {undocumented}"


def test_each_documented_name_is_importable_from_the_package() -> None:
    missing = [name for name in _documented() if not hasattr(wow_temporal, name)]
    assert not missing, f"not importable from wow_temporal: {missing}"
    namespace: dict[str, object] = {}
    exec("from wow_temporal import *", namespace)
    assert set(wow_temporal.__all__) <= namespace.keys()


def test_nothing_public_is_exported_by_accident() -> None:
    """Every public name of the package's namespace, its subpackages aside, is in `__all__`
    (each loaded first: the root imports its names on first use)."""
    for name in wow_temporal.__all__:
        getattr(wow_temporal, name)
    public = {
        name
        for name, value in vars(wow_temporal).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    }
    assert public == set(wow_temporal.__all__)


@pytest.mark.parametrize("old", ["wow_temporal.embedded", "wow_temporal.schedule"])
def test_no_old_import_path_remains(old: str) -> None:
    """Nothing was ever released: each name has one path (`wow_temporal.dev`, `.model`)."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
