"""Benchmark-sized run of the model of ingest (`tests/unit/test_ingest_model.py`): the real
`TimerClient` against the simulated Temporal and host, for many more examples and longer step
sequences than the suite's bounded run, with a random (or given) seed, in both its
configurations: the target's guard with two processes and faults (a change is known when
committed), and a target without the guard (what the relay alone keeps, stops first).

Run: `python -m bench.ingest_model [--quick] [--examples 2000] [--steps 80] [--seed N]`
(`--quick`: 30 examples of up to 20 steps). Prints the examples run and PASS, or fails with the
shortest failing sequence hypothesis found.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.harness import Verdicts, bench_main, parser, sized

if TYPE_CHECKING:
    from tests.helpers.ingest_model import IngestModel

QUICK = {"examples": 30, "steps": 20}
FULL = {"examples": 2000, "steps": 80}


@dataclass(frozen=True)
class ModelReport:
    examples: int
    """Examples hypothesis asked for (`--examples`)."""
    run: int
    """Examples it ran of the guarded configuration: the state machines it built, one an
    example (one it discarded too; fewer when it ran out of new ones)."""
    guardless: int
    """Examples it ran of the configuration without the guard."""
    steps: int
    seed: int
    seconds: float


def _check(examples: int, steps: int, seed: int) -> tuple[int, int]:
    """Run both configurations of the model (in a thread of its own: it drives its own event
    loop); raises what it finds. How many examples of each ran."""
    logging.getLogger("wow_temporal").setLevel(logging.ERROR)  # the model's outages are noisy

    from tests.helpers.ingest_model import GuardlessIngestModel, IngestModel

    return (
        _check_one(IngestModel, examples, steps, seed),
        _check_one(GuardlessIngestModel, examples, steps, seed),
    )


def _check_one(machine: type[IngestModel], examples: int, steps: int, seed: int) -> int:
    """Run one configuration of the model; how many examples ran."""
    from hypothesis import HealthCheck, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis.stateful import run_state_machine_as_test

    built: list[IngestModel] = []

    def model() -> IngestModel:
        built.append(machine())
        return built[-1]

    config = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    hypothesis_seed(seed)(lambda: run_state_machine_as_test(model, settings=config))()
    return len(built)


async def run(args: argparse.Namespace) -> ModelReport:
    if args.seed is None:  # a fresh seed each run, named in the report
        args.seed = int.from_bytes(os.urandom(4), "big")
    print(
        f"ingest model: {args.examples} examples of up to {args.steps} steps, seed {args.seed}",
        file=sys.stderr,
    )
    began = time.monotonic()
    ran, guardless = await asyncio.to_thread(_check, args.examples, args.steps, args.seed)
    seconds = time.monotonic() - began
    return ModelReport(args.examples, ran, guardless, args.steps, args.seed, seconds)


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--examples", type=int, help="default 2000 (quick 30)")
    p.add_argument("--steps", type=int, help="steps per example at most: default 80 (quick 20)")
    return bench_main(
        sized(p.parse_args(), QUICK, FULL),
        run,
        lambda r: print(
            f"PASS: {r.run} examples guarded, {r.guardless} without the guard, in {r.seconds:.0f} s"
        ),
        lambda r: Verdicts(
            must_be_positive={"examples": r.run, "guardless_examples": r.guardless},
            figures={"seconds": r.seconds},
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
