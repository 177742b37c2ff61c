"""Services that share a store and a namespace, each with engines of its own (invariant 20):
a deliverer leaves the notices it may not send to one that may, on every store, with a
real HTTP engine.

Service A names its engine by the address it calls back on (127.0.0.1), service B names
its own (rill-flow-b). A's first callbacks are answered 500/30101 (the engine's task lock),
then A stops: its notices come due again while only B's deliverer runs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from rill_executor import AsyncClaim, AsyncLedger
from rill_executor.rillflow import Deliverer
from rill_executor.rillflow._engines import Engines
from rill_executor.store import Watch
from rill_executor.testing.rillflow import serve_app

TASKS = 5


@pytest.fixture(params=["sqlite", "postgres", "mariadb", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


class Engine:
    """An engine that answers every callback 500/30101 while ``busy``, then 200 ok."""

    def __init__(self) -> None:
        self.busy = True
        self.posted: list[str] = []
        self.app = FastAPI()

        @self.app.post("/flow/trigger.json")
        async def trigger(request: Request) -> JSONResponse:
            self.posted.append(request.query_params["execution_id"])
            if self.busy:
                return JSONResponse({"code": "30101", "error": "task lock"}, status_code=500)
            return JSONResponse({"result": "ok"})


@pytest.fixture
def engine() -> Iterator[tuple[Engine, str]]:
    sink = Engine()
    with serve_app(sink.app) as url:
        yield sink, url


def _deliverer(ledger: AsyncLedger, engines: list[str], owner: str) -> Deliverer:
    deliverer = Deliverer(ledger, owner=owner)
    deliverer.engines = Engines(engines)
    return deliverer


async def _until_settled(deliverer: Deliverer, count: int) -> list[str]:
    """Deliver until ``count`` notices were settled; each one's first classification. A
    notice settled once may come due again before the last of them does (retries are
    jittered, a notice passed over is due again a second later): it counts once."""
    done: dict[tuple[str, str], str] = {}
    for _ in range(200):
        for delivery in await deliverer.deliver():
            done.setdefault((delivery.key, delivery.notice_id), delivery.classification.value)
        if len(done) >= count:
            return list(done.values())
        await asyncio.sleep(0.1)
    raise AssertionError(f"only {done} after 20 s")


def test_a_notice_for_another_services_engine_waits_for_it(
    store_url: str, engine: tuple[Engine, str]
) -> None:
    sink, url = engine
    namespace = f"shared-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        a = AsyncLedger(store_url, namespace=namespace, lease=30)
        for n in range(TASKS):
            target = {"url": f"{url}/flow/trigger.json?execution_id=E{n}&task_name=seg&ts=1"}
            claim = await a.claim(f"video:{n}", watch=Watch(f"E{n}#seg", target))
            assert isinstance(claim, AsyncClaim)
            await claim.commit({"uri": f"s3://out/{n}"})
        first = _deliverer(a, ["127.0.0.1"], "a-1")
        assert await _until_settled(first, TASKS) == ["retry_later"] * TASKS
        await first.stop()  # service A is down; its notices come due for B alone
        # A may have sent a notice again that came due while it sent the others (a first
        # retry waits 0 to 1 s): each try is counted on its notice, and A's alone.
        tries = {f"E{n}": sink.posted.count(f"E{n}") for n in range(TASKS)}
        sent_by_a = len(sink.posted)

        b = AsyncLedger(store_url, namespace=namespace, lease=30)
        other = _deliverer(b, ["rill-flow-b"], "b-1")
        assert await _until_settled(other, TASKS) == ["passed_over"] * TASKS
        await other.stop()
        assert len(sink.posted) == sent_by_a  # B sent nothing
        for n in range(TASKS):
            status = await b.status(f"video:{n}")
            assert status is not None
            (notice,) = status.notices
            assert (notice.status, notice.attempts, notice.unsent) == (
                "pending",
                tries[f"E{n}"],
                False,
            )
            assert notice.outcome == "passed_over" and notice.detail is not None
            assert "not on an engine this executor serves" in notice.detail
        listed = await b.jobs()
        assert {j.pending_notices for j in listed.jobs} == {1}

        sink.busy = False
        again = AsyncLedger(store_url, namespace=namespace, lease=30)
        restarted = _deliverer(again, ["127.0.0.1"], "a-2")
        assert await _until_settled(restarted, TASKS) == ["ok"] * TASKS
        await restarted.stop()
        for n in range(TASKS):
            status = await again.status(f"video:{n}")
            assert status is not None
            (notice,) = status.notices
            assert (notice.status, notice.attempts) == ("delivered", tries[f"E{n}"] + 1)  # not B's
        assert sorted(sink.posted[sent_by_a:]) == [f"E{n}" for n in range(TASKS)]
        for ledger in (a, b, again):
            await ledger.close()

    asyncio.run(scenario())


def test_a_notice_no_deliverer_may_send_is_shown_with_why(store_url: str) -> None:
    """A notice nobody has tried, because every deliverer that leased it gave it back, is
    counted by the listing and the audit, with the reason."""
    namespace = f"unsent-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        ledger = AsyncLedger(store_url, namespace=namespace, lease=30)
        target = {"url": "http://rill-flow-a:8080/flow/trigger.json?execution_id=E&ts=1"}
        claim = await ledger.claim("k", watch=Watch("E#t", target))
        assert isinstance(claim, AsyncClaim)
        await claim.commit("done")
        deliverer = _deliverer(ledger, ["rill-flow-b"], "b-1")
        (passed,) = await deliverer.deliver()
        await deliverer.stop()
        assert passed.classification == "passed_over" and passed.settled
        listed = await ledger.jobs()
        assert [(j.pending_notices, j.unsent_notices) for j in listed.jobs] == [(1, 1)]
        status = await ledger.status("k")
        assert status is not None and status.notices[0].unsent
        report = await ledger.drill()
        await ledger.close()
        assert (report.notices_pending, report.notices_unsent) == (1, 1)
        assert report.notices_dropped == 0
        (why,) = report.unsent
        assert why.startswith("k: not sent by b-1") and "rill-flow-a" in why

    asyncio.run(scenario())
