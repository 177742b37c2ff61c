"""The deliverer's timings, chosen against the engine's (``rill_executor.rillflow._timings``):
a jittered backoff capped at 30 s whose tries outlast the engine's lock expiry, and a notice
lease that outlasts one send and no more. The backoff is a pure function, checked without
sleeping; the lease on the in-memory store's virtual clock, with a real HTTP engine; the
deliverer's polls and an outage's length on its ledger's virtual clock."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from rill_executor import AsyncClaim, AsyncLedger, StoreUnavailable
from rill_executor._keys import job_id
from rill_executor.rillflow import CALLBACK_TIMEOUT, MAX_ATTEMPTS, NOTICE_LEASE, Deliverer
from rill_executor.rillflow._callbacks import retry_delay
from rill_executor.rillflow._engines import Engines
from rill_executor.rillflow._timings import ENGINE_LOCK_EXPIRY, ENGINE_LOCK_WAIT
from rill_executor.store import AsyncMemoryStore, MemoryStore, NoticeBatch, Watch
from rill_executor.testing import VirtualClock
from rill_executor.testing.rillflow import serve_app

SEEDS = [f"job-{n}/1.{n % 3 + 1}" for n in range(400)]


@pytest.mark.parametrize("attempts", range(1, 13))
def test_a_retry_is_a_full_jitter_draw_under_a_ceiling_doubling_to_30_s(attempts: int) -> None:
    ceiling = min(30.0, 2.0 ** (attempts - 1))
    delays = [retry_delay(attempts, seed=seed) for seed in SEEDS]
    assert all(0.0 <= d <= ceiling for d in delays)
    # full jitter: the draws fill [0, ceiling], not a band near it
    assert min(delays) < 0.05 * ceiling and max(delays) > 0.95 * ceiling
    assert 0.4 * ceiling < sum(delays) / len(delays) < 0.6 * ceiling


def test_a_retry_delay_is_the_same_for_a_seed_and_differs_between_notices() -> None:
    again = [retry_delay(5, seed=seed) for seed in SEEDS]
    assert [retry_delay(5, seed=seed) for seed in SEEDS] == again
    assert len(set(again)) == len(SEEDS)  # notices held back together come back apart
    assert retry_delay(5, seed="job/1.1") != retry_delay(6, seed="job/1.1")


def test_the_tries_outlast_a_lock_the_engine_holds_for_a_dead_holder() -> None:
    # A callback of a task whose engine lock holder died is answered 30101 until the lock
    # expires (300 s) and one wait more: whatever the draws, a notice is not dropped before.
    spans = [sum(retry_delay(n, seed=seed) for n in range(1, MAX_ATTEMPTS)) for seed in SEEDS]
    assert min(spans) > ENGINE_LOCK_EXPIRY + ENGINE_LOCK_WAIT


def test_a_huge_count_of_tries_stays_at_the_cap() -> None:
    assert 0.0 <= retry_delay(10_000, seed="job/1.1") <= 30.0


class Engine:
    """An engine whose first callback never gets an answer (its sender dies waiting), and
    whose later ones are applied."""

    def __init__(self) -> None:
        self.posted: list[str] = []
        self.released = threading.Event()
        self.app = FastAPI()

        @self.app.post("/flow/trigger.json")
        def trigger(request: Request) -> JSONResponse:
            self.posted.append(str(request.url))
            if len(self.posted) == 1:
                self.released.wait(30)
            return JSONResponse({"result": "ok"})


@pytest.fixture
def engine() -> Iterator[tuple[Engine, str]]:
    sink = Engine()
    with serve_app(sink.app) as url:
        yield sink, url
        sink.released.set()


def test_a_notice_whose_sender_died_is_sent_again_a_notice_lease_later(
    engine: tuple[Engine, str],
) -> None:
    sink, url = engine
    clock = VirtualClock()
    store = AsyncMemoryStore(MemoryStore(clock=clock))

    def deliverer(owner: str) -> Deliverer:
        ledger = AsyncLedger(store, namespace="backoff", lease=30, clock=clock)
        found = Deliverer(ledger, owner=owner, poll=timedelta(seconds=0.1))
        found.engines = Engines(["127.0.0.1"])
        return found

    async def scenario() -> None:
        dead, other = deliverer("dead"), deliverer("other")
        target = {"url": f"{url}/flow/trigger.json?execution_id=E&task_name=t&ts=1"}
        claim = await dead.ledger.claim("video:1", watch=Watch("E#t", target))
        assert isinstance(claim, AsyncClaim)
        await claim.commit({"uri": "s3://out/1"})
        sending = asyncio.create_task(dead.deliver())
        for _ in range(100):  # until the engine holds the callback
            if sink.posted:
                break
            await asyncio.sleep(0.05)
        sending.cancel()  # the sender dies mid-send, holding the notice's lease
        with pytest.raises(asyncio.CancelledError):
            await sending

        clock.advance(CALLBACK_TIMEOUT)  # its callback could still be answered: not sent twice
        assert await other.deliver() == []
        clock.advance(ENGINE_LOCK_WAIT + 5 - CALLBACK_TIMEOUT)  # the notice lease has run out
        (sent,) = await other.deliver()
        assert (sent.classification.value, sent.settled) == ("ok", True)
        await other.stop()
        await dead.stop()

    asyncio.run(scenario())
    assert len(sink.posted) == 2
    assert CALLBACK_TIMEOUT > ENGINE_LOCK_WAIT  # the engine's answer comes before ours gives up
    assert NOTICE_LEASE > CALLBACK_TIMEOUT


def test_a_refused_callback_is_due_again_after_its_own_jittered_delay() -> None:
    clock = VirtualClock()
    store = AsyncMemoryStore(MemoryStore(clock=clock))
    refused = FastAPI()

    @refused.post("/flow/trigger.json")
    def trigger() -> JSONResponse:
        return JSONResponse({"error_code": "30101", "error": "lock"}, status_code=500)

    async def scenario(url: str) -> None:
        ledger = AsyncLedger(store, namespace=f"b-{uuid.uuid4().hex[:6]}", lease=30, clock=clock)
        target = {"url": f"{url}/flow/trigger.json?execution_id=E&task_name=t&ts=1"}
        claim = await ledger.claim("video:1", watch=Watch("E#t", target))
        assert isinstance(claim, AsyncClaim)
        await claim.commit({"uri": "s3://out/1"})
        deliverer = Deliverer(ledger)
        deliverer.engines = Engines(["127.0.0.1"])
        for attempts in (1, 2, 3, 4, 5, 6):
            (sent,) = await deliverer.deliver()
            assert sent.classification.value == "retry_later"
            status = await ledger.status("video:1")
            assert status is not None
            (notice,) = status.notices
            wait = (notice.due - clock_now(clock)).total_seconds()
            seed = f"{job_id(ledger.namespace, 'video:1')}/{notice.id}"
            expected = retry_delay(attempts, seed=seed)
            assert wait == pytest.approx(expected, abs=1e-5)
            clock.advance(wait)
            assert attempts == notice.attempts
        await deliverer.stop()
        await ledger.close()

    with serve_app(refused) as url:
        asyncio.run(scenario(url))


def clock_now(clock: VirtualClock) -> datetime:
    return datetime.fromtimestamp(clock.time_ns() / 1e9, UTC)


class Outage(AsyncMemoryStore):
    """A memory store whose notices cannot be leased while it is ``down``; it counts the
    deliverer's looks for due notices (one per round when none is due)."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(MemoryStore(clock=clock))
        self.down = False
        self.looks = 0

    async def lease_notices(
        self, namespace: str, owner: str, lease_us: int, limit: int
    ) -> NoticeBatch:
        self.looks += 1
        if self.down:
            raise StoreUnavailable("the store is down")
        return await super().lease_notices(namespace, owner, lease_us, limit)


async def _until(condition: Callable[[], bool]) -> None:
    """Wait for the deliverer's loop (in this event loop) to get there: it waits for work
    it was given, not for time to pass."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the deliverer's loop did not get there in 5 s")


async def _settled() -> None:
    """Let the event loop run what is ready (a round a timer started ends in a few steps)."""
    for _ in range(50):
        await asyncio.sleep(0)


def test_the_deliverers_loop_polls_and_times_an_outage_on_the_ledgers_clock(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A started deliverer polls a minute apart on the ledger's clock: each minute the test
    moves it is a round, with no wait; a ``wake`` between polls is a round of its own whose
    poll timer, due later, starts no extra one. Four minutes of a store outage are logged
    once, and their end with their length on the same clock."""
    clock = VirtualClock()
    store = Outage(clock)
    caplog.set_level(logging.WARNING, logger="rill_executor.rillflow")

    async def scenario() -> None:
        ledger = AsyncLedger(store, namespace="poll", lease=30, clock=clock)
        deliverer = Deliverer(ledger, poll=timedelta(minutes=1))
        deliverer.start()
        await _until(lambda: store.looks == 1)  # the first round, at once
        clock.advance(30)
        deliverer.wake()
        await _until(lambda: store.looks == 2)
        clock.advance(30)  # the first round's poll is due: that round no longer waits
        await _settled()
        assert store.looks == 2
        clock.advance(30)  # the woken round's poll
        await _until(lambda: store.looks == 3)
        store.down = True
        for looks in (4, 5, 6, 7):  # four polls, a minute apart, each failing
            clock.advance(60)
            await _until(lambda: store.looks == looks)  # noqa: B023 (awaited at once)
        store.down = False
        clock.advance(60)
        await _until(lambda: "works again" in caplog.text)
        assert store.looks == 8
        await deliverer.stop()

    asyncio.run(scenario())
    lines = [r.getMessage() for r in caplog.records if r.name == "rill_executor.rillflow"]
    assert lines == [
        "delivering completion notices failed; trying again every 60.0 s: the store is down",
        "delivering completion notices works again, after 240.0 s",
    ]


def test_a_notice_passed_over_is_due_again_after_a_tenth_of_its_age_on_the_clock() -> None:
    """A notice for an engine this executor does not serve waits a tenth of its age, the
    age on the ledger's clock: 50 s after its commit, 5 s."""
    clock = VirtualClock()
    store = AsyncMemoryStore(MemoryStore(clock=clock))

    async def scenario() -> None:
        ledger = AsyncLedger(store, namespace="aged", lease=30, clock=clock)
        target = {"url": "http://127.0.0.1:1/flow/trigger.json?execution_id=E&task_name=t&ts=1"}
        claim = await ledger.claim("video:1", watch=Watch("E#t", target))
        assert isinstance(claim, AsyncClaim)
        await claim.commit({"uri": "s3://out/1"})
        deliverer = Deliverer(ledger)
        deliverer.engines = Engines(["rill-flow-b"])
        clock.advance(50)
        (passed,) = await deliverer.deliver()
        assert passed.classification.value == "passed_over"
        status = await ledger.status("video:1")
        assert status is not None
        (notice,) = status.notices
        assert (notice.due - clock_now(clock)).total_seconds() == pytest.approx(5.0, abs=1e-5)

    asyncio.run(scenario())
