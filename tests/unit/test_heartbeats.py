"""The shared heartbeat thread of a ledger wakes for every claim that needs it: a handler
that starts after the thread has gone idle, or one that is due before all the others.

The thread waits on the ledger's clock: on a ``VirtualClock`` a renewal falls due when the test
advances the clock past it, and nothing else wakes the thread, so a wake-up it misses stays
missed (the renewal never comes) instead of being hidden by a real-time wait.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import math
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable

import pytest

from rill_executor import (
    AsyncLedger,
    InProgress,
    Ledger,
    current_async_claim,
    current_claim,
    fingerprint_of,
)
from rill_executor._heartbeat import Heartbeats
from rill_executor.store import (
    AsyncMemoryStore,
    AttemptRef,
    Completion,
    MemoryStore,
    StoreAnswer,
)
from rill_executor.testing import VirtualClock
from tests.clocks import SYSTEM_CLOCK

LEASE = 3.0  # seconds of the virtual clock; a renewal every second
PATIENCE = 10.0  # real seconds: how long a test waits for what only a broken thread withholds


def _within(done: Callable[[], bool], what: str) -> None:
    """Wait (real time, bounded) until ``done()``: the heartbeat thread runs on its own."""
    deadline = time.monotonic() + PATIENCE
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.001)


class _Renewals(MemoryStore):
    """The in-memory store on a virtual clock, counting the renewals it takes of each job
    ("": of all)."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock=clock)
        self.of_job: Counter[str] = Counter()

    def heartbeat(self, ref: AttemptRef, lease_us: int) -> StoreAnswer:
        answer = super().heartbeat(ref, lease_us)
        self.of_job[ref.job_id] += 1
        self.of_job[""] += 1  # every job's
        return answer


def _more(counts: Counter[str], job: str, than: int) -> bool:
    return counts[job] > than


def _virtual(lease: float = LEASE) -> tuple[VirtualClock, _Renewals, Ledger]:
    clock = VirtualClock()
    store = _Renewals(clock)
    return clock, store, Ledger(store, namespace="hb", lease=lease, clock=clock)


def _slow(ledger: Ledger, store: _Renewals, clock: VirtualClock, name: str) -> list[object]:
    """A handler that lives four renewal intervals (more than its lease), each ended by a
    renewal, and looks at its job from outside after each: taken (InProgress) every time."""
    seen: list[object] = []

    @ledger.idempotent(key=lambda k: k, name=name)
    def slow(k: str) -> str:
        for _ in range(4):
            before = store.of_job[""]
            clock.advance(LEASE / 3)
            _within(
                functools.partial(_more, store.of_job, "", before),
                f"{name}: no renewal after {clock!r}",
            )
            seen.append(ledger.claim(f"{name}/{k}", fingerprint=fingerprint_of({"k": k})))
        return "survived"

    assert slow("k") == "survived"
    return seen


def _asleep(heartbeats: Heartbeats, clock: VirtualClock) -> bool:
    """The thread waits for a time still to come, or for good (``inf``)."""
    return heartbeats._sleeps_until > clock.monotonic_ns()


def test_a_handler_started_after_the_thread_went_idle_is_renewed() -> None:
    clock, store, ledger = _virtual()
    for name in ("first", "second"):
        seen = _slow(ledger, store, clock, name)
        assert all(isinstance(s, InProgress) for s in seen), (name, seen)
        # The thread drops the ended claim, waits one interval for a call, then for good.
        clock.advance(LEASE / 3)
        _within(lambda: _asleep(ledger.heartbeats, clock), "the thread never slept again")
        clock.advance(LEASE / 3)
        _within(lambda: ledger.heartbeats._sleeps_until == math.inf, "it never went idle")


def test_a_claim_due_before_the_others_wakes_the_thread() -> None:
    clock, store, ledger = _virtual()

    @ledger.idempotent(key=lambda k: k, name="long", heartbeat=30)
    def idle(k: str) -> str:
        return k

    idle("k")  # leaves the thread sleeping until its renewal, due in 30 s
    _within(lambda: _asleep(ledger.heartbeats, clock), "the thread never slept")
    seen = _slow(ledger, store, clock, "short")  # renewed every second: must not wait 30 s
    assert all(isinstance(s, InProgress) for s in seen), seen


def test_closing_the_ledger_ends_its_heartbeat_thread() -> None:
    clock, store, ledger = _virtual()
    _slow(ledger, store, clock, "first")  # starts the thread
    thread = ledger.heartbeats._thread
    assert thread is not None and thread.is_alive()
    ledger.close()  # the thread sleeps for a renewal interval here: close must wake it
    assert not thread.is_alive(), "the closed ledger left its heartbeat thread running"


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


class _HeldRenewals(MemoryStore):
    """The in-memory store whose renewals wait until the test lets them go, and which logs
    each renewal's start and end and each finish, in order."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock=clock)
        self.renewing = threading.Event()
        self.release = threading.Event()
        self.log: list[tuple[str, str]] = []

    def heartbeat(self, ref: AttemptRef, lease_us: int) -> StoreAnswer:
        self.log.append(("renewal started", ref.job_id))
        self.renewing.set()
        try:
            assert self.release.wait(PATIENCE)
            return super().heartbeat(ref, lease_us)
        finally:
            self.log.append(("renewal ended", ref.job_id))

    def events(self) -> list[str]:
        return [event for event, _ in self.log]

    def finish(self, ref: AttemptRef, completion: Completion) -> StoreAnswer:
        self.log.append(("finish", ref.job_id))
        return super().finish(ref, completion)


def test_a_handler_that_ends_during_a_renewal_returns_after_it_and_none_follows() -> None:
    # The commit must not race a renewal of the same claim, and nothing renews an ended one.
    clock = VirtualClock()
    store = _HeldRenewals(clock)
    ledger = Ledger(store, namespace="hb", lease=LEASE, clock=clock)
    stopping = ledger.heartbeats._renewed  # what a returning handler waits on

    def release_once_the_return_waits_or_commits() -> None:
        # The renewal ends only after the handler's return is seen waiting for it (a waiter
        # on the condition) or, were it not to wait, after it committed: either way the log
        # says which came first, with no real-time guess.
        waiting = stopping._waiters  # type: ignore[attr-defined]  # CPython's, for years
        _within(lambda: bool(waiting) or "finish" in store.events(), "the handler never ended")
        store.release.set()

    @ledger.idempotent(key=lambda k: k, name="ends-mid-renewal")
    def handler(k: str) -> str:
        clock.advance(LEASE / 3)  # the first renewal falls due
        assert store.renewing.wait(PATIENCE)  # and is in flight
        threading.Thread(target=release_once_the_return_waits_or_commits, daemon=True).start()
        return k

    assert handler("k") == "k"
    assert store.events() == ["renewal started", "renewal ended", "finish"], store.log

    # A later claim's first renewal, due after any the ended claim could still have had:
    # once it has run, one of the ended claim would have run before it.
    store.release.clear()
    clock.advance(LEASE / 6)

    @ledger.idempotent(key=lambda k: k, name="probe")
    def probe(k: str) -> str:
        store.release.set()
        clock.advance(LEASE / 3)
        _within(lambda: store.events().count("renewal ended") == 2, "the probe was not renewed")
        return k

    assert probe("p") == "p"
    renewals = [job for event, job in store.log if event == "renewal started"]
    assert len(renewals) == 2 and renewals[0] != renewals[1], store.log  # none of "k" again


def _virtual_async() -> tuple[VirtualClock, _Renewals, AsyncLedger]:
    clock = VirtualClock()
    store = _Renewals(clock)
    return (
        clock,
        store,
        AsyncLedger(AsyncMemoryStore(store), namespace="hb", lease=LEASE, clock=clock),
    )


async def _until(done: Callable[[], bool], what: str) -> None:
    """``_within`` for a handler on an event loop: its renewals run on that same loop."""
    deadline = time.monotonic() + PATIENCE
    while not done():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.001)


async def _slow_async(
    ledger: AsyncLedger,
    store: _Renewals,
    clock: VirtualClock,
    name: str,
    turns: threading.Barrier | None = None,
) -> list[object]:
    """``_slow`` on an event loop: four renewal intervals, each ended by its own renewal.
    Handlers on several threads share the clock through ``turns``: one of them moves it
    each round, once all have been renewed (moved by each, it would pass a lease between
    two renewals of a loop that did not run meanwhile)."""
    seen: list[object] = []

    @ledger.idempotent(key=lambda k: k, name=name)
    async def slow(k: str) -> str:
        job = current_async_claim().job_id
        for _ in range(4):
            before = store.of_job[job]
            if turns is None or turns.wait(PATIENCE) == 0:
                clock.advance(LEASE / 3)
            await _until(
                functools.partial(_more, store.of_job, job, before),
                f"{name}: no renewal at {clock!r}",
            )
            seen.append(await ledger.claim(f"{name}/{k}", fingerprint=fingerprint_of({"k": k})))
        return "survived"

    assert await slow("k") == "survived"
    return seen


def test_an_async_claim_due_before_the_others_gets_its_renewal() -> None:
    clock, store, ledger = _virtual_async()

    async def scenario() -> list[object]:
        @ledger.idempotent(key=lambda k: k, name="long", heartbeat=30)
        async def idle(k: str) -> str:
            return k

        await idle("k")  # the loop's first renewal timer is armed 30 s out
        return await _slow_async(ledger, store, clock, "short")  # due every second

    seen = asyncio.run(scenario())
    assert all(isinstance(s, InProgress) for s in seen), seen


def test_one_ledger_renews_async_claims_on_each_event_loop_it_serves() -> None:
    clock, store, ledger = _virtual_async()
    for name in ("first", "second"):  # a new event loop each time, as asyncio.run makes
        seen = asyncio.run(_slow_async(ledger, store, clock, name))
        assert all(isinstance(s, InProgress) for s in seen), (name, seen)
    turns = threading.Barrier(2)
    threads = [
        threading.Thread(
            target=lambda n=n: results.append(
                asyncio.run(_slow_async(ledger, store, clock, n, turns))
            )
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


@pytest.mark.real_clock(SYSTEM_CLOCK)
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
