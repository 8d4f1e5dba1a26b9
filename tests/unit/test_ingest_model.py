"""The model of ingest (`tests.helpers.ingest_model`), run for a bounded number of examples
(`WOW_INGEST_MODEL_EXAMPLES`, `WOW_INGEST_MODEL_STEPS`; `bench/ingest_model.py` runs more)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.helpers.ingest_model import IngestModel

STEPS = int(os.environ.get("WOW_INGEST_MODEL_STEPS", "40"))
EXAMPLES = int(os.environ.get("WOW_INGEST_MODEL_EXAMPLES", "60"))


def test_ingest_keeps_the_logs_order_against_a_simulated_temporal() -> None:
    run_state_machine_as_test(
        IngestModel,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
