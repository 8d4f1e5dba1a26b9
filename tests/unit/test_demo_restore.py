"""How the demo puts the morning job back (`wow_temporal.dev.demo.restoring`): a reset when the
job had no rule of its own, else its own fields again, a null removing each it did not have."""

from __future__ import annotations

from wow_temporal.dev.demo import restoring

NONE = {"expression": None, "zone": None, "misfire": None}


def test_a_job_with_no_rule_of_its_own_is_reset() -> None:
    assert restoring({"own": NONE, "expression": "0 0 6 * * *"}) == ("/wow.schedule.reset", None)
    assert restoring({"status": "Enabled"}) == ("/wow.schedule.reset", None)


def test_a_job_with_a_rule_of_its_own_gets_exactly_that_back() -> None:
    found = {"own": {**NONE, "zone": "Asia/Tokyo"}}
    assert restoring(found) == (
        "/wow.schedule.reschedule", {"expression": None, "zone": "Asia/Tokyo", "misfire": None}
    )


def test_putting_the_job_back_outlives_a_second_cancel() -> None:
    """Review of #38: a second signal during the demo's clean-up (a double Ctrl+C, SIGHUP then
    SIGTERM) cancelled the put-back half-way, leaving the job ticking every 5 s; it now runs to
    its end and the cancellation goes on after it."""
    import asyncio

    from wow_temporal.dev.demo import _uncancelled

    done: list[str] = []

    async def put_back() -> None:
        await asyncio.sleep(0.05)
        done.append("put back")

    async def demo() -> None:
        await _uncancelled(put_back())

    async def main() -> bool:
        task = asyncio.ensure_future(demo())
        await asyncio.sleep(0)
        for _ in range(3):  # cancelled again and again while it puts the job back
            task.cancel()
            await asyncio.sleep(0.01)
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    assert asyncio.run(main()) is True
    assert done == ["put back"]
