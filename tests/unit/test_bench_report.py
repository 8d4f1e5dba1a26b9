"""`bench.harness.report.bench_main`: the printed PASS/MISS and the exit status both come from
the bench's `Verdicts`, as text and as JSON (a run cannot print PASS and exit 1)."""

from __future__ import annotations

import argparse
import json
import signal
from collections.abc import Iterator

import pytest

from bench.harness.report import bench_main
from bench.oracle import Verdicts

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _sigterm_kept() -> Iterator[None]:
    """`bench_main` installs its SIGTERM handler: the test process keeps its own."""
    kept = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, kept)


def main(verdicts: Verdicts, *, as_json: bool) -> int:
    args = argparse.Namespace(json=as_json, quick=True, seed=1)

    async def run(_: argparse.Namespace) -> dict[str, int]:
        return {"lost": verdicts.must_be_zero.get("lost", 0)}

    return bench_main(args, run, lambda r: print(f"report {r}"), lambda _: verdicts)


@pytest.mark.parametrize(
    ("verdicts", "status", "line"),
    [
        (Verdicts(must_be_zero={"lost": 0}, must_be_positive={"seen": 2}), 0, "PASS"),
        (Verdicts(must_be_zero={"lost": 1}, must_be_positive={"seen": 2}), 1, "MISS: lost"),
        (Verdicts(must_be_zero={"lost": 0}, must_be_positive={"seen": 0}), 1, "MISS: seen"),
    ],
)
def test_the_line_printed_and_the_exit_status_are_the_same_verdict(
    verdicts: Verdicts, status: int, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(verdicts, as_json=False) == status
    assert capsys.readouterr().out.splitlines()[-1] == line
    assert main(verdicts, as_json=True) == status
    out = json.loads(capsys.readouterr().out)
    assert out["passed"] is (status == 0)
    assert out["must_be_zero"] == verdicts.must_be_zero
