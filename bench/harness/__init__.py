"""What every bench shares: processes, the fake Wow host in its own process, load and chaos,
commits, what a process used, statistics, and the report."""

from bench.harness.chaos import Chaos, Fault
from bench.harness.commits import CANCEL_ORDER, commit, iso_ms, schedule_set
from bench.harness.host import HostProcess
from bench.harness.load import TokenBucket, pool, sleep_until
from bench.harness.proc import CLI, REPO, Proc, answers, log_says, worker_env
from bench.harness.report import (
    Verdicts,
    bench_main,
    parser,
    ratio,
    scratch,
    sized,
    to_json,
    verdict,
)
from bench.harness.stats import percentile, summary
from bench.harness.usage import busy_cpu_seconds, cpu_seconds, rss_mb, tree_cpu_seconds
from bench.harness.workflows import still_running

__all__ = [
    "CANCEL_ORDER",
    "CLI",
    "REPO",
    "Chaos",
    "Fault",
    "HostProcess",
    "Proc",
    "TokenBucket",
    "Verdicts",
    "answers",
    "bench_main",
    "busy_cpu_seconds",
    "commit",
    "cpu_seconds",
    "iso_ms",
    "log_says",
    "parser",
    "percentile",
    "pool",
    "ratio",
    "rss_mb",
    "schedule_set",
    "scratch",
    "sized",
    "sleep_until",
    "still_running",
    "summary",
    "to_json",
    "tree_cpu_seconds",
    "verdict",
    "worker_env",
]
