"""The dev stack of `wow-temporal dev` and `wow-temporal demo`.

`server` runs the embedded Temporal dev server; `services` are what runs beside it (domain host,
workers, control API); `stack` is the `dev` command's engine (start all, wait, stop all); `demo`
walks the spec's e-shop on a running stack. `ports`, `binaries` and `errors` are what they share.
Nothing is imported here until asked, so a command that only checks a port stays light; the names
`wow_temporal.dev` had as a module (`run_dev`, `dev_main`, …) still come from `stack` until 0.2.
"""

from typing import Any

_STACK = ("READY_LINE", "DevContext", "DevService", "dev_main", "run_dev")


def __getattr__(name: str) -> Any:
    """The old module's names, from `stack`, imported on first use."""
    if name in _STACK:
        from wow_temporal.dev import stack

        return getattr(stack, name)
    raise AttributeError(f"module 'wow_temporal.dev' has no attribute {name!r}")
