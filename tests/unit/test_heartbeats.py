"""The shared heartbeat thread of a ledger wakes for every claim that needs it: a handler
that starts after the thread has gone idle, or one that is due before all the others."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref

import pytest

from rill_executor import (
    AsyncLedger,
    InProgress,
    Ledger,
    current_async_claim,
    current_claim,
    fingerprint_of,
)
from rill_executor.store import AsyncMemoryStore, AttemptRef, MemoryStore, StoreAnswer


def _slow(ledger: Ledger, name: str, nap: float) -> list[object]:
    seen: list[object] = []

    @ledger.idempotent(key=lambda k: k, name=name)
    def slow(k: str) -> str:
        for _ in range(3):
            time.sleep(nap)
            seen.append(ledger.claim(f"{name}/{k}", fingerprint=fingerprint_of({"k": k})))
        return "survived"

    assert slow("k") == "survived"
    return seen


def test_a_handler_started_after_the_thread_went_idle_is_renewed() -> None:
    ledger = Ledger("memory://", namespace="hb", lease=0.3)
    for name in ("first", "second"):
        seen = _slow(ledger, name, 0.25)
        assert all(isinstance(s, InProgress) for s in seen), (name, seen)
        time.sleep(0.3)  # the thread drops the ended claim and sleeps with nothing due


def test_a_claim_due_before_the_others_wakes_the_thread() -> None:
    ledger = Ledger("memory://", namespace="hb", lease=0.3)

    @ledger.idempotent(key=lambda k: k, name="long", heartbeat=30)
    def idle(k: str) -> str:
        return k

    idle("k")  # leaves an entry due in 30 s at the head of the schedule
    time.sleep(0.2)  # the thread sleeps towards it
    seen = _slow(ledger, "short", 0.25)  # renewed every 0.1 s: must not wait 30 s
    assert all(isinstance(s, InProgress) for s in seen), seen


def test_many_short_calls_do_not_keep_their_ended_claims() -> None:
    # Each call queues its first renewal, due only in 10 s; a run of short calls must not
    # pile up that long a queue of ended claims (memory, and a slower push for every call).
    ledger = Ledger("memory://", namespace="hb", lease=30)
    alive: list[weakref.ref[object]] = []

    @ledger.idempotent(key=lambda k: k, name="short")
    def short(k: str) -> str:
        alive.append(weakref.ref(current_claim()))
        return k

    for i in range(500):
        short(str(i))
    gc.collect()
    assert sum(ref() is not None for ref in alive) <= 100


class _SlowRenewals(MemoryStore):
    """The in-memory store whose renewals take a while, and say when they ran."""

    def __init__(self) -> None:
        super().__init__()
        self.renewing = threading.Event()
        self.started: list[float] = []
        self.ended: list[float] = []

    def heartbeat(self, ref: AttemptRef, lease_us: int) -> StoreAnswer:
        self.started.append(time.monotonic())
        self.renewing.set()
        try:
            time.sleep(0.3)
            return super().heartbeat(ref, lease_us)
        finally:
            self.ended.append(time.monotonic())


def test_a_handler_that_ends_during_a_renewal_returns_after_it_and_none_follows() -> None:
    # The commit must not race a renewal of the same claim, and nothing renews an ended one.
    store = _SlowRenewals()
    ledger = Ledger(store, namespace="hb", lease=3)

    @ledger.idempotent(key=lambda k: k, name="ends-mid-renewal")
    def handler(k: str) -> str:
        assert store.renewing.wait(10)  # the first renewal (due after 1 s) is in flight
        return k

    assert handler("k") == "k"
    returned = time.monotonic()
    time.sleep(1.5)  # a renewal scheduled after the end would have started by now
    assert len(store.started) == 1 and store.ended[0] <= returned, (store.started, store.ended)


async def _slow_async(ledger: AsyncLedger, name: str, nap: float) -> list[object]:
    seen: list[object] = []

    @ledger.idempotent(key=lambda k: k, name=name)
    async def slow(k: str) -> str:
        for _ in range(3):
            await asyncio.sleep(nap)
            seen.append(await ledger.claim(f"{name}/{k}", fingerprint=fingerprint_of({"k": k})))
        return "survived"

    assert await slow("k") == "survived"
    return seen


def test_an_async_claim_due_before_the_others_gets_its_renewal() -> None:
    ledger = AsyncLedger("memory://", namespace="hb", lease=0.3)

    async def scenario() -> list[object]:
        @ledger.idempotent(key=lambda k: k, name="long", heartbeat=30)
        async def idle(k: str) -> str:
            return k

        await idle("k")  # the loop's first renewal timer is armed 30 s out
        return await _slow_async(ledger, "short", 0.25)  # due every 0.1 s

    seen = asyncio.run(scenario())
    assert all(isinstance(s, InProgress) for s in seen), seen


def test_one_ledger_renews_async_claims_on_each_event_loop_it_serves() -> None:
    ledger = AsyncLedger("memory://", namespace="hb", lease=0.3)
    for name in ("first", "second"):  # a new event loop each time, as asyncio.run makes
        seen = asyncio.run(_slow_async(ledger, name, 0.25))
        assert all(isinstance(s, InProgress) for s in seen), (name, seen)
    threads = [
        threading.Thread(
            target=lambda n=n: results.append(asyncio.run(_slow_async(ledger, n, 0.25)))
        )
        for n in ("third", "fourth")
    ]
    results: list[list[object]] = []
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2 and all(isinstance(s, InProgress) for r in results for s in r)


def test_a_closed_event_loop_is_not_kept_by_the_ledger() -> None:
    ledger = AsyncLedger("memory://", namespace="hb", lease=30)
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    @ledger.idempotent(key=lambda k: k, name="short")
    async def short(k: str) -> str:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        return k  # leaves its first renewal's timer armed, 10 s out

    asyncio.run(short("k"))
    gc.collect()
    assert loops and loops[0]() is None


def test_many_short_async_calls_do_not_keep_their_ended_claims() -> None:
    # As with a Ledger: every call's first renewal is due only in 10 s, and a run of short
    # calls on one event loop must not keep the ended ones until then.
    ledger = AsyncLedger("memory://", namespace="hb", lease=30)
    alive: list[weakref.ref[object]] = []

    @ledger.idempotent(key=lambda k: k, name="short")
    async def short(k: str) -> str:
        alive.append(weakref.ref(current_async_claim()))
        return k

    async def calls() -> None:
        for i in range(500):
            await short(str(i))
        gc.collect()
        assert sum(ref() is not None for ref in alive) <= 100

    asyncio.run(calls())


def test_a_stream_of_long_async_calls_renews_each_without_a_timer_firing_per_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each firing of a loop's timer passes over the claims still waiting for their first
    # renewal; one firing per call would make a stream of long calls cost its square.
    from rill_executor import _heartbeat

    firings = 0
    fire = _heartbeat._Timetable._fire

    def counted(self: _heartbeat._Timetable) -> None:
        nonlocal firings
        firings += 1
        fire(self)

    monkeypatch.setattr(_heartbeat._Timetable, "_fire", counted)
    store = _CountedRenewals()
    ledger = AsyncLedger(AsyncMemoryStore(store), namespace="hb", lease=3)

    @ledger.idempotent(key=lambda k: k, name="long", heartbeat=0.5)
    async def long(k: str) -> str:
        await asyncio.sleep(0.7)  # past its first renewal
        return k

    async def stream() -> None:
        calls = []
        for i in range(200):
            calls.append(asyncio.create_task(long(str(i))))
            await asyncio.sleep(0.001)  # one call started every millisecond or so
        await asyncio.gather(*calls)

    asyncio.run(stream())
    assert store.renewed >= 200, store.renewed  # every call was renewed
    assert firings <= 60, firings  # about one per tenth of an interval, not one per call


class _CountedRenewals(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.renewed = 0

    def heartbeat(self, ref: AttemptRef, lease_us: int) -> StoreAnswer:
        self.renewed += 1
        return super().heartbeat(ref, lease_us)
