"""Benchmark-sized run of the model of ingest (`tests/unit/test_ingest_model.py`): the real
`TimerClient` against the simulated Temporal, for many more examples and longer step
sequences than the suite's bounded run, with a random (or given) seed.

Run: `.venv/bin/python bench/ingest_model.py [--examples 2000] [--steps 80] [--seed N]`.
Prints the examples run and PASS, or the shortest failing sequence hypothesis found.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one")
    args = parser.parse_args()
    os.environ["WOW_INGEST_MODEL_EXAMPLES"] = str(args.examples)
    os.environ["WOW_INGEST_MODEL_STEPS"] = str(args.steps)
    logging.getLogger("wow_temporal").setLevel(logging.ERROR)  # the model's outages are noisy

    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    from tests.unit.test_ingest_model import IngestModel

    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big")
    print(f"ingest model: {args.examples} examples of up to {args.steps} steps, seed {seed}")
    began = time.monotonic()
    IngestModel.TestCase.settings = settings(
        max_examples=args.examples,
        stateful_step_count=args.steps,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    from hypothesis import seed as hypothesis_seed

    run = hypothesis_seed(seed)(lambda: run_state_machine_as_test(IngestModel))
    run()
    print(f"PASS in {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
