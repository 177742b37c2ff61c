"""The engine gets exactly the answer the docs promise: callbacks checked on the body that
is sent, GET dispatches read from their query, status codes that say who must act, a
start-up that neither dies on an unreachable store nor loops on a bad setting, and logs
that say an outage once. In-process servers and the engine simulator, on every store where
the behaviour applies.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel

from rill_executor import AsyncLedger, HandedOff, JobState
from rill_executor.reports import NoticeInfo
from rill_executor.rillflow import Deliverer, RillFlowExecutor, callback_for, status_router
from rill_executor.rillflow._callbacks import engine_length
from rill_executor.testing.rillflow import (
    EngineSimulator,
    Pattern,
    Task,
    TaskStatus,
    serve_app,
)

from ..adapters.faults.outage import StoreLink
from ..adapters.s3.conftest import free_port
from .service import ROOT, ExecutorService

SECRET = "completion-secret-0123456789abcdef"
OPERATOR = "operator-token-0123456789"
DEFAULT_BLOB = "x" * 6200


class Job(BaseModel):
    video: str
    segment: int
    mode: str = "plain"


class Small(BaseModel):
    uri: str


class Big(BaseModel):
    uri: str
    blob: str = DEFAULT_BLOB  # the stored result carries it: 6,221 characters of JSON


class Executor:
    """An executor app whose handlers count their runs and answer as ``Job.mode`` says."""

    def __init__(self, url: str, *, deliverer_poll: float = 1.0) -> None:
        self.runs: Counter[str] = Counter()
        self.inputs: list[Job] = []
        self.tokens: dict[str, str] = {}
        self.ledger = AsyncLedger(url, namespace=f"answers-{uuid.uuid4().hex[:8]}", lease=30)
        deliverer = Deliverer(self.ledger, poll=timedelta(seconds=deliverer_poll))
        self.executor = RillFlowExecutor(
            self.ledger, token_secret=SECRET, deliverer=deliverer, engines=["127.0.0.1"]
        )
        self.app = FastAPI(lifespan=self.executor.lifespan)

        @self.executor.task("/encode", key=lambda job: f"{job.video}:{job.segment}", name="encode")
        def encode(job: Job) -> Small:
            key = f"{job.video}:{job.segment}"
            self.runs[key] += 1
            self.inputs.append(job)
            if job.mode == "extra":  # the stored result drops the field it does not declare
                return {"uri": f"s3://out/{key}", "blob": "z" * 7000}  # type: ignore[return-value]
            if job.mode == "accented":  # 2,000 characters as the engine counts them
                return Small(uri="é" * 2000)
            if job.mode == "hand_off":
                self.tokens[key] = self.executor.hand_off(timedelta(hours=1))
                raise HandedOff()
            if job.mode == "handed_off":  # without a token: nobody could complete it
                raise HandedOff()
            return Small(uri=f"s3://out/{key}")

        @self.executor.task("/big", key=lambda job: f"{job.video}:{job.segment}", name="big")
        def big(job: Job) -> Big:
            self.runs[f"{job.video}:{job.segment}"] += 1
            if job.mode == "hand_off":
                self.tokens[f"{job.video}:{job.segment}"] = self.executor.hand_off(
                    timedelta(hours=1)
                )
                raise HandedOff()
            return {"uri": "s3://out/big"}  # type: ignore[return-value]  # validates as Big

        self.app.include_router(self.executor.router)
        self.app.include_router(status_router([self.ledger], tokens={OPERATOR: ["*"]}))

    def status(self, url: str, key: str, handler: str = "encode") -> httpx.Response:
        return httpx.get(
            f"{url}/rill/jobs/{self.ledger.namespace}/{key}?handler={handler}",
            headers={"Authorization": f"Bearer {OPERATOR}"},
            timeout=20,
        )

    def complete(self, url: str, key: str, report: object) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[key]}"}
        return httpx.post(f"{url}/rill/complete", json=report, headers=headers, timeout=20)


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


@pytest.fixture
def like_production() -> Iterator[None]:
    """Warnings as a service sees them (shown, not raised): the suite turns them into
    errors, which a check that swallows errors would hide."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _video() -> str:
    return f"v{uuid.uuid4().hex[:10]}"


def _async(url: str, path: str, **job: Any) -> Task:
    return Task(path.strip("/"), f"{url}{path}", Pattern.TASK_ASYNC, input=job)


def _dispatch(url: str, path: str, body: dict[str, Any], *, mode: str) -> httpx.Response:
    execution = f"ws:dag_c_{uuid.uuid4().hex[:8]}"
    headers = {"X-Callback-Url": "http://127.0.0.1:9/flow/trigger.json?ts=1"}
    if mode == "async":
        headers["X-Mode"] = "async"
    return httpx.post(
        f"{url}{path}?execution_id={execution}&name=t",
        json={"execution_id": execution, **body},
        headers=headers,
        timeout=20,
    )


# -- the callback limit, on the body that is sent ------------------------------------------


@pytest.mark.usefixtures("like_production")
def test_a_callback_is_checked_on_the_body_sent_from_the_stored_result(
    store_url: str, engine: EngineSimulator
) -> None:
    """An undeclared 7,000-character field is not stored, so the callback is small; 2,000
    accented characters are 2,000 for the engine (not 12,000 escaped); a 6,200-character
    default is stored, so the result cannot be sent: a terminal failure, told by a small
    FAILED callback, rather than a success the engine never hears of."""
    service = Executor(store_url)
    video = _video()
    with serve_app(service.app, lifespan="on") as url:
        extra = engine.submit(_async(url, "/encode", video=video, segment=1, mode="extra"))
        accented = engine.submit(_async(url, "/encode", video=video, segment=2, mode="accented"))
        big = engine.submit(_async(url, "/big", video=video, segment=3))
        views = {
            e: engine.wait_for(e, n, timeout=20)
            for e, n in ((extra, "encode"), (accented, "encode"), (big, "big"))
        }
        failed = service.status(url, f"{video}:3", "big").json()
    assert views[extra].status is TaskStatus.SUCCEED, views[extra]
    assert views[extra].output == {"uri": f"s3://out/{video}:1"}
    assert views[accented].status is TaskStatus.SUCCEED, views[accented]
    assert views[accented].output == {"uri": "é" * 2000}
    assert views[big].status is TaskStatus.FAILED, views[big]
    (callback,) = engine.callbacks(big, "big")
    assert callback.query.get("status") == "FAILED" and callback.status_code == 200
    assert "CallbackTooLarge" in callback.body_text and len(callback.body_text) < 2000
    assert failed["state"] == JobState.FAILED and failed["error"]["type"] == "CallbackTooLarge"
    assert failed["error"]["retryable"] is False
    assert service.runs == Counter({f"{video}:1": 1, f"{video}:2": 1, f"{video}:3": 1})


@pytest.mark.usefixtures("like_production")
def test_a_completion_is_checked_on_the_body_sent_from_the_stored_result(
    store_url: str, engine: EngineSimulator
) -> None:
    """As for a handler's return, for an external worker's report through the token."""
    service = Executor(store_url)
    video = _video()
    with serve_app(service.app, lifespan="on") as url:
        small = engine.submit(_async(url, "/encode", video=video, segment=1, mode="hand_off"))
        big = engine.submit(_async(url, "/big", video=video, segment=2, mode="hand_off"))
        engine.wait_until(lambda: len(service.tokens) == 2, timeout=20)
        extra = {"uri": "s3://out/small", "blob": "z" * 7000}
        assert service.complete(url, f"{video}:1", {"result": extra}).status_code == 200
        refused = service.complete(url, f"{video}:2", {"result": {"uri": "s3://out/big"}})
        small_view = engine.wait_for(small, "encode", timeout=20)
        big_view = engine.wait_for(big, "big", timeout=20)
        failed = service.status(url, f"{video}:2", "big").json()
    assert small_view.status is TaskStatus.SUCCEED and small_view.output == {
        "uri": "s3://out/small"
    }
    assert refused.status_code == 422 and "6144" in refused.json()["detail"], refused.text
    assert big_view.status is TaskStatus.FAILED
    (callback,) = engine.callbacks(big, "big")
    assert callback.query.get("status") == "FAILED" and len(callback.body_text) < 2000
    assert failed["state"] == JobState.FAILED and failed["error"]["retryable"] is False


def test_a_stored_result_too_large_to_send_is_told_as_a_failure_not_dropped() -> None:
    """A result committed without the executor's check (``resolve``, say): the engine is
    told a failure it can act on, in a body it accepts, instead of waiting for ever."""
    now = datetime.now(UTC)
    info = NoticeInfo(
        id="n1",
        watch="ws:dag_c_1/t",
        target={"url": "http://engine/flow/trigger.json?execution_id=ws:dag_c_1&task_name=t"},
        fence=1,
        state=JobState.SUCCEEDED,
        error=None,
        status="pending",
        attempts=0,
        due=now,
        outcome=None,
        detail=None,
        created_at=now,
        settled_at=None,
    )
    fits = callback_for(info, {"text": "\U0001f3ac" * 3000})  # 6,000 UTF-16 code units
    too_long = callback_for(info, {"text": "\U0001f3ac" * 3100})  # 6,200
    assert "status=FAILED" not in fits.url and engine_length(fits.body) == 6011
    assert "status=FAILED" in too_long.url and "CallbackTooLarge" in too_long.body
    assert engine_length(too_long.body) < 2000


def test_a_completion_with_a_result_warns_nothing(engine: EngineSimulator) -> None:
    service = Executor("memory://")
    video = _video()
    with serve_app(service.app, lifespan="on") as url:
        execution = engine.submit(_async(url, "/encode", video=video, segment=1, mode="hand_off"))
        engine.wait_until(lambda: bool(service.tokens), timeout=20)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            done = service.complete(url, f"{video}:1", {"result": {"uri": "s3://out/done"}})
            assert engine.wait_for(execution, "encode").status is TaskStatus.SUCCEED
    assert done.status_code == 200, done.text
    assert [str(w.message) for w in seen if issubclass(w.category, UserWarning)] == []


# -- GET dispatches ------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", [Pattern.TASK_SYNC, Pattern.TASK_ASYNC])
def test_a_get_dispatch_takes_its_input_from_the_query(
    engine: EngineSimulator, pattern: Pattern
) -> None:
    service = Executor("memory://")
    video = _video()
    with serve_app(service.app, lifespan="on") as url:
        task = Task(
            "encode",
            f"{url}/encode",
            pattern,
            input={"query": {"video": video, "segment": 4}},
            request_type="GET",
        )
        execution = engine.submit(task)
        view = engine.wait_for(execution, "encode", timeout=20)
    assert view.status is TaskStatus.SUCCEED, view
    assert view.output == {"uri": f"s3://out/{video}:4"}
    assert service.inputs == [Job(video=video, segment=4)]  # no execution_id, no name


def test_a_get_dispatch_whose_query_does_not_validate_is_a_400() -> None:
    service = Executor("memory://")
    with serve_app(service.app, lifespan="on") as url:
        answer = httpx.get(
            f"{url}/encode?execution_id=ws:dag_c_1&name=t&video=A&segment=one", timeout=20
        )
    assert answer.status_code == 400, answer.text
    assert "valid integer" in answer.json()["error_msg"], answer.text
    assert service.runs == Counter()


# -- status codes --------------------------------------------------------------------------


@pytest.fixture(params=["postgres", "mariadb", "redis"])
def misconfigured(request: pytest.FixtureRequest) -> Iterator[tuple[str, StoreLink | None]]:
    """A store the executor can reach but must not use: a database that does not exist, or
    a Redis deployment ``durability=require`` refuses, checked at the first call because
    Redis was unreachable when the store opened (the link comes up before the dispatch)."""
    url = str(request.getfixturevalue(f"{request.param}_url"))
    if request.param != "redis":
        yield f"{url.rpartition('/')[0]}/missing_{uuid.uuid4().hex[:8]}", None
        return
    link = StoreLink(url.replace("durability=ignore", "durability=require"))
    link.down()
    try:
        yield link.url, link
    finally:
        link.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_dispatch_on_a_misconfigured_store_is_a_503_with_the_reason(
    misconfigured: tuple[str, StoreLink | None], mode: str
) -> None:
    store, link = misconfigured
    service = Executor(store)
    if link is not None:
        link.up()
    with serve_app(service.app, lifespan="on") as url:
        answer = _dispatch(url, "/encode", {"video": "A", "segment": 1}, mode=mode)
    assert answer.status_code == 503, answer.text
    assert answer.json()["error_code"] in ("ConfigError", "UnsafeDeployment"), answer.text
    assert "does not exist" in answer.text or "appendonly" in answer.text
    assert answer.json()["retryable"] is True
    assert service.runs == Counter()


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("video", "why"), [("x" * 600, "over the limit"), ("a\nb", "control")])
def test_an_invalid_business_key_is_a_400(store_url: str, mode: str, video: str, why: str) -> None:
    service = Executor(store_url)
    with serve_app(service.app, lifespan="on") as url:
        answer = _dispatch(url, "/encode", {"video": video, "segment": 1}, mode=mode)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error_code"] == "BadDispatch" and why in answer.json()["error_msg"]
    assert service.runs == Counter()


@pytest.mark.real_clock("a real Redis server stopped and started again")
def test_the_status_endpoint_answers_503_during_a_store_outage(server_url: str) -> None:
    link = StoreLink(server_url)
    service = Executor(link.url)
    try:
        with serve_app(service.app, lifespan="on") as url:
            _dispatch(url, "/encode", {"video": "A", "segment": 1}, mode="sync")
            assert service.status(url, "A:1").status_code == 200
            link.down()
            answer = service.status(url, "A:1")
            link.up()
            back = _eventually(lambda: service.status(url, "A:1").status_code == 200)
    finally:
        link.close()
    assert answer.status_code == 503, answer.text
    assert back


def _eventually(check: Any, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.parametrize("mode", ["hand_off", "handed_off"])
def test_a_hand_off_on_a_sync_dispatch_is_a_503_and_retryable(store_url: str, mode: str) -> None:
    """The task is declared task_sync but its handler hands the work off: the executor's
    side must act (declare it task_async). Nothing was done for good: the failure is
    retryable, and a dispatch of the task as task_async then runs it."""
    service = Executor(store_url)
    video = _video()
    with serve_app(service.app, lifespan="on") as url:
        answer = _dispatch(
            url, "/encode", {"video": video, "segment": 1, "mode": mode}, mode="sync"
        )
        status = service.status(url, f"{video}:1").json()
    assert answer.status_code == 503, answer.text
    assert answer.json()["error_code"] == "HandOffNeedsAsync" and answer.json()["retryable"]
    assert "task_async" in answer.json()["error_msg"]
    assert status["state"] == JobState.FAILED and status["error"]["retryable"] is True


@pytest.mark.real_clock("a real Redis outage, and the lease on Redis's own clock")
def test_complete_during_an_outage_gives_no_false_lease_end(
    server_url: str, engine: EngineSimulator
) -> None:
    link = StoreLink(server_url)
    service = Executor(link.url)
    video = _video()
    try:
        with serve_app(service.app, lifespan="on") as url:
            execution = engine.submit(
                _async(url, "/encode", video=video, segment=1, mode="hand_off")
            )
            engine.wait_until(lambda: bool(service.tokens), timeout=20)
            link.down()
            refused = service.complete(url, f"{video}:1", {"result": {"uri": "s3://out/late"}})
            link.up()
            done = service.complete(url, f"{video}:1", {"result": {"uri": "s3://out/late"}})
            view = engine.wait_for(execution, "encode", timeout=20)
    finally:
        link.close()
    assert refused.status_code == 503, refused.text
    detail = refused.json()["detail"]
    assert "1970" not in detail and "Report again with the same token" in detail, detail
    assert done.status_code == 200, done.text
    assert view.status is TaskStatus.SUCCEED and view.output == {"uri": "s3://out/late"}


# -- logs ----------------------------------------------------------------------------------


@pytest.mark.real_clock("a real Redis outage, polled by the deliverer's real-time loop")
def test_the_deliverer_logs_an_outage_once_and_its_end(
    server_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    link = StoreLink(server_url)
    service = Executor(link.url, deliverer_poll=0.05)
    caplog.set_level(logging.INFO, logger="rill_executor")
    try:
        with serve_app(service.app, lifespan="on"):
            time.sleep(0.3)
            link.down()
            time.sleep(2.0)  # some 40 polls
            link.up()
            deadline = time.monotonic() + 20
            while "works again" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.1)
    finally:
        link.close()
    lines = [r for r in caplog.records if r.name.startswith("rill_executor.rillflow")]
    failed = [r for r in lines if "delivering completion notices failed" in r.getMessage()]
    again = [r for r in lines if "works again" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info is None, [r.getMessage() for r in lines]
    assert len(again) == 1, [r.getMessage() for r in lines]


# -- start-up ------------------------------------------------------------------------------


@pytest.mark.real_clock("a real uvicorn process against a closed port")
@pytest.mark.slow
def test_an_executor_starts_with_redis_unreachable_and_answers_503(tmp_path: Path) -> None:
    """Under uvicorn with two workers, as SQLite and PostgreSQL do: no worker dies at
    import (the server would restart it for ever); dispatches and status answer 503."""
    closed = free_port()
    service = ExecutorService(f"redis://127.0.0.1:{closed}/0", tmp_path).start()
    try:
        answer = _dispatch(service.url, "/segments", _segment(), mode="async")
        status = service.status("A:1:h264-v2")
    finally:
        service.stop()
    assert answer.status_code == 503 and answer.json()["retryable"] is True, answer.text
    assert "not reachable" in answer.json()["error_msg"]
    assert status.status_code == 503, status.text
    assert "died" not in service.log(), service.log()


def _segment() -> dict[str, Any]:
    return {"video": "A", "segment": 1, "profile": "h264-v2"}


@pytest.mark.real_clock("a real uvicorn process that must stop at start-up")
@pytest.mark.slow
@pytest.mark.parametrize(
    ("setting", "value", "why"),
    [("RILL_TOKEN_SECRET", "short", "32 bytes"), ("RILL_STATUS_TOKEN", "short", "16 characters")],
)
def test_a_bad_setting_stops_the_start_up_with_one_clear_error(
    tmp_path: Path, sqlite_url: str, setting: str, value: str, why: str
) -> None:
    env = {**os.environ, "RILL_STORE": sqlite_url, setting: value}
    env.setdefault("RILL_STATUS_TOKEN", "status-token-for-the-tests")
    env[setting] = value
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "examples.rillflow_executor.app:app",
        "--workers",
        "2",
        "--port",
        str(free_port()),
    ]
    log = tmp_path / "uvicorn.log"
    with log.open("wb") as out:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
        try:
            code = server.wait(60)  # a restart loop would never end
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
            raise AssertionError(
                f"the server restarts for ever:\n{log.read_text()[-3000:]}"
            ) from None
    text = log.read_text(errors="replace")
    assert "failed to start, stopping the parent process" in text, (code, text)
    assert 1 <= text.count("ConfigError: ") <= 2, text  # once per worker at most
    assert why in text and "died" not in text, text
