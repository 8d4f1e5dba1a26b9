"""The judges that decide a bench's PASS: pure functions of what a run recorded (the host's
ledger, its log, the customers' answers, the chaos's timings), no Temporal and no I/O, each
tested on hand-made records (`tests/unit/test_oracle_*.py`). `Verdicts` is what each declares
once: the printed PASS/MISS and the exit status both come from it."""

from bench.oracle.verdicts import Verdicts

__all__ = ["Verdicts"]
