"""Time as a port: the ledger and the in-memory store on a ``VirtualClock`` read no other
clock, so a lease runs out, a joining call gives up and a claim's lease is judged without a
wall-clock wait."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from rill_executor import (
    AsyncLedger,
    Claim,
    ConfigError,
    InProgress,
    JobInProgress,
    Ledger,
    fingerprint_of,
)
from rill_executor._idempotent import IdempotentOptions
from rill_executor._steps.call import Run, call
from rill_executor.outputs import MemoryOutputStore
from rill_executor.store import AsyncMemoryStore, MemoryStore
from rill_executor.testing import VirtualClock

BUSY = fingerprint_of({"k": "busy"})  # what a call of work("busy") claims with


def _ledger(clock: VirtualClock, lease: float = 10.0) -> Ledger:
    return Ledger(MemoryStore(clock=clock), namespace="clock", lease=lease, clock=clock)


def test_a_lease_runs_out_when_the_virtual_clock_passes_it() -> None:
    clock = VirtualClock()
    ledger = _ledger(clock)
    first = ledger.claim("k")
    assert isinstance(first, Claim)
    assert first.lease_left() == pytest.approx(10.0)
    clock.advance(9.5)
    assert first.lease_left() == pytest.approx(0.5)
    assert isinstance(ledger.claim("k"), InProgress)
    clock.advance(0.5)
    second = ledger.claim("k")
    assert isinstance(second, Claim) and second.fence == first.fence + 1


def test_a_joining_call_waits_on_the_ledgers_clock() -> None:
    """``wait=`` of an hour, against a job another attempt holds: the waits pass on the
    virtual clock (a minute of looks takes no real time), then ``JobInProgress``."""
    clock = VirtualClock()
    ledger = _ledger(clock, lease=7200.0)
    held = ledger.claim("work/busy", fingerprint=BUSY)  # the handler's job, held elsewhere
    assert isinstance(held, Claim)

    @ledger.idempotent(key=lambda k: k, wait=timedelta(hours=1), name="work")
    def work(k: str) -> str:
        return k

    began = time.monotonic()
    with pytest.raises(JobInProgress):
        work("busy")
    assert time.monotonic() - began < 30  # an hour of waiting did not pass for real
    assert clock.monotonic_ns() >= 3600 * 10**9


def test_an_async_ledger_sleeps_on_its_clock() -> None:
    clock = VirtualClock()
    store = AsyncMemoryStore(MemoryStore(clock=clock))
    ledger = AsyncLedger(store, namespace="clock", lease=7200.0, clock=clock)

    @ledger.idempotent(key=lambda k: k, wait=timedelta(minutes=10), name="work")
    async def work(k: str) -> str:
        return k

    async def main() -> None:
        assert not isinstance(await ledger.claim("work/busy", fingerprint=BUSY), InProgress)
        with pytest.raises(JobInProgress):
            await work("busy")

    asyncio.run(main())
    assert clock.monotonic_ns() >= 600 * 10**9


def test_the_memory_store_keeps_its_own_time_on_a_virtual_clock() -> None:
    clock = VirtualClock()
    store = MemoryStore(clock=clock)
    before = store.status("nothing")
    assert before is None
    ledger = Ledger(store, namespace="clock", clock=clock)
    claim = ledger.claim("k")
    assert isinstance(claim, Claim)
    clock.advance(3)
    status = ledger.status("k")
    assert status is not None
    assert status.store_time.timestamp() == pytest.approx(clock.time_ns() / 1e9)


def test_outputs_are_aged_on_the_ledgers_clock() -> None:
    """Objects no record accounts for are aged by the ledger's clock, orphans of a kept
    record by the store's, against the output store's (all one virtual clock here): exactly
    the time the test let pass, and an orphan's grace runs out with no real wait."""
    clock = VirtualClock()
    outputs = MemoryOutputStore(clock=clock)
    ledger = Ledger(
        MemoryStore(clock=clock), namespace="clock", lease=10, retention=60, outputs=outputs,
        clock=clock,
    )  # fmt: skip

    def failed(key: str) -> None:
        claim = ledger.claim(key)
        assert isinstance(claim, Claim)
        claim.outputs.put(f"{key}.bin", b"never committed")
        claim.fail("crashed", retryable=True)

    failed("gone")
    outputs.put("clock/stray.bin", b"not ours")
    clock.advance(90)
    failed("kept")
    assert ledger.purge().purged == 1  # "gone": its object is no longer accounted for
    clock.advance(60)
    report = ledger.collect_orphans(grace=timedelta(minutes=2))
    assert sorted((e.name, e.age) for e in report.unknown) == [
        ("gone.bin", timedelta(seconds=150)),
        ("stray.bin", timedelta(seconds=150)),
    ]
    assert [(e.name, e.age) for e in report.kept_young] == [("kept.bin", timedelta(seconds=60))]
    clock.advance(60)
    assert [e.name for e in ledger.collect_orphans(grace=timedelta(minutes=2)).deleted] == [
        "kept.bin"
    ]


def test_a_virtual_clock_never_goes_back_and_is_shared_safely() -> None:
    clock = VirtualClock()
    with pytest.raises(ValueError, match="does not go back"):
        clock.advance(-1)

    def tick(move: Callable[[float], None]) -> None:
        for _ in range(1000):
            move(0.001)

    threads = [threading.Thread(target=tick, args=(move,)) for move in (clock.advance, clock.sleep)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert clock.monotonic_ns() == 2 * 1000 * 1_000_000


def test_a_sleep_shorter_than_a_nanosecond_lets_one_pass() -> None:
    """A positive sleep always lets time pass, as a real one does: a loop sleeping what is
    left of a wait, a float less than a nanosecond after rounding, ends (the simulation's
    seed 39237 spun for ever on one)."""
    clock = VirtualClock()
    clock.sleep(3e-10)
    assert clock.monotonic_ns() == 1
    asyncio.run(clock.asleep(1e-12))
    assert clock.monotonic_ns() == 2
    clock.sleep(0.0)
    clock.sleep(-1.0)  # a wait already over: no time passes, as before
    assert clock.monotonic_ns() == 2


def test_a_step_closed_at_its_run_writes_nothing() -> None:
    """A driver that drops a call while its handler runs (its process stopping) closes the
    step: it ends without another action, where it used to try to record a failure and
    raise ``RuntimeError: generator ignored GeneratorExit``."""
    ledger = _ledger(VirtualClock())

    def work(k: str) -> str:
        return k

    spec = ledger.spec(work, IdempotentOptions(key=lambda k: k, name="work"))
    step = call(ledger._core, spec, ("k",), {}, {})
    action = step.send(None)  # the claim
    action = step.send(ledger._perform(action))  # the claim wrapped
    action = step.send(ledger._perform(action))
    assert isinstance(action, Run)
    step.close()
    status = ledger.status("work/k")
    assert status is not None and status.state.value == "processing"


@pytest.mark.parametrize("clock", [5, "now", object()])
def test_something_that_is_not_a_clock_is_a_config_error_naming_what_it_lacks(
    clock: object,
) -> None:
    with pytest.raises(ConfigError, match="is not a Clock: it has no monotonic_ns"):
        Ledger("memory://", namespace="clock", clock=clock)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="VirtualClock"):
        MemoryStore(clock=clock)  # type: ignore[arg-type]
