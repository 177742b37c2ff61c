"""A dispatch whose engine identifiers hold control characters is refused before any claim,
and leaves its business key as usable as before, on every store."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel

from rill_executor import AsyncLedger, JobState, JobStatus
from rill_executor.rillflow import RillFlowExecutor, status_router
from rill_executor.testing.rillflow import EngineSimulator, Pattern, Task, TaskStatus, serve_app


class Segment(BaseModel):
    video: str
    segment: int


class Service:
    def __init__(self, url: str) -> None:
        self.runs: Counter[str] = Counter()
        self.ledger = AsyncLedger(url, namespace=f"h{uuid.uuid4().hex[:12]}", lease=5)
        self.executor = RillFlowExecutor(self.ledger, engines=["127.0.0.1"])
        self.app = FastAPI(lifespan=self.executor.lifespan)

        @self.executor.task("/segments", key=lambda s: f"{s.video}:{s.segment}", name="encode")
        def encode(segment: Segment) -> dict[str, int]:
            self.runs[f"{segment.video}:{segment.segment}"] += 1
            return {"frames": 250}

        self.app.include_router(self.executor.router)
        self.app.include_router(status_router([self.ledger], tokens={TOKEN: ["*"]}))


TOKEN = "operator-token-0123456789"


def _status(running: str, service: Service, key: str) -> JobStatus | None:
    answer = httpx.get(
        f"{running}/rill/jobs/{service.ledger.namespace}/{key}?handler=encode",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10,
    )
    if answer.status_code == 404:
        return None
    assert answer.status_code == 200, answer.text
    return JobStatus.model_validate(answer.json())


@pytest.fixture(params=["memory", "sqlite", "postgresql", "mariadb", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.db'}"
    fixture = {"postgresql": "postgres_url", "mariadb": "mariadb_url"}.get(request.param)
    return str(request.getfixturevalue(fixture or "redis_url"))


@pytest.fixture
def service(store_url: str) -> Service:
    return Service(store_url)


@pytest.fixture
def running(service: Service) -> Iterator[str]:
    with serve_app(service.app, lifespan="on") as url:
        yield url


@pytest.mark.parametrize(
    ("query", "headers", "why"),
    [
        ("execution_id=ws%00:dag_c_k6&name=encode", {}, "execution_id"),
        ("execution_id=ws:dag_c_k6&name=enc%01ode", {}, "'name'"),
        (
            "execution_id=ws%0a:dag_c_k6&name=encode",
            {"X-Mode": "async", "X-Callback-Url": "http://127.0.0.1:9/callback?ts=1"},
            "execution_id",
        ),
        (
            "execution_id=ws:dag_c_k6&name=encode",
            {"X-Mode": "async", "X-Callback-Url": "http://127.0.0.1:9/callback?ts=1%00"},
            "'ts'",
        ),
    ],
)
def test_a_dispatch_with_control_characters_is_a_400_and_the_key_stays_usable(
    service: Service, running: str, query: str, headers: dict[str, str], why: str
) -> None:
    video = f"v{uuid.uuid4().hex[:8]}"
    answer = httpx.post(
        f"{running}/segments?{query}",
        json={"video": video, "segment": 1},
        headers=headers,
        timeout=10,
    )
    assert answer.status_code == 400, answer.text
    assert why in answer.json()["error_msg"] and "control character" in answer.text
    assert service.runs == Counter()
    assert _status(running, service, f"{video}:1") is None
    with EngineSimulator() as engine:  # a clean dispatch of the same key works
        execution = engine.submit(
            Task(
                "encode",
                f"{running}/segments",
                pattern=Pattern.TASK_SYNC,
                input={"video": video, "segment": 1},
            )
        )
        view = engine.wait_for(execution, "encode")
    assert view.status is TaskStatus.SUCCEED, view
    status = _status(running, service, f"{video}:1")
    assert status is not None and status.state is JobState.SUCCEEDED
    assert service.runs == Counter({f"{video}:1": 1})
