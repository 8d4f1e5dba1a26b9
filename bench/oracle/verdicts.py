"""A bench's verdicts, declared once: the counts that must be 0, those that must be above 0, and
the figures beside them. The printed PASS/MISS and the exit status both come from here."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["Verdicts"]


@dataclass(frozen=True)
class Verdicts:
    """What decides a run, whatever its size: counts that must be 0 (lost, early, twice),
    counts that must be above 0 (every path taken), ratios against the baseline (finite and
    above 0; their size is the bench's figure, never judged), and other figures named for a
    reader (finite)."""

    must_be_zero: dict[str, int] = field(default_factory=dict)
    must_be_positive: dict[str, float] = field(default_factory=dict)
    ratios: dict[str, float] = field(default_factory=dict)
    figures: dict[str, float] = field(default_factory=dict)

    @property
    def broken(self) -> list[str]:
        """The names of the counts that are not as they must be (a figure never is)."""
        zero = [k for k, v in self.must_be_zero.items() if v != 0]
        positive = [k for k, v in self.must_be_positive.items() if not (math.isfinite(v) and v > 0)]
        return zero + positive

    @property
    def passed(self) -> bool:
        return not self.broken

    def line(self) -> str:
        """How the run reads: `PASS`, or `MISS` and what broke."""
        return "PASS" if self.passed else f"MISS: {', '.join(self.broken)}"

    def __or__(self, other: Verdicts) -> Verdicts:
        """Both verdicts at once (a judge's and its run's own)."""
        return Verdicts(
            self.must_be_zero | other.must_be_zero,
            self.must_be_positive | other.must_be_positive,
            self.ratios | other.ratios,
            self.figures | other.figures,
        )
