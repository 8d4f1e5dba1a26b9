"""Recurring jobs: one long-lived Temporal workflow per job instance, over a pure core."""
