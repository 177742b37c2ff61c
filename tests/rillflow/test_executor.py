"""The Rill Flow executor against the engine simulator, over real HTTP (in-process servers).

The handlers count their runs; each scenario checks the engine's view (task state, output,
callbacks and their answers) and the ledger's (one execution, the attempt history).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel

from rill_executor import (
    AsyncLedger,
    AttemptOutcome,
    JobState,
    JobStatus,
    TerminalError,
    current_async_claim,
)
from rill_executor.outputs import MemoryOutputStore, OutputRef
from rill_executor.rillflow import RillFlowExecutor, status_router
from rill_executor.testing.rillflow import (
    EngineSimulator,
    Pattern,
    Retry,
    Task,
    TaskStatus,
    serve_app,
)


class Segment(BaseModel):
    video: str
    segment: int
    profile: str = "h264-v2"
    seconds: float = 0.0  # how long the handler works
    fail: str | None = None  # "retryable" / "terminal": fail the first run this way


class Transcoded(BaseModel):
    uri: str
    frames: int


class Service:
    """An executor service: one ledger, one executor app, handlers that count their runs."""

    def __init__(self, url: str) -> None:
        self.runs: Counter[str] = Counter()
        self.ledger = AsyncLedger(url, namespace="transcode", lease=5)
        self.executor = RillFlowExecutor(self.ledger, engines=["127.0.0.1"])
        self.app = FastAPI(lifespan=self.executor.lifespan)

        @self.executor.task(
            "/transcode",
            key=lambda job: f"{job.video}:{job.segment}:{job.profile}",
            result_version=lambda job: job.profile,
            name="transcode",
        )
        def transcode(job: Segment) -> Transcoded:
            key = f"{job.video}:{job.segment}:{job.profile}"
            self.runs[key] += 1
            time.sleep(job.seconds)
            if job.fail == "retryable" and self.runs[key] == 1:
                raise ConnectionError("the storage node went away")
            if job.fail == "terminal":
                raise TerminalError("unsupported codec")
            if job.fail == "huge":
                return Transcoded(uri="s3://out/" + "x" * 7000, frames=1)
            return Transcoded(uri=f"s3://out/{job.video}/{job.segment}", frames=250)

        self.app.include_router(self.executor.router)
        self.app.include_router(status_router([self.ledger], tokens={TOKEN: ["transcode"]}))


TOKEN = "operator-token-0123456789"


@pytest.fixture
def service() -> Service:
    return Service("memory://")


@pytest.fixture
def running(service: Service) -> Iterator[str]:
    with serve_app(service.app, lifespan="on") as url:
        yield url


@pytest.fixture
def engine() -> Iterator[EngineSimulator]:
    with EngineSimulator() as engine:
        yield engine


def _task(url: str, pattern: Pattern, retry: Retry | None = None, **job: object) -> Task:
    body = {"video": "A", "segment": 1, **job}
    return Task(
        "transcode",
        f"{url}/transcode",
        pattern=pattern,
        input=body,
        retry=retry or Retry(),
        timeout_in_seconds=job.pop("timeout", None) if pattern is Pattern.TASK_ASYNC else None,  # type: ignore[arg-type]
    )


def test_sync_answers_the_committed_result(
    service: Service, running: str, engine: EngineSimulator
) -> None:
    first = engine.submit(_task(running, Pattern.TASK_SYNC))
    view = engine.wait_for(first, "transcode")
    assert view.status is TaskStatus.SUCCEED
    assert view.output == {"uri": "s3://out/A/1", "frames": 250}
    second = engine.submit(_task(running, Pattern.TASK_SYNC))  # another execution, same work
    assert engine.wait_for(second, "transcode").output == view.output
    assert service.runs == Counter({"A:1:h264-v2": 1})


@pytest.mark.real_clock(
    "the engine's HTTP read timeout is a socket timeout; the handler's run is real"
)
def test_a_slow_sync_handler_is_not_run_again_by_the_resend(
    service: Service, running: str, engine: EngineSimulator
) -> None:
    retry = Retry(max_retry_times=2, interval_in_seconds=1)
    execution = engine.submit(_task(running, Pattern.TASK_SYNC, retry, seconds=2.2))
    view = engine.wait_for(execution, "transcode", timeout=20)
    assert view.status is TaskStatus.SUCCEED, view
    assert view.output == {"uri": "s3://out/A/1", "frames": 250}
    assert service.runs == Counter({"A:1:h264-v2": 1})
    sends = engine.dispatches(execution, "transcode")
    assert sends[0].error is not None and sends[1].send == 2  # timed out, then resent


def test_async_calls_back_once_with_the_committed_result(
    service: Service, running: str, engine: EngineSimulator
) -> None:
    execution = engine.submit(_task(running, Pattern.TASK_ASYNC, seconds=0.2))
    view = engine.wait_for(execution, "transcode")
    assert view.status is TaskStatus.SUCCEED
    assert view.output == {"uri": "s3://out/A/1", "frames": 250}
    (callback,) = engine.callbacks(execution, "transcode")
    assert callback.status_code == 200
    assert service.runs == Counter({"A:1:h264-v2": 1})


@pytest.mark.real_clock(
    "the timers must fall inside the handler's real 1.5 s run, on the executor's threads"
)
def test_an_async_timeout_and_retry_while_the_first_runs_execute_once(
    service: Service, running: str
) -> None:
    # Each attempt times out after 0.5 s; the run takes 1.5 s: its result reaches whichever
    # attempt is RUNNING, or, between attempts, the next dispatch from the stored result.
    # Sub-second timers, which the engine does not have (0.5 arms no timeout on it): the
    # exact clock, to see several timeouts and retries inside one short run.
    with EngineSimulator(timers="exact") as engine:
        _timeouts_and_retries_execute_once(service, running, engine)


def _timeouts_and_retries_execute_once(
    service: Service, running: str, engine: EngineSimulator
) -> None:
    retry = Retry(max_retry_times=8, interval_in_seconds=0.2)
    execution = engine.submit(_task(running, Pattern.TASK_ASYNC, retry, seconds=1.5, timeout=0.5))
    view = engine.wait_for(execution, "transcode", timeout=20)
    assert view.status is TaskStatus.SUCCEED, view
    assert view.output == {"uri": "s3://out/A/1", "frames": 250}
    assert service.runs == Counter({"A:1:h264-v2": 1})
    applied = [c for c in engine.callbacks(execution, "transcode") if c.status_code == 200]
    assert len(applied) == 1


@pytest.mark.real_clock("the redo must land inside the handler's real 1 s run")
def test_a_redo_of_a_running_task_does_not_run_it_twice(
    service: Service, running: str, engine: EngineSimulator
) -> None:
    execution = engine.submit(_task(running, Pattern.TASK_ASYNC, seconds=1.0))
    engine.wait_for_status(execution, "transcode", TaskStatus.RUNNING)
    engine.redo(execution, "transcode")
    view = engine.wait_for(execution, "transcode", timeout=20)
    assert view.status is TaskStatus.SUCCEED and view.output == {
        "uri": "s3://out/A/1",
        "frames": 250,
    }
    assert service.runs == Counter({"A:1:h264-v2": 1})


@pytest.mark.parametrize("pattern", [Pattern.TASK_SYNC, Pattern.TASK_ASYNC])
def test_failures_reach_the_engine_and_retries_respect_them(
    service: Service, running: str, engine: EngineSimulator, pattern: Pattern
) -> None:
    retry = Retry(max_retry_times=2, interval_in_seconds=0.2)
    flaky = engine.submit(_task(running, pattern, retry, segment=2, fail="retryable"))
    doomed = engine.submit(_task(running, pattern, retry, segment=3, fail="terminal"))
    assert engine.wait_for(flaky, "transcode", timeout=20).status is TaskStatus.SUCCEED
    view = engine.wait_for(doomed, "transcode", timeout=20)
    assert view.status is TaskStatus.FAILED
    assert service.runs == Counter({"A:2:h264-v2": 2, "A:3:h264-v2": 1})
    if pattern is Pattern.TASK_ASYNC:
        failed = [
            c for c in engine.callbacks(doomed, "transcode") if c.query.get("status") == "FAILED"
        ]
        assert failed and "unsupported codec" in failed[0].body_text


def test_a_result_too_large_for_a_callback_fails_clearly(
    service: Service, running: str, engine: EngineSimulator
) -> None:
    execution = engine.submit(_task(running, Pattern.TASK_ASYNC, fail="huge"))
    view = engine.wait_for(execution, "transcode", timeout=20)
    assert view.status is TaskStatus.FAILED
    (callback,) = engine.callbacks(execution, "transcode")
    assert callback.query.get("status") == "FAILED" and "output object" in callback.body_text


@pytest.mark.parametrize(
    ("query", "body", "why"),
    [
        ("name=transcode", b"{}", "execution_id"),
        ("execution_id=ws:dag_c_1", b"{}", "'name'"),
        ("execution_id=ws:dag_c_1&name=t", b"[1, 2]", "JSON object"),
        ("execution_id=ws:dag_c_1&name=t", b"{not json", "not JSON"),
        ("execution_id=ws:dag_c_1&name=t", b'{"video": "A"}', "does not validate"),
    ],
)
def test_a_bad_dispatch_is_a_clear_400_and_claims_nothing(
    service: Service, running: str, query: str, body: bytes, why: str
) -> None:
    answer = httpx.post(f"{running}/transcode?{query}", content=body, timeout=5)
    assert answer.status_code == 400 and why in answer.json()["error_msg"], answer.text
    assert service.runs == Counter()


def test_the_history_records_which_dispatch_each_attempt_answered(
    running: str, engine: EngineSimulator
) -> None:
    execution = engine.submit(_task(running, Pattern.TASK_ASYNC))
    engine.wait_for(execution, "transcode")
    answer = httpx.get(
        f"{running}/rill/jobs/transcode/A:1:h264-v2?handler=transcode",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=5,
    )
    assert answer.status_code == 200, answer.text
    status = JobStatus.model_validate(answer.json())
    assert status.state is JobState.SUCCEEDED
    (attempt,) = status.attempts
    assert attempt.outcome is AttemptOutcome.SUCCEEDED
    assert attempt.origin is not None
    assert attempt.origin["execution_id"] == execution and attempt.origin["mode"] == "async"
    (notice,) = status.notices
    assert notice.status == "delivered" and notice.outcome == "ok"


@pytest.mark.parametrize(
    ("headers", "path", "code"),
    [
        ({}, "transcode/A:1:h264-v2", 401),
        ({"Authorization": "Bearer wrong-token-0123456789"}, "transcode/A:1:h264-v2", 401),
        ({"Authorization": f"Bearer {TOKEN}"}, "billing/A:1:h264-v2", 403),
        ({"Authorization": f"Bearer {TOKEN}"}, "transcode/no-such-key", 404),
    ],
)
def test_the_status_endpoint_is_authenticated_and_scoped(
    running: str, headers: dict[str, str], path: str, code: int
) -> None:
    answer = httpx.get(f"{running}/rill/jobs/{path}", headers=headers, timeout=5)
    assert answer.status_code == code, answer.text


def test_a_handler_s_job_asked_for_by_its_key_alone_gets_the_hint_to_name_the_handler(
    running: str, engine: EngineSimulator
) -> None:
    engine.wait_for(engine.submit(_task(running, Pattern.TASK_SYNC)), "transcode")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    url = f"{running}/rill/jobs/transcode/A:1:h264-v2"
    answer = httpx.get(url, headers=auth, timeout=5)
    assert answer.status_code == 404, answer.text
    assert answer.json()["detail"] == (
        "no job 'A:1:h264-v2' in namespace 'transcode': a decorated handler's job is stored"
        " as NAME/KEY: pass ?handler=NAME"
    )
    assert httpx.get(url, params={"handler": "transcode"}, headers=auth, timeout=5).is_success
    missing = httpx.get(url, params={"handler": "thumbnail"}, headers=auth, timeout=5)
    assert missing.status_code == 404
    assert missing.json()["detail"] == "no job 'thumbnail/A:1:h264-v2' in namespace 'transcode'"


def test_a_large_result_goes_out_as_an_output_object_and_the_callback_carries_its_ref(
    engine: EngineSimulator,
) -> None:
    """The data is written as an output object under the claim; the result (and so the
    callback) carries only its ref, well under the engine's 6,144 characters."""
    outputs = MemoryOutputStore()
    ledger = AsyncLedger("memory://", namespace="render", lease=5, outputs=outputs)
    executor = RillFlowExecutor(ledger, engines=["127.0.0.1"])
    app = FastAPI(lifespan=executor.lifespan)

    @executor.task("/render", key=lambda job: f"{job.video}:{job.segment}", name="render")
    async def render(job: Segment) -> OutputRef:
        frames = b"frame" * 10_000  # 50 kB: far too large for a callback body
        return await current_async_claim().outputs.put("frames.bin", frames)

    app.include_router(executor.router)
    with serve_app(app, lifespan="on") as url:
        execution = engine.submit(
            Task(
                "render",
                f"{url}/render",
                pattern=Pattern.TASK_ASYNC,
                input={"video": "A", "segment": 1},
            )
        )
        view = engine.wait_for(execution, "render")
    assert view.status is TaskStatus.SUCCEED, view
    assert view.output is not None
    ref = OutputRef.model_validate(view.output)
    assert ref.size == 50_000 and ref.name == "frames.bin"
    assert b"".join(outputs.read(ref.key)) == b"frame" * 10_000
    (callback,) = engine.callbacks(execution, "render")
    assert callback.status_code == 200 and len(callback.body_text) < 6144
