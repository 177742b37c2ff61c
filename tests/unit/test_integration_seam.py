"""The seam an integration builds on: a spec run for a dispatch, a claim resumed by
reference and ended with a checked commit, the job id of a key."""

import asyncio

import pytest
from pydantic import TypeAdapter

from rill_executor import AsyncClaim, AsyncLedger, Ledger, StaleAttempt, UsageError, current_claim
from rill_executor.integration import IdempotentOptions
from rill_executor.store import SYSTEM_CLOCK, AsyncMemoryStore, MemoryStore
from rill_executor.testing import VirtualClock


def test_the_job_id_is_the_one_the_handler_claims() -> None:
    with Ledger("memory://", namespace="seam") as ledger:

        @ledger.idempotent(name="refund", key=lambda order: order)
        def refund(order: str) -> str:
            return current_claim().job_id

        claimed = refund("o-1")
        assert ledger.job_id("o-1", handler=refund) == claimed
        assert ledger.job_id("o-1") != claimed  # the handler scopes the key


def test_a_spec_runs_with_the_dispatch_attempt_id_and_replays() -> None:
    async def scenario() -> None:
        ledger = AsyncLedger("memory://", namespace="seam")
        runs: list[str] = []

        async def handler(order: str) -> str:
            runs.append(order)
            return f"done {order}"

        spec = ledger.spec(handler, IdempotentOptions(key=lambda order: order, name="h"))
        first = await ledger.run(spec, ("o-1",), attempt_id="dispatch-1", origin={"n": 1})
        again = await ledger.run(spec, ("o-1",), attempt_id="dispatch-2", origin={"n": 2})
        assert first == again == "done o-1" and runs == ["o-1"]
        status = await ledger.status("o-1", handler="h")
        assert status is not None
        assert [(a.attempt_id, a.origin) for a in status.attempts] == [("dispatch-1", {"n": 1})]

    asyncio.run(scenario())


def test_a_resumed_claim_commits_a_checked_result_and_a_superseded_one_writes_nothing() -> None:
    async def scenario() -> None:
        clock = VirtualClock()
        store = AsyncMemoryStore(MemoryStore(clock=clock))
        ledger = AsyncLedger(store, namespace="seam", lease=0.05, clock=clock)
        granted = await ledger.claim("k", attempt_id="a-1")
        assert isinstance(granted, AsyncClaim)
        resumed = ledger.resume("k", job_id=granted.job_id, attempt_id="a-1", fence=granted.fence)
        with pytest.raises(UsageError, match="worker w-1"):
            resumed.commit_of("x", adapter=TypeAdapter(int), source="worker w-1")
        clock.advance(0.1)
        await ledger.claim("k", attempt_id="a-2")  # takes the lapsed job over
        with pytest.raises(StaleAttempt):
            await resumed.finish(resumed.commit_of({"late": True}))
        status = await ledger.status("k")
        assert status is not None and status.result is None

    asyncio.run(scenario())


def test_a_hand_off_outside_a_mounted_handler_says_where_it_belongs() -> None:
    from rill_executor.rillflow import RillFlowExecutor

    async def scenario() -> None:
        ledger = AsyncLedger("memory://", namespace="seam")
        executor = RillFlowExecutor(ledger, token_secret="s" * 32, engines=["127.0.0.1"])
        with pytest.raises(UsageError, match="inside a handler mounted with task"):
            executor.hand_off(60)

    asyncio.run(scenario())


def test_a_ledger_gives_the_clock_it_was_built_with() -> None:
    """What an integration reads the time from (``RillFlowExecutor`` does)."""
    clock = VirtualClock()
    assert (
        AsyncLedger(AsyncMemoryStore(MemoryStore(clock=clock)), namespace="t", clock=clock).clock
        is clock
    )
    assert Ledger("memory://", namespace="t").clock is SYSTEM_CLOCK
