"""A local engine for the example executor, the way a newcomer starts one: the simulator on
the port ``RILL_ENGINES`` names, and a refusal that says what to change, in the answer and
in the executor's log."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel

from rill_executor import AsyncLedger, ConfigError
from rill_executor.rillflow import Engines, RillFlowExecutor
from rill_executor.rillflow._refusals import Refusals
from rill_executor.testing import VirtualClock
from rill_executor.testing.rillflow import EngineSimulator, Pattern, Task, TaskStatus

from ..adapters.s3.conftest import free_port
from .service import ExecutorService


class Frame(BaseModel):
    frame: int


def test_the_simulator_listens_on_the_port_it_is_given() -> None:
    port = free_port()
    with EngineSimulator(port=port) as engine:
        assert engine.url == f"http://127.0.0.1:{port}"
        assert httpx.get(f"{engine.url}/no-such-page", timeout=5).status_code == 404  # it answers
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            EngineSimulator(port=port).start()


@pytest.mark.parametrize("port", [-1, 65536, "8080", True])
def test_a_port_out_of_range_is_a_config_error(port: object) -> None:
    with pytest.raises(ConfigError, match="port must be a number from 0 to 65535"):
        EngineSimulator(port=port).start()  # type: ignore[arg-type]


def test_engines_from_the_environment_are_named_in_refusals() -> None:
    named = Engines.from_env(environ={"RILL_ENGINES": "http://127.0.0.1:8080, rill-flow"})
    assert named.refusal("http://127.0.0.1:8080/flow/trigger.json") is None
    assert named.refusal("https://rill-flow/flow/trigger.json") is None
    refusal = named.refusal("http://127.0.0.1:41234/flow/trigger.json")
    assert refusal is not None and "name the engine in RILL_ENGINES" in refusal
    unset = Engines.from_env(environ={"RILL_ENGINES": " "})
    assert not unset.configured
    refusal = unset.refusal("http://10.0.0.7/flow/trigger.json", "127.0.0.1")
    assert refusal is not None and "name the engine in RILL_ENGINES" in refusal
    with pytest.raises(ConfigError, match="in RILL_ENGINES"):
        Engines.from_env(environ={"RILL_ENGINES": "ftp://rill-flow"})


def _service() -> tuple[RillFlowExecutor, FastAPI]:
    ledger = AsyncLedger("memory://", namespace="frames")
    executor = RillFlowExecutor(ledger, engines=["http://rill-flow:8080"])

    @executor.task("/frames", key=lambda job: str(job.frame), name="frame")
    async def frame(job: Frame) -> int:
        return job.frame

    app = FastAPI(lifespan=executor.lifespan)
    app.include_router(executor.router)
    return executor, app


def test_a_refused_dispatch_is_logged_with_its_reason_once_per_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    executor, app = _service()

    async def dispatch(callback: str, body: object) -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://executor") as http:
            return await http.post(
                "/frames?execution_id=E1&name=frame",
                json=body,
                headers={"X-Mode": "async", "X-Callback-Url": callback},
            )

    async def scenario() -> list[int]:
        outside = "http://127.0.0.1:41234/flow/trigger.json"
        answers = [await dispatch(outside, {"frame": n}) for n in range(3)]
        answers.append(await dispatch("http://rill-flow:8080/flow", {"frame": "x"}))
        answers.append(await dispatch("http://rill-flow:8080/flow", {"frame": "y"}))
        await executor.drain()
        return [answer.status_code for answer in answers]

    with caplog.at_level(logging.WARNING, logger="rill_executor.rillflow"):
        assert asyncio.run(scenario()) == [400] * 5
    logged = [r.getMessage() for r in caplog.records if "refused a dispatch" in r.getMessage()]
    assert len(logged) == 2, logged  # one per cause: the callback, the input
    assert "frame (400 RefusedCallback)" in logged[0]
    assert "127.0.0.1:41234" in logged[0] and "RillFlowExecutor(engines=[...])" in logged[0]
    assert "frame (400 BadDispatch)" in logged[1]


def test_a_cause_is_logged_again_after_a_minute_with_how_many_were_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = VirtualClock()
    refusals = Refusals(logging.getLogger("rill_executor.rillflow"), clock=clock)
    with caplog.at_level(logging.WARNING, logger="rill_executor.rillflow"):
        for now in (0.0, 10.0, 59.9, 60.0, 61.0):
            clock.advance(now - clock.monotonic_ns() / 1e9)
            refusals.refused("frame", "RefusedCallback", 400, f"at {now}")
        refusals.refused("other", "RefusedCallback", 400, "another handler")
    records = [r.getMessage() for r in caplog.records]
    reasons = [r.split(": ", 1)[1].split(" (")[0] for r in records]
    assert reasons == ["at 0.0", "at 60.0", "another handler"]
    assert "2 more since the last report" in records[1]


@pytest.mark.slow
def test_the_example_executor_and_a_simulator_on_the_port_of_rill_engines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example's README: ``RILL_ENGINES=http://127.0.0.1:8080`` and
    ``EngineSimulator(port=8080)`` (a free port here); a simulator elsewhere is refused,
    and the answer and the executor's log both name ``RILL_ENGINES``."""
    port = free_port()
    monkeypatch.setenv("RILL_ENGINES", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("RILL_NAMESPACE", f"segments-{uuid.uuid4().hex[:8]}")
    service = ExecutorService(f"sqlite:///{tmp_path / 'jobs.db'}", tmp_path, workers=1).start()
    try:
        job = {"video": "A", "segment": 1, "profile": "h264-v2"}
        task = Task("encode", f"{service.url}/segments", pattern=Pattern.TASK_ASYNC, input=job)
        with EngineSimulator(port=port) as engine:
            view = engine.wait_for(engine.submit(task), "encode", timeout=30)
            assert view.status is TaskStatus.SUCCEED, view
        with EngineSimulator() as elsewhere:
            execution = elsewhere.submit(task)
            view = elsewhere.wait_for(execution, "encode", timeout=30)
            answer = elsewhere.dispatches(execution, "encode")[0]
        assert view.status is TaskStatus.FAILED, view
        assert answer.status_code == 400
        assert "name the engine in RILL_ENGINES" in (answer.response_text or "")
    finally:
        service.stop()
    log = service.log()
    assert "refused a dispatch to segment (400 RefusedCallback)" in log, log
    assert "RILL_ENGINES" in log
