"""`bench.timers`' measure 3: Temporal Cloud actions per delivered command, counted from the
histories of the timers the other measures ran and of a cron, a replaced and a cancelled one."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from bench._timers_rig import Rig, cancel_at, cancel_commit, timer_id
from bench.harness import iso_ms
from bench.harness.actions import by_kind, history, total


async def actions_of(rig: Rig, workflow_id: str) -> dict[str, int]:
    """Actions of every run of `workflow_id` by kind, following continue-as-new back."""
    return by_kind(await history(rig.client, workflow_id))


def describe(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != "slots")


async def mean_actions(rig: Rig, ids: list[str]) -> tuple[float, str]:
    found = await asyncio.gather(*(actions_of(rig, i) for i in ids))
    return sum(map(total, found)) / len(found), describe(found[0])


@dataclass
class ActionsReport:
    one_shot: tuple[float, str]
    bare: tuple[float, str]
    cron_per_slot: float
    cron_slots: int
    cron_detail: str
    replaced: tuple[int, str]
    cancelled: tuple[int, str]


async def measure_actions(rig: Rig, sample: int, cron_slots: int) -> ActionsReport:
    """The mean of the last `sample` one-shots of each side; a cron every second over
    `cron_slots` slots then cancelled by an operator; a one-shot replaced, one cancelled."""
    tag = rig.tag("act")
    soon = int((time.time() + 3) * 1000)
    cron, replaced, cancelled = f"{tag}-cron", f"{tag}-repl", f"{tag}-canc"
    commits = [
        (cron, 1, cancel_at({"cron": "* * * * * *"})),
        (replaced, 1, cancel_at({"at": iso_ms(soon)})),
        (replaced, 2, cancel_at({"at": iso_ms(soon + 1000)})),
        (cancelled, 1, cancel_at({"at": iso_ms(soon)})),
        (cancelled, 2, {"name": "wow.ScheduleCancelled", "key": "grace"}),
    ]
    for i, (aggregate, version, event) in enumerate(commits):
        await rig.timers.apply(cancel_commit(f"{tag}-{i}", aggregate, version, event))
    # The cron timer delivers `{tag}-0:e0#k`; the replaced one `{tag}-2:e0#1`: wait for both.
    deadline = time.monotonic() + cron_slots + 30
    while time.monotonic() < deadline:
        ids = list(await rig.records(tag))
        slots = sum(1 for k in ids if k.startswith(f"{tag}-0:"))
        if slots >= cron_slots and any(k.startswith(f"{tag}-2:") for k in ids):
            break
        await asyncio.sleep(0.1)
    await rig.timers.cancel(timer_id(cron))
    for aggregate in (cron, replaced, cancelled):
        await rig.client.get_workflow_handle(timer_id(aggregate)).result()
    counts = {a: await actions_of(rig, timer_id(a)) for a in (cron, replaced, cancelled)}
    counts[cron]["query"] = 1  # TimerClient.cancel's show() queries the running timer: billed
    slots = counts[cron].get("slots", 0)
    return ActionsReport(
        one_shot=await mean_actions(rig, rig.wow_ids[-sample:]),
        bare=await mean_actions(rig, rig.bare_ids[-sample:]),
        cron_per_slot=total(counts[cron]) / max(slots, 1),
        cron_slots=slots,
        cron_detail=describe(counts[cron]),
        replaced=(total(counts[replaced]), describe(counts[replaced])),
        cancelled=(total(counts[cancelled]), describe(counts[cancelled])),
    )


def print_actions(report: ActionsReport) -> None:
    print(f"actions     one-shot {report.one_shot[0]:.2f} per command ({report.one_shot[1]})")
    print(f"  bare sleep + activity: {report.bare[0]:.2f} ({report.bare[1]})")
    print(
        f"  cron every second: {report.cron_per_slot:.2f} per slot over {report.cron_slots} "
        f"slots, start and operator cancel included ({report.cron_detail})"
    )
    print(f"  replaced one-shot: {report.replaced[0]} ({report.replaced[1]})")
    print(f"  cancelled one-shot: {report.cancelled[0]} ({report.cancelled[1]})")
