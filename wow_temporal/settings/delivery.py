"""The delivery policy: how a delivery (a timer's command, a job's tick) is retried before it
is parked. One model, carried in the timer's and the job's workflow input.

It is a workflow payload: its field names are in recorded histories, so they stay as they are.
`wow.timers.*` configures it (`TimerSettings.delivery` derives it, the one place that does);
code and tests may build one directly.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict
from temporalio.common import RetryPolicy

__all__ = ["LOST_ATTEMPTS_ALLOWED", "DeliverySettings"]

LOST_ATTEMPTS_ALLOWED = 5
"""Temporal stops retrying a delivery after `max_attempts` times this many attempts: a
backstop for attempts lost to workers that die (those do not use up the host's budget)."""


class DeliverySettings(BaseModel):
    """How the delivery activity is retried before a slot is parked (`wow.timers.*`)."""

    model_config = ConfigDict(frozen=True)

    max_attempts: int = 10
    """Technical failures of the host (not lost workers) before the slot is parked."""
    initial_interval: timedelta = timedelta(seconds=1)
    max_interval: timedelta = timedelta(seconds=60)
    backoff: float = 2.0
    attempt_timeout: timedelta = timedelta(seconds=30)
    heartbeat_timeout: timedelta = timedelta(seconds=5)
    """How soon an attempt whose worker died is tried again (a slow send heartbeats)."""

    def retry_policy(self, parked_type: str) -> RetryPolicy:
        """Temporal's retries of an activity that parks itself (raising `parked_type`) after
        `max_attempts` failures of the host; attempts lost with workers are the backstop."""
        return RetryPolicy(
            initial_interval=self.initial_interval,
            backoff_coefficient=self.backoff,
            maximum_interval=self.max_interval,
            maximum_attempts=self.max_attempts * LOST_ATTEMPTS_ALLOWED,
            non_retryable_error_types=[parked_type],
        )
