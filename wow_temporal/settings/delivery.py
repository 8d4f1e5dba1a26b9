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

__all__ = ["DeliverySettings"]


class DeliverySettings(BaseModel):
    """How the delivery activity is retried before a slot is parked (`wow.timers.*`)."""

    model_config = ConfigDict(frozen=True)

    max_attempts: int = 10
    """Attempts before the slot is parked: the host's technical failures, and attempts lost
    with a worker, timed out or started early (the budget the Web UI shows, `Attempt 7 / 10`)."""
    initial_interval: timedelta = timedelta(seconds=1)
    max_interval: timedelta = timedelta(seconds=60)
    backoff: float = 2.0
    attempt_timeout: timedelta = timedelta(seconds=30)
    heartbeat_timeout: timedelta = timedelta(seconds=5)
    """How soon an attempt whose worker died is tried again (a slow send heartbeats)."""

    def retry_policy(self, parked_type: str) -> RetryPolicy:
        """Temporal's retries of an activity that parks itself (raising `parked_type`) on its
        last attempt: `maximum_attempts` is the parking budget itself, so the attempt count the
        Web UI shows is the real one (an attempt lost with its worker is one of them)."""
        return RetryPolicy(
            initial_interval=self.initial_interval,
            backoff_coefficient=self.backoff,
            maximum_interval=self.max_interval,
            maximum_attempts=self.max_attempts,
            non_retryable_error_types=[parked_type],
        )
