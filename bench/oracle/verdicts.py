"""A bench's verdicts, declared once: the counts that must be 0, those that must be above 0, and
the figures beside them. The printed PASS/MISS and the exit status both come from here."""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["Findings", "Verdicts", "positive", "zero"]


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

    def text(self) -> str:
        """Every count and figure, named, as indented lines for a text report."""
        parts = []
        for title, values in (
            ("must be 0", self.must_be_zero),
            ("must be above 0", self.must_be_positive),
            ("figures", self.ratios | self.figures),
        ):
            if values:
                named = ", ".join(f"{name} {value:g}" for name, value in values.items())
                parts.append(f"{title}: {named}")
        return "\n".join(
            textwrap.fill(part, 100, initial_indent="  ", subsequent_indent="    ")
            for part in parts
        )

    def __or__(self, other: Verdicts) -> Verdicts:
        """Both verdicts at once (a judge's and its run's own)."""
        return Verdicts(
            self.must_be_zero | other.must_be_zero,
            self.must_be_positive | other.must_be_positive,
            self.ratios | other.ratios,
            self.figures | other.figures,
        )


def zero() -> Any:
    """A `Findings` count that must be 0."""
    return field(default=0, metadata={"must_be": "zero"})


def positive() -> Any:
    """A `Findings` count that must be above 0 (a path the run must take)."""
    return field(default=0, metadata={"must_be": "positive"})


@dataclass
class Findings:
    """A judge's counts, each declared once as a field: `zero()` ones must be 0, `positive()`
    ones above 0; `problems` says what broke (the first 60)."""

    problems: list[str] = field(default_factory=list)

    def problem(self, count: str, text: str) -> None:
        """One more of `count` (a must-be-0 count), and why."""
        setattr(self, count, getattr(self, count) + 1)
        self.note(f"{count}: {text}")

    def note(self, text: str) -> None:
        if len(self.problems) < 60:
            self.problems.append(text)

    def verdicts(self) -> Verdicts:
        """The declared counts as verdicts."""
        declared = {f.name: f.metadata.get("must_be") for f in fields(self)}
        return Verdicts(
            must_be_zero={n: getattr(self, n) for n, m in declared.items() if m == "zero"},
            must_be_positive={n: getattr(self, n) for n, m in declared.items() if m == "positive"},
        )
