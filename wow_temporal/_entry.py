"""The `wow-temporal` console script: a Ctrl+C while the command line loads (half a second of
imports) exits 130 quietly, as one while it runs does, instead of a KeyboardInterrupt's
traceback from deep inside an import."""

from __future__ import annotations

import signal
from types import FrameType

__all__ = ["main"]


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    """Load the command line with Ctrl+C quiet, then run it with Python's own handling."""
    previous = signal.signal(signal.SIGINT, _interrupted)
    from wow_temporal.cli import main as run

    signal.signal(signal.SIGINT, previous)
    run()
