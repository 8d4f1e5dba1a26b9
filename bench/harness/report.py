"""What every bench shares at its edges: the common flags, and one report printed as text or as
one JSON object (`--json`), never asserted (the machine is small and noisy)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import signal
import sys
import tempfile
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from bench.oracle.verdicts import Verdicts

__all__ = ["Verdicts", "bench_main", "parser", "ratio", "scratch", "sized", "to_json", "verdict"]

R = TypeVar("R")


def parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser with the flags every bench takes: `--quick` (the smoke test's size),
    `--seed`, `--json` (one JSON object on stdout), `--keep` (keep the scratch directory)."""
    p = argparse.ArgumentParser(
        description=(doc or "").split("\n", 1)[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="a small run, for the smoke test")
    p.add_argument("--seed", type=int, help="the random seed, for a bench that draws any")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory (logs, data)")
    return p


def sized(
    args: argparse.Namespace, quick: dict[str, Any], full: dict[str, Any]
) -> argparse.Namespace:
    """Fill the flags left unset from the `--quick` or the full size (a seed too, if it has one)."""
    for name, value in (quick if args.quick else full).items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    return args


@contextmanager
def scratch(args: argparse.Namespace, name: str) -> Iterator[Path]:
    """A scratch directory for the run's servers and logs; kept (and named on stderr) with
    `--keep`."""
    if getattr(args, "keep", False):
        path = Path(tempfile.mkdtemp(prefix=f"wow-bench-{name}-"))
        print(f"scratch directory (kept): {path}", file=sys.stderr)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix=f"wow-bench-{name}-") as tmp:
        yield Path(tmp)


def ratio(a: float, b: float) -> float:
    """`a / b`, NaN when `b` is 0 or either is not finite: a ratio never ends a run."""
    if b == 0 or not (math.isfinite(a) and math.isfinite(b)):
        return math.nan
    return a / b


def verdict(ok: bool) -> str:
    """How a figure reads against its target: met or missed, never an exit status (a run's own
    PASS is its `Verdicts`')."""
    return "PASS" if ok else "MISS"


def to_json(value: Any) -> Any:
    """A report (dataclasses, pydantic models, mappings, sequences) as JSON values; a float
    that is not finite is null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump"):
        return to_json(value.model_dump(mode="json"))
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def bench_main(
    args: argparse.Namespace,
    run: Callable[[argparse.Namespace], Coroutine[Any, Any, R]],
    text: Callable[[R], None],
    verdicts: Callable[[R], Verdicts],
) -> int:
    """Run the bench and print its report as text and then its verdict (PASS, or MISS and what
    broke), or with `--json` as one object: the bench's name, size and seed, its `Verdicts`
    and the whole report. The exit status is the verdict's: 1 when a count that must be 0 is
    not, or one that must be above 0 is not (a figure never fails a run). SIGTERM (a timeout)
    ends the run through `finally`, so no server is left behind."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    report: R = asyncio.run(run(args))
    if not args.json:
        text(report)  # before judging: a verdict that fails to compute loses nothing
    try:
        judged = verdicts(report)
    except Exception as error:
        if args.json:
            print(json.dumps({"verdicts_failed": repr(error), "report": to_json(report)}))
        print(f"broken: the verdicts could not be computed: {error!r}", file=sys.stderr)
        return 1
    if args.json:
        name = Path(sys.argv[0]).stem if sys.argv[0] else "bench"
        head = {"bench": name, "quick": args.quick, "seed": args.seed, "passed": judged.passed}
        print(json.dumps({**head, **to_json(judged), "report": to_json(report)}))
    else:
        print(judged.line())
    if not judged.passed:
        print(f"broken: {', '.join(judged.broken)}", file=sys.stderr)
    return 0 if judged.passed else 1
