"""Watched jobs are never left waiting: a background run's finish outlives a short store
outage, and a job whose owner died or lost the store is re-driven (run again, or ended as a
retryable failure the engine is told of), on every store, in-process with real servers.

The engine simulator has no task timeout here, so only the executor can end these tasks.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel

from rill_executor import AsyncLedger
from rill_executor.rillflow import RillFlowExecutor, status_router
from rill_executor.testing.drill._run import fitted_to_lease
from rill_executor.testing.rillflow import (
    EngineSimulator,
    Pattern,
    Retry,
    Task,
    TaskStatus,
    serve_app,
)

from ..adapters.faults.outage import StoreLink


class Segment(BaseModel):
    video: str
    segment: int


class Encoded(BaseModel):
    uri: str


class Executor:
    """An executor app whose handler counts its runs and, on its first run, holds until the
    test lets it go (``release``), without heartbeats when asked (a process that stalls)."""

    def __init__(self, url: str, *, lease: float, heartbeat: bool, max_redrives: int = 3) -> None:
        self.runs: Counter[str] = Counter()
        self.started = threading.Event()
        self.release = threading.Event()
        url = fitted_to_lease(url, lease)
        self.ledger = AsyncLedger(url, namespace=f"redrive-{uuid.uuid4().hex[:8]}", lease=30)
        self.executor = RillFlowExecutor(
            self.ledger,
            lease=timedelta(seconds=lease),
            max_redrives=max_redrives,
            engines=["127.0.0.1"],
        )
        self.app = FastAPI(lifespan=self.executor.lifespan)

        @self.executor.task(
            "/encode", key=lambda s: f"{s.video}:{s.segment}", name="encode", heartbeat=heartbeat
        )
        def encode(job: Segment) -> Encoded:
            key = f"{job.video}:{job.segment}"
            self.runs[key] += 1
            if self.runs[key] == 1:
                self.started.set()
                self.release.wait(30)
            return Encoded(uri=f"s3://out/{key}/run-{self.runs[key]}")

        self.app.include_router(self.executor.router)
        self.app.include_router(status_router([self.ledger], tokens={TOKEN: ["*"]}))

    def status(self, url: str, key: str) -> dict[str, Any]:
        """The job's status, read through the executor's status endpoint."""
        answer = httpx.get(
            f"{url}/rill/jobs/{self.ledger.namespace}/{key}?handler=encode",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        status: dict[str, Any] = answer.json()
        return status


TOKEN = "operator-token-0123456789"


@pytest.fixture(params=["memory", "sqlite", "postgres", "mariadb", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return "memory://"
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture(params=["postgres", "mariadb", "redis"])
def server_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
def engine() -> Iterator[EngineSimulator]:
    with EngineSimulator() as engine:
        yield engine


def _submit(engine: EngineSimulator, url: str, retry: Retry | None = None) -> tuple[str, str]:
    video = f"v{uuid.uuid4().hex[:8]}"
    task = Task(
        "encode",
        f"{url}/encode",
        pattern=Pattern.TASK_ASYNC,
        input={"video": video, "segment": 1},
        retry=retry or Retry(),
    )
    return engine.submit(task), f"{video}:1"


@pytest.mark.real_clock(
    "the lapse is judged on each real store's own clock (SQLite, PostgreSQL, Redis)"
)
def test_a_watched_job_whose_owner_stalled_is_run_again_and_told_once(
    store_url: str, engine: EngineSimulator
) -> None:
    service = Executor(store_url, lease=1.0, heartbeat=False)
    with serve_app(service.app, lifespan="on") as url:
        try:
            execution, key = _submit(engine, url)
            assert service.started.wait(20)
            # The first run holds without renewing its lease: the store marks the lapse,
            # the deliverer runs the job again, and the engine gets that run's result.
            view = engine.wait_for(execution, "encode", timeout=30)
            assert view.status is TaskStatus.SUCCEED, view
            assert view.output == {"uri": f"s3://out/{key}/run-2"}
        finally:
            service.release.set()  # the stalled run ends now: its commit is fenced
        engine.wait_until(lambda: service.executor._running == set(), timeout=20)
        status = service.status(url, key)
    assert service.runs == Counter({key: 2})
    assert [c.status_code for c in engine.callbacks(execution, "encode")] == [200]
    assert status["state"] == "succeeded" and status["result"] == view.output
    assert [a["outcome"] for a in status["attempts"]] == ["expired", "succeeded"]
    assert status["attempts"][1]["origin"]["redrive"] is True
    lapses = [n for n in status["notices"] if n["state"] == "processing"]
    assert [(n["fence"], n["outcome"]) for n in lapses] == [(1, "redriven")]


@pytest.mark.real_clock("the lapses are judged on each real store's own clock")
def test_a_job_that_lapses_too_often_fails_retryable_and_the_engine_retries(
    store_url: str, engine: EngineSimulator
) -> None:
    service = Executor(store_url, lease=1.0, heartbeat=False, max_redrives=0)
    with serve_app(service.app, lifespan="on") as url:
        try:
            execution, key = _submit(engine, url, Retry(max_retry_times=1, interval_in_seconds=0.5))
            view = engine.wait_for(execution, "encode", timeout=30)
            assert view.status is TaskStatus.SUCCEED, view
            assert view.output == {"uri": f"s3://out/{key}/run-2"}  # the engine's retry
        finally:
            service.release.set()
        status = service.status(url, key)
    applied = [c.status_code for c in engine.callbacks(execution, "encode")]
    assert applied == [200, 200]  # told of the lapse (FAILED), then of the retry's result
    outcomes = [a["outcome"] for a in status["attempts"]]
    assert outcomes == ["expired", "failed", "succeeded"]
    assert "lapsed" in status["attempts"][1]["error"]["message"]


@pytest.mark.real_clock("a real outage of the store, and a lease on the store's own clock")
def test_a_finish_that_meets_a_store_outage_is_written_when_the_store_is_back(
    server_url: str, engine: EngineSimulator, caplog: pytest.LogCaptureFixture
) -> None:
    link = StoreLink(server_url)
    service = Executor(link.url, lease=6.0, heartbeat=True)
    caplog.set_level(logging.WARNING, logger="rill_executor")
    try:
        with serve_app(service.app, lifespan="on") as url:
            execution, key = _submit(engine, url)
            assert service.started.wait(20)
            link.down()
            service.release.set()  # the commit meets the outage
            engine.wait_until(lambda: "did not reach the store" in caplog.text, timeout=20)
            time.sleep(1.0)
            link.up()
            view = engine.wait_for(execution, "encode", timeout=30)
            assert view.status is TaskStatus.SUCCEED, view
            status = service.status(url, key)
    finally:
        link.close()
    assert service.runs == Counter({key: 1})  # written within the lease: not run again
    assert [a["outcome"] for a in status["attempts"]] == ["succeeded"]
    assert [c.status_code for c in engine.callbacks(execution, "encode")] == [200]
    finishes = [r.getMessage() for r in caplog.records if r.name == "rill_executor"]
    assert sum("did not reach the store" in m for m in finishes) == 1, finishes
    assert sum("written at try" in m for m in finishes) == 1, finishes
