"""The process's per-key ingest locks (`wow_temporal.timers.keylocks`): one lock a namespace and
key, whichever client asks, taken from any event loop, never left held by a cancelled waiter."""

from __future__ import annotations

import asyncio
import gc
import threading

from wow_temporal.timers.keylocks import KeyLock, KeyLocks


def test_every_caller_gets_the_same_lock_of_a_namespace_and_key() -> None:
    locks = KeyLocks()
    lock = locks.lock("default", "wow-timer:a")
    assert locks.lock("default", "wow-timer:a") is lock
    assert locks.lock("other", "wow-timer:a") is not lock
    assert locks.lock("default", "wow-timer:b") is not lock


def test_a_lock_no_one_holds_or_waits_for_is_dropped() -> None:
    locks = KeyLocks()
    locks.lock("default", "wow-timer:a")
    gc.collect()
    assert len(locks) == 0


def test_waiters_take_the_lock_in_turn_first_come_first_served() -> None:
    lock = KeyLock()
    order: list[str] = []

    async def hold(name: str) -> None:
        async with lock:
            order.append(f"{name} in")
            await asyncio.sleep(0)
            order.append(f"{name} out")

    async def main() -> None:
        await asyncio.gather(hold("a"), hold("b"), hold("c"))

    asyncio.run(main())
    assert order == ["a in", "a out", "b in", "b out", "c in", "c out"]
    assert not lock.locked()


def test_clients_on_two_event_loops_in_two_threads_exclude_each_other() -> None:
    """An `asyncio.Lock` would raise (bound to another loop) or, one per loop, let both in."""
    lock = KeyLock()
    inside = 0
    most = 0
    count = threading.Lock()

    async def work() -> None:
        nonlocal inside, most
        for _ in range(50):
            async with lock:
                with count:
                    inside += 1
                    most = max(most, inside)
                await asyncio.sleep(0.0005)  # the other thread gets to try meanwhile
                with count:
                    inside -= 1

    failures: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(asyncio.wait_for(work(), 20))
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failures == []
    assert most == 1
    assert not lock.locked()


def test_a_cancelled_waiter_leaves_the_queue() -> None:
    async def main() -> None:
        lock = KeyLock()
        await lock.acquire()
        waiter = asyncio.create_task(lock.acquire())
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        lock.release()
        assert not lock.locked()

    asyncio.run(main())


def test_a_waiter_cancelled_once_handed_the_lock_passes_it_on() -> None:
    async def main() -> None:
        lock = KeyLock()
        await lock.acquire()
        first = asyncio.create_task(lock.acquire())
        second = asyncio.create_task(lock.acquire())
        await asyncio.sleep(0)
        lock.release()  # handed to `first`, which is woken on the loop's next turn...
        first.cancel()  # ...but gives up before
        await asyncio.gather(first, return_exceptions=True)
        await asyncio.wait_for(second, 1)
        assert lock.locked()
        lock.release()
        assert not lock.locked()

    asyncio.run(main())


def test_a_waiter_on_a_closed_loop_is_passed_over() -> None:
    lock = KeyLock()
    gone = asyncio.new_event_loop()

    async def hold_and_queue() -> asyncio.Task[None]:
        await lock.acquire()  # held by this test
        waiter = asyncio.create_task(lock.acquire())  # a waiter on `gone`
        await asyncio.sleep(0)
        return waiter

    waiter = gone.run_until_complete(hold_and_queue())
    assert not waiter.done()
    gone.close()  # its waiter waits no more

    async def main() -> None:
        taker = asyncio.create_task(lock.acquire())
        await asyncio.sleep(0)
        lock.release()
        await asyncio.wait_for(taker, 1)
        assert lock.locked()

    asyncio.run(main())
