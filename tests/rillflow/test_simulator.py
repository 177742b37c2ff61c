"""The engine simulator against small executors served over real HTTP."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fastapi import BackgroundTasks, FastAPI, Request, Response

from rill_executor._errors import ConfigError, UsageError
from rill_executor.testing import VirtualClock
from rill_executor.testing.rillflow import (
    DispatchRecord,
    EngineSimulator,
    Pattern,
    Retry,
    Task,
    TaskStatus,
    serve_app,
    verify_callback_sign,
)

SLEEP_PAST_READ_TIMEOUT = 1.6  # the engine's read timeout is 1.5 s


@dataclass
class Seen:
    """One request the test executor received."""

    path: str
    method: str
    query: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any] | None


@dataclass
class Executor:
    """A small executor: every route records what it received."""

    url: str = ""
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=5))
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def received(self, path: str) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if s.path == path]


def _build_executor(executor: Executor) -> FastAPI:
    app = FastAPI()

    async def record(request: Request) -> Seen:
        raw = await request.body()
        seen = Seen(
            path=request.url.path,
            method=request.method,
            query=dict(request.query_params),
            headers=dict(request.headers),
            body=json.loads(raw) if raw else None,
        )
        with executor.lock:
            executor.seen.append(seen)
        return seen

    @app.api_route("/echo", methods=["GET", "POST"])
    async def echo(request: Request) -> dict[str, Any]:
        seen = await record(request)
        return {"video": "A", "got": seen.body}

    @app.post("/answer")
    async def answer(request: Request) -> Response:
        seen = await record(request)
        assert seen.body is not None
        return Response(content=seen.body["answer"], media_type="application/json")

    @app.post("/slow")
    async def slow(request: Request) -> dict[str, Any]:
        await record(request)
        await _sleep(SLEEP_PAST_READ_TIMEOUT)
        return {"done": True}

    @app.post("/flaky")
    async def flaky(request: Request) -> Response:
        await record(request)
        first = len(executor.received("/flaky")) == 1
        return Response(status_code=500 if first else 200, content=b'{"ok": true}')

    @app.post("/ack")
    async def ack(request: Request, background: BackgroundTasks) -> dict[str, Any]:
        seen = await record(request)
        reply = (seen.body or {}).get("reply")
        if reply is not None:
            # Answer the dispatch first, then call back: the engine holds the task lock meanwhile.
            background.add_task(_call_back, executor.http, seen.headers["x-callback-url"], reply)
        return {"result_type": "SUCCESS"}

    return app


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


def _call_back(http: httpx.Client, callback_url: str, reply: dict[str, Any]) -> None:
    url = httpx.URL(callback_url)
    if "status" in reply:
        url = url.copy_add_param("status", reply["status"])
    http.post(url, json=reply.get("output"))


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    state = Executor()
    with state.http, serve_app(_build_executor(state)) as url:
        state.url = url
        yield state


@pytest.fixture(scope="module")
def http(executor: Executor) -> httpx.Client:
    """The test's own client, for callbacks sent by hand (one client: no TLS set-up per call)."""
    return executor.http


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineSimulator]:
    # One engine for the module: every test has executions of its own.
    with EngineSimulator() as simulator:
        yield simulator


@pytest.fixture(scope="module")
def exact() -> Iterator[EngineSimulator]:
    """An engine whose retries and timeouts fire after exactly their (sub-second) delays,
    for tests of what a timer does, not of when the engine's poll fires it."""
    with EngineSimulator(timers="exact") as simulator:
        yield simulator


@pytest.fixture
def virtual() -> Iterator[tuple[EngineSimulator, VirtualClock]]:
    """An engine on the engine's own (poll) timing and a virtual clock: no timer fires until
    the test advances the clock, then each fires at its instant."""
    clock = VirtualClock()
    with EngineSimulator(clock=clock) as simulator:
        yield simulator, clock


def _callback_url(engine: EngineSimulator, execution_id: str, task_name: str) -> str:
    return engine.wait_for_dispatches(execution_id, task_name, 1)[-1].headers["X-Callback-Url"]


# --- sync dispatch ----------------------------------------------------------------------------


def test_a_sync_dispatch_carries_the_engine_headers_and_its_answer_is_the_output(
    engine: EngineSimulator, executor: Executor
) -> None:
    task = Task("encode", f"{executor.url}/echo", input={"video": "A", "query": {"tier": 2}})
    execution_id = engine.submit(
        task, dag="transcode", workspace="media", traceparent="00-ab-cd-01"
    )

    view = engine.wait_for(execution_id, "encode")

    assert re.fullmatch(r"media:transcode_c_[0-9a-f-]{36}", execution_id)
    assert view.status is TaskStatus.SUCCEED
    assert view.output == {"video": "A", "got": {"execution_id": execution_id, "video": "A"}}
    assert view.attempts == 1
    [seen] = [s for s in executor.received("/echo") if s.query.get("execution_id") == execution_id]
    assert seen.method == "POST"
    assert seen.query == {"execution_id": execution_id, "name": "encode", "tier": "2"}
    assert seen.headers["x-flow-server"] == engine.url
    assert seen.headers["content-type"] == "application/json"
    assert seen.headers["traceparent"] == "00-ab-cd-01"
    assert "x-mode" not in seen.headers
    callback = urlsplit(seen.headers["x-callback-url"])
    assert f"{callback.scheme}://{callback.netloc}{callback.path}" == engine.trigger_url
    query = parse_qs(callback.query)
    assert query["execution_id"] == [execution_id]
    assert query["task_name"] == ["encode"]
    assert "sign" not in query
    [record] = engine.dispatches(execution_id, "encode")
    assert record.ts == int(query["ts"][0])
    assert (record.send, record.status_code, record.error) == (1, 200, None)


def test_a_get_task_is_dispatched_without_a_body(
    engine: EngineSimulator, executor: Executor
) -> None:
    task = Task("probe", f"{executor.url}/echo", input={"video": "B"}, request_type="GET")
    execution_id = engine.submit(task)

    assert engine.wait_for(execution_id, "probe").status is TaskStatus.SUCCEED
    [seen] = [s for s in executor.received("/echo") if s.query.get("execution_id") == execution_id]
    assert (seen.method, seen.body) == ("GET", None)


@pytest.mark.parametrize(
    ("answer", "status", "output"),
    [
        ('{"size": 3}', TaskStatus.SUCCEED, {"size": 3}),
        ("[1, 2]", TaskStatus.SUCCEED, {"data": [1, 2]}),
        ('{"result_type": "success"}', TaskStatus.SUCCEED, {"result_type": "success"}),
        ('{"result_type": "FAILED", "error_msg": "no disk"}', TaskStatus.FAILED, None),
        ("", TaskStatus.FAILED, None),
        ("not json", TaskStatus.FAILED, None),
    ],
)
def test_a_sync_answer_is_judged_as_the_engine_does(
    engine: EngineSimulator,
    executor: Executor,
    answer: str,
    status: TaskStatus,
    output: dict[str, Any] | None,
) -> None:
    execution_id = engine.submit(Task("t", f"{executor.url}/answer", input={"answer": answer}))

    view = engine.wait_for(execution_id, "t")

    assert (view.status, view.output) == (status, output)
    assert len(engine.dispatches(execution_id)) == 1  # a 2xx is never resent


def test_a_failing_sync_answer_records_the_executor_message(
    engine: EngineSimulator, executor: Executor
) -> None:
    answer = json.dumps({"result_type": "FAILED", "data": {"error_msg": "no disk"}})
    execution_id = engine.submit(Task("t", f"{executor.url}/answer", input={"answer": answer}))

    assert engine.wait_for(execution_id, "t").message == "no disk"


# --- transport: timeouts and the identical resend ---------------------------------------------


@pytest.mark.real_clock(
    "the engine's HTTP client timeouts are socket timeouts, on no virtual clock"
)
def test_a_sync_handler_slower_than_the_read_timeout_is_resent_once_then_fails(
    engine: EngineSimulator, executor: Executor
) -> None:
    execution_id = engine.submit(Task("slow", f"{executor.url}/slow"))

    view = engine.wait_for(execution_id, "slow")

    assert view.status is TaskStatus.FAILED
    assert view.attempts == 1
    assert view.message is not None and "ReadTimeout" in view.message
    first, second = engine.dispatches(execution_id, "slow")
    assert (first.send, second.send) == (1, 2)
    assert first.ts == second.ts
    assert first.headers == second.headers
    assert first.body == second.body
    assert first.error is not None and first.error.startswith("ReadTimeout")
    assert second.error is not None and second.error.startswith("ReadTimeout")
    seen = [s for s in executor.received("/slow") if s.query["execution_id"] == execution_id]
    assert len(seen) == 2
    assert seen[0].headers["x-callback-url"] == seen[1].headers["x-callback-url"]


def test_a_non_2xx_answer_is_resent_identically(
    engine: EngineSimulator, executor: Executor
) -> None:
    execution_id = engine.submit(Task("flaky", f"{executor.url}/flaky"))

    assert engine.wait_for(execution_id, "flaky").status is TaskStatus.SUCCEED
    first, second = engine.dispatches(execution_id, "flaky")
    assert (first.status_code, second.status_code) == (500, 200)
    assert (first.ts, first.headers) == (second.ts, second.headers)


def test_an_unreachable_executor_fails_the_dispatch_after_two_connection_errors(
    engine: EngineSimulator,
) -> None:
    with serve_app(FastAPI()) as url:
        pass  # a port that was just free again: nothing listens there now
    execution_id = engine.submit(Task("gone", f"{url}/run"))

    view = engine.wait_for(execution_id, "gone")

    assert view.status is TaskStatus.FAILED
    records = engine.dispatches(execution_id)
    assert [r.send for r in records] == [1, 2]
    assert all(r.error is not None and r.error.startswith("ConnectError") for r in records)


# --- async: acknowledge, then call back -------------------------------------------------------


def test_an_async_task_acknowledged_then_called_back_succeeds_with_the_callback_body(
    engine: EngineSimulator, executor: Executor
) -> None:
    reply = {"output": {"url": "s3://out/A.mp4", "result_type": "FAILED"}}
    task = Task("encode", f"{executor.url}/ack", Pattern.TASK_ASYNC, input={"reply": reply})
    execution_id = engine.submit(task)

    view = engine.wait_for(execution_id, "encode")

    # trigger.json reads failure from the status parameter only: result_type is ignored.
    assert view.status is TaskStatus.SUCCEED
    assert view.output == reply["output"]
    assert engine.status(execution_id, "encode") is TaskStatus.SUCCEED  # the status alone
    with pytest.raises(UsageError, match="has no task 'decode'"):
        engine.status(execution_id, "decode")
    [record] = engine.dispatches(execution_id)
    assert record.headers["X-Mode"] == "async"
    [callback] = engine.callbacks(execution_id, "encode")
    assert (callback.endpoint, callback.method, callback.status_code) == (
        "trigger.json",
        "POST",
        200,
    )
    assert callback.answer["result"] == "ok" and callback.answer["request_id"]
    assert callback.task_status is TaskStatus.RUNNING


@pytest.mark.parametrize("status", ["FAILED", "failed", "anything"])
def test_an_async_task_called_back_with_a_failure_status_fails(
    engine: EngineSimulator, executor: Executor, status: str
) -> None:
    reply = {"status": status, "output": {"error_msg": "codec missing"}}
    task = Task("encode", f"{executor.url}/ack", Pattern.TASK_ASYNC, input={"reply": reply})
    execution_id = engine.submit(task)

    view = engine.wait_for(execution_id, "encode")

    assert view.status is TaskStatus.FAILED
    assert (view.message, view.output) == ("codec missing", None)


def _timed_out(
    virtual: tuple[EngineSimulator, VirtualClock], task: Task, *others: Task
) -> tuple[EngineSimulator, str]:
    """``task`` dispatched and timed out (its 1 s timeout at the engine's poll of 3 s)."""
    engine, clock = virtual
    execution_id = engine.submit(task, *others, dispatch=False)
    engine.dispatch(execution_id, task.name)
    engine.wait_idle()
    clock.advance(3)
    engine.wait_idle()
    assert any(t.reason == "timeout" for t in engine.task(execution_id, task.name).history)
    return engine, execution_id


def test_a_callback_after_the_timeout_while_a_retry_waits_is_an_attempt_on_the_wrong_task(
    http: httpx.Client, virtual: tuple[EngineSimulator, VirtualClock], executor: Executor
) -> None:
    task = Task(
        "encode",
        f"{executor.url}/ack",
        Pattern.TASK_ASYNC,
        retry=Retry(max_retry_times=1, interval_in_seconds=60),
        timeout_in_seconds=1,
    )
    engine, execution_id = _timed_out(virtual, task)
    assert engine.task(execution_id, "encode").status is TaskStatus.READY

    late = http.post(_callback_url(engine, execution_id, "encode"), json={"url": "late"})

    assert late.status_code == 500
    assert late.json()["error_code"] == 30601
    assert late.json()["error"] == "attempt finish wrong task encode"
    assert engine.task(execution_id, "encode").status is TaskStatus.READY
    assert engine.callbacks(execution_id)[-1].task_status is TaskStatus.READY


def test_a_callback_after_the_timeout_failed_the_task_is_a_repeated_finish(
    http: httpx.Client, virtual: tuple[EngineSimulator, VirtualClock], executor: Executor
) -> None:
    task = Task("encode", f"{executor.url}/ack", Pattern.TASK_ASYNC, timeout_in_seconds=1)
    waiting = Task("publish", f"{executor.url}/echo")  # keeps the execution running
    engine, execution_id = _timed_out(virtual, task, waiting)
    view = engine.task(execution_id, "encode")
    assert (view.status, view.message) == (TaskStatus.FAILED, "timeout")

    late = http.get(_callback_url(engine, execution_id, "encode"))

    assert late.status_code == 500
    assert late.json()["error_code"] == 30601
    assert late.json()["error"] == "repeated finish task encode"
    assert engine.task(execution_id, "encode").status is TaskStatus.FAILED


def test_a_callback_after_the_timeout_finished_the_execution_is_answered_is_finished(
    http: httpx.Client, virtual: tuple[EngineSimulator, VirtualClock], executor: Executor
) -> None:
    task = Task("encode", f"{executor.url}/ack", Pattern.TASK_ASYNC, timeout_in_seconds=1)
    engine, execution_id = _timed_out(virtual, task)

    late = http.post(_callback_url(engine, execution_id, "encode"))

    assert late.status_code == 500
    assert late.json()["error_code"] == 30601
    assert late.json()["error"] == f"validateDAGInfo dag executionId:{execution_id} is finished"


def test_an_async_timeout_tells_the_executor_nothing_and_the_retry_is_accepted(
    http: httpx.Client, virtual: tuple[EngineSimulator, VirtualClock], executor: Executor
) -> None:
    task = Task(
        "encode",
        f"{executor.url}/ack",
        Pattern.TASK_ASYNC,
        retry=Retry(max_retry_times=1, interval_in_seconds=1),
        timeout_in_seconds=1,
    )
    engine, execution_id = _timed_out(virtual, task)
    assert engine.task(execution_id, "encode").status is TaskStatus.READY  # the retry waits
    virtual[1].advance(3)  # due at 4 s, fired at the poll of 6 s
    engine.wait_for_status(execution_id, "encode", TaskStatus.RUNNING)
    first, retry = engine.wait_for_dispatches(execution_id, "encode", 2)

    # The late callback of attempt 1 lands on the RUNNING attempt 2: the engine cannot tell.
    late = http.post(first.headers["X-Callback-Url"], json={"from": "attempt 1"})

    assert late.status_code == 200
    view = engine.task(execution_id, "encode")
    assert (view.status, view.output, view.attempts) == (
        TaskStatus.SUCCEED,
        {"from": "attempt 1"},
        2,
    )
    assert (first.attempt, retry.attempt) == (1, 2)
    seen = [s for s in executor.received("/ack") if s.query["execution_id"] == execution_id]
    assert len(seen) == 2  # the two dispatches, nothing else: no cancel was sent


# --- retries ---------------------------------------------------------------------------------


def test_retry_delays_follow_the_engine_formula() -> None:
    assert [Retry(3, 1, 1.5).delay_before_retry(k) for k in (1, 2, 3)] == [1, 2, 3]
    assert [Retry(3, 2, 2).delay_before_retry(k) for k in (1, 2, 3)] == [4, 8, 16]
    assert Retry(1, 3, 0.5).delay_before_retry(1) == 1  # int(1.5)
    assert Retry(1, 0, 2).delay_before_retry(1) == 0
    assert Retry(2, 0.1, 2).delay_before_retry(2) == pytest.approx(0.4)
    assert Retry(2).total_attempts == 3
    assert (Retry(2).allows_retry(2), Retry(2).allows_retry(3)) == (True, False)


@pytest.mark.parametrize(
    "bad",
    [
        {"max_retry_times": -1},
        {"max_retry_times": 1.5},
        {"interval_in_seconds": -1},
        {"multiplier": 0},
    ],
)
def test_a_bad_retry_policy_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        Retry(**bad)


@pytest.mark.real_clock(
    "the default timer runner (a thread on the real clock, no clock given) must fire"
    " timers by itself, after their delays and never before"
)
def test_a_failing_task_is_redispatched_after_each_delay_until_its_attempts_run_out(
    exact: EngineSimulator, executor: Executor
) -> None:
    answer = json.dumps({"result_type": "FAILED"})
    retry = Retry(max_retry_times=2, interval_in_seconds=0.05, multiplier=2)
    execution_id = exact.submit(
        Task("t", f"{executor.url}/answer", input={"answer": answer}, retry=retry)
    )

    view = exact.wait_for(execution_id, "t")

    assert (view.status, view.attempts) == (TaskStatus.FAILED, 3)
    records = exact.dispatches(execution_id, "t")
    assert [r.attempt for r in records] == [1, 2, 3]
    assert len({r.ts for r in records}) == 3
    assert {(r.query["execution_id"], r.query["name"]) for r in records} == {(execution_id, "t")}
    for k, (before, after) in enumerate(itertools.pairwise(records), start=1):
        # A timer never fires early: each retry starts at least its delay after the failure.
        assert after.started_at - (before.started_at + before.elapsed) >= retry.delay_before_retry(
            k
        )
    reasons = [t.reason for t in view.history if t.status is TaskStatus.READY]
    assert reasons == ["submitted", "retry 1 scheduled", "retry 2 scheduled"]


def test_the_engines_retry_interval_is_whole_seconds_the_exact_clocks_is_not() -> None:
    # Retry.intervalInSeconds is an Integer; SimpleRetryPolicy.calculateRetryInterval casts.
    retry = Retry(max_retry_times=3, interval_in_seconds=1.5, multiplier=1.5)
    engine, exact = EngineSimulator(), EngineSimulator(timers="exact")
    assert [engine._retry_delay(retry, k) for k in (1, 2, 3)] == [1, 2, 3]
    assert engine._retry_delay(Retry(1, 0.5), 1) == 0  # at once
    assert exact._retry_delay(Retry(1, 0.5), 1) == 0.5
    with pytest.raises(ConfigError, match=r"'poll'.*'exact'"):
        EngineSimulator(timers="fast")  # type: ignore[arg-type]


NS = 10**9


def test_a_retry_fires_at_the_engines_next_poll_never_before(
    virtual: tuple[EngineSimulator, VirtualClock], executor: Executor
) -> None:
    engine, clock = virtual
    start = clock.time_ns()
    assert start % (3 * NS) == 0  # the poll: epoch seconds divisible by 3
    clock.advance(1.4)  # the retry falls due at 2.4 s, between two polls
    answer = json.dumps({"result_type": "FAILED"})
    retry = Retry(max_retry_times=1, interval_in_seconds=1)
    execution_id = engine.submit(
        Task("t", f"{executor.url}/answer", input={"answer": answer}, retry=retry)
    )
    engine.wait_idle()
    (scheduled,) = [t for t in engine.task(execution_id, "t").history if "scheduled" in t.reason]
    assert round(scheduled.at * NS) == start + 1_400_000_000

    clock.advance(1.6 - 1e-9)  # due, but the poll has not looked yet
    engine.wait_idle()
    assert len(engine.dispatches(execution_id, "t")) == 1

    clock.advance(1e-9)  # the poll at 3 s
    engine.wait_idle()
    view = engine.wait_for(execution_id, "t")
    _, retried = engine.dispatches(execution_id, "t")
    assert round(retried.started_at * NS) == start + 3 * NS
    assert retried.ts == (start + 3 * NS) // 10**6  # the callback URL's ts: the engine's clock
    assert (view.status, view.attempts) == (TaskStatus.FAILED, 2)


def test_a_timeout_fires_at_the_engines_next_poll_never_before(
    virtual: tuple[EngineSimulator, VirtualClock], executor: Executor
) -> None:
    engine, clock = virtual
    start = clock.time_ns()
    clock.advance(4.2)  # acknowledged at 4.2 s: the timeout falls due at 5.2 s
    task = Task("encode", f"{executor.url}/ack", Pattern.TASK_ASYNC, timeout_in_seconds=1)
    execution_id = engine.submit(task)
    engine.wait_idle()
    assert engine.task(execution_id, "encode").status is TaskStatus.RUNNING

    clock.advance(1.8 - 1e-9)
    engine.wait_idle()
    assert engine.task(execution_id, "encode").status is TaskStatus.RUNNING

    clock.advance(1e-9)  # the poll at 6 s
    engine.wait_idle()
    view = engine.task(execution_id, "encode")
    (timed_out,) = [t for t in view.history if t.reason == "timeout"]
    assert round(timed_out.at * NS) == start + 6 * NS
    assert (view.status, view.message) == (TaskStatus.FAILED, "timeout")


def test_timers_fire_in_due_order_whatever_order_they_were_armed_in(
    executor: Executor,
) -> None:
    # On the exact clock: a timeout armed after a retry but due before it fires first.
    clock = VirtualClock()
    with EngineSimulator(clock=clock, timers="exact") as engine:
        answer = json.dumps({"result_type": "FAILED"})
        slow = engine.submit(
            Task(
                "t",
                f"{executor.url}/answer",
                input={"answer": answer},
                retry=Retry(max_retry_times=1, interval_in_seconds=2),
            )
        )
        engine.wait_idle()
        fast = engine.submit(
            Task("encode", f"{executor.url}/ack", Pattern.TASK_ASYNC, timeout_in_seconds=1)
        )
        engine.wait_idle()

        clock.advance(5)
        engine.wait_idle()

        timed_out = engine.task(fast, "encode").history[-1]
        retried = engine.dispatches(slow, "t")[-1]
        assert (timed_out.reason, round(timed_out.at - clock.time_ns() / NS, 6)) == ("timeout", -4)
        assert round(retried.started_at - clock.time_ns() / NS, 6) == -3


def test_a_clock_that_is_not_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="not a Clock"):
        EngineSimulator(clock=object())  # type: ignore[arg-type]


def test_a_timeout_that_is_not_a_whole_number_arms_no_timeout(
    http: httpx.Client, engine: EngineSimulator, executor: Executor
) -> None:
    # DAGOperations.getTimeoutSeconds: Long.valueOf("0.5") throws, and the engine arms none.
    task = Task("encode", f"{executor.url}/ack", Pattern.TASK_ASYNC, timeout_in_seconds=0.5)
    execution_id = engine.submit(task)

    engine.wait_until(
        lambda: any(
            t.reason == "no timeout: timeoutInSeconds 0.5 is not a whole number"
            for t in engine.task(execution_id, "encode").history
        )
    )

    assert http.post(_callback_url(engine, execution_id, "encode")).status_code == 200
    view = engine.task(execution_id, "encode")
    assert view.status is TaskStatus.SUCCEED
    assert [t.reason for t in view.history].count("timeout") == 0


# --- redo ------------------------------------------------------------------------------------


def test_redo_of_a_running_task_dispatches_it_again_concurrently(
    http: httpx.Client, engine: EngineSimulator, executor: Executor
) -> None:
    execution_id = engine.submit(Task("encode", f"{executor.url}/ack", Pattern.TASK_ASYNC))
    engine.wait_for_dispatches(execution_id, "encode", 1)
    engine.wait_for_status(execution_id, "encode", TaskStatus.RUNNING)

    engine.redo(execution_id, "encode")

    first, second = engine.wait_for_dispatches(execution_id, "encode", 2)
    engine.wait_for_status(execution_id, "encode", TaskStatus.RUNNING)
    assert (first.attempt, second.attempt) == (1, 2)
    assert first.ts != second.ts
    assert first.query == second.query == {"execution_id": execution_id, "name": "encode"}
    seen = [s for s in executor.received("/ack") if s.query["execution_id"] == execution_id]
    assert len(seen) == 2  # the first run was never told to stop
    ok = http.post(second.headers["X-Callback-Url"], json={"n": 2})
    assert ok.status_code == 200
    view = engine.task(execution_id, "encode")
    # One attempt: the engine counts a run only once the one before it ended.
    assert (view.status, view.attempts) == (TaskStatus.SUCCEED, 1)
    assert [t.reason for t in view.history].count("redo") == 2


def _fail_by_callback(http: httpx.Client, record: DispatchRecord) -> None:
    url = httpx.URL(record.headers["X-Callback-Url"]).copy_add_param("status", "FAILED")
    assert http.post(url, json={"error_msg": "no"}).status_code == 200


def test_a_redo_of_a_running_task_counts_no_attempt_so_the_task_gets_one_retry_more(
    http: httpx.Client, engine: EngineSimulator, executor: Executor
) -> None:
    # AbstractTaskRunner.updateTaskInvokeStartTime: the redo's run is no new invocation while
    # the one it redoes has not ended, and SimpleRetryPolicy counts invocations.
    retry = Retry(max_retry_times=1, interval_in_seconds=0)  # at once, not through the poll
    task = Task("encode", f"{executor.url}/ack", Pattern.TASK_ASYNC, retry=retry)
    execution_id = engine.submit(task)
    engine.wait_for_dispatches(execution_id, "encode", 1)
    engine.redo(execution_id, "encode")
    _, redone = engine.wait_for_dispatches(execution_id, "encode", 2)
    assert engine.task(execution_id, "encode").attempts == 1

    _fail_by_callback(http, redone)  # retried: one attempt made, one retry allowed

    *_, retried = engine.wait_for_dispatches(execution_id, "encode", 3)
    engine.wait_for_status(execution_id, "encode", TaskStatus.RUNNING)
    _fail_by_callback(http, retried)
    view = engine.wait_for(execution_id, "encode")
    assert (view.status, view.attempts) == (TaskStatus.FAILED, 2)
    assert [r.attempt for r in engine.dispatches(execution_id, "encode")] == [1, 2, 3]


def test_a_redo_of_a_task_waiting_for_its_retry_leaves_the_retry_to_fire_alongside(
    http: httpx.Client, virtual: tuple[EngineSimulator, VirtualClock], executor: Executor
) -> None:
    engine, clock = virtual
    retry = Retry(max_retry_times=1, interval_in_seconds=1)
    task = Task("encode", f"{executor.url}/ack", Pattern.TASK_ASYNC, retry=retry)
    execution_id = engine.submit(task)
    (first,) = engine.wait_for_dispatches(execution_id, "encode", 1)
    engine.wait_for_status(execution_id, "encode", TaskStatus.RUNNING)
    _fail_by_callback(http, first)  # READY: the retry is due in 1 s, at the poll of 3 s

    engine.redo(execution_id, "encode")
    _, redone = engine.wait_for_dispatches(execution_id, "encode", 2)
    engine.wait_idle()
    clock.advance(3)

    # DAGRunner.resetTask leaves the time check alone: the retry still fires, and the time
    # check dispatches the task whatever its state (TimeCheckRunner, TASK_WAIT_CHECK).
    _, redone, retried = engine.wait_for_dispatches(execution_id, "encode", 3)
    assert redone.ts < retried.ts
    engine.wait_idle()
    view = engine.task(execution_id, "encode")
    assert (view.status, view.attempts) == (TaskStatus.RUNNING, 2)  # the retry joined the redo
    seen = [s for s in executor.received("/ack") if s.query["execution_id"] == execution_id]
    assert len(seen) == 3


# --- callbacks ---------------------------------------------------------------------------------


def _running(engine: EngineSimulator, executor: Executor) -> str:
    execution_id = engine.submit(Task("encode", f"{executor.url}/ack", Pattern.TASK_ASYNC))
    engine.wait_for_status(execution_id, "encode", TaskStatus.RUNNING)
    engine.wait_for_dispatches(execution_id, "encode", 1)
    return execution_id


def test_a_callback_body_over_6144_characters_is_refused_and_the_task_keeps_running(
    http: httpx.Client, engine: EngineSimulator, executor: Executor
) -> None:
    execution_id = _running(engine, executor)
    url = _callback_url(engine, execution_id, "encode")
    padding = 6144 - len('{"x":""}')

    too_large = http.post(url, content=json.dumps({"x": "a" * (padding + 1)}))

    assert too_large.status_code == 400
    assert too_large.json()["error_code"] == 30109
    assert too_large.json()["error"] == "context size nonsupport"
    assert engine.task(execution_id, "encode").status is TaskStatus.RUNNING
    just_fits = http.post(url, content=json.dumps({"x": "a" * padding}))
    assert just_fits.status_code == 200
    assert engine.task(execution_id, "encode").status is TaskStatus.SUCCEED


def test_a_second_callback_is_a_repeated_finish(
    http: httpx.Client, engine: EngineSimulator, executor: Executor
) -> None:
    publish = Task("publish", f"{executor.url}/echo")  # keeps the execution running
    execution_id = engine.submit(
        Task("encode", f"{executor.url}/ack", Pattern.TASK_ASYNC), publish, dispatch=False
    )
    engine.dispatch(execution_id, "encode")
    engine.wait_for_status(execution_id, "encode", TaskStatus.RUNNING)
    url = _callback_url(engine, execution_id, "encode")

    assert http.post(url, json={"n": 1}).status_code == 200
    again = http.post(httpx.URL(url).copy_add_param("status", "FAILED"), json={"n": 2})

    assert (again.status_code, again.json()["error"]) == (500, "repeated finish task encode")
    assert engine.task(execution_id, "encode").output == {"n": 1}


def test_the_legacy_finish_endpoint_reads_the_status_from_the_body(
    http: httpx.Client, engine: EngineSimulator, executor: Executor
) -> None:
    execution_id = _running(engine, executor)
    params = {"execution_id": execution_id, "task_name": "encode"}

    answer = http.post(
        f"{engine.url}/flow/finish.json", params=params, json={"result_type": "failed"}
    )

    assert answer.status_code == 200
    assert engine.task(execution_id, "encode").status is TaskStatus.FAILED
    unknown = {"execution_id": "test:dag_c_unknown", "task_name": "encode"}
    gone = http.post(f"{engine.url}/flow/finish.json", params=unknown, json={})
    assert (gone.status_code, gone.json()["error_code"]) == (500, 30605)


def test_callbacks_for_unknown_tasks_or_without_parameters_are_refused(
    http: httpx.Client,
    engine: EngineSimulator,
) -> None:
    unknown = http.get(
        engine.trigger_url, params={"execution_id": "test:dag_c_x", "task_name": "encode"}
    )
    missing = http.get(engine.trigger_url, params={"execution_id": "test:dag_c_x"})

    assert (unknown.status_code, unknown.json()["error_code"]) == (400, 30109)
    assert unknown.json()["error"] == "task not exists test:dag_c_x:encode"
    assert (missing.status_code, missing.json()["error_code"]) == (422, 30109)
    assert [c.status_code for c in engine.callbacks("test:dag_c_x")] == [400, 422]


# --- sign --------------------------------------------------------------------------------------


def test_a_configured_secret_signs_every_callback_url_verifiably(executor: Executor) -> None:
    with EngineSimulator(sign_secret="s3cret") as engine:
        execution_id = engine.submit(Task("encode", f"{executor.url}/echo"))
        engine.wait_for(execution_id, "encode")
        [record] = engine.dispatches(execution_id)

    url = record.headers["X-Callback-Url"]
    assert verify_callback_sign(url, "s3cret")
    assert not verify_callback_sign(url, "other")
    # Recomputed by hand: sorted, Java-URL-encoded parameters, HMAC-SHA1, Base64.
    encoded_id = execution_id.replace(":", "%3A")
    signed = f"execution_id={encoded_id}&task_name=encode&ts={record.ts}"
    digest = hmac.new(b"s3cret", signed.encode(), hashlib.sha1).digest()
    assert parse_qs(urlsplit(url).query)["sign"] == [base64.b64encode(digest).decode()]


def test_misuse_is_refused_with_clear_errors(engine: EngineSimulator, executor: Executor) -> None:
    with pytest.raises(ConfigError, match="only for task_async"):
        Task("t", f"{executor.url}/echo", timeout_in_seconds=1)
    with pytest.raises(ConfigError, match="http"):
        Task("t", "executor/echo")
    execution_id = engine.submit(Task("t", f"{executor.url}/echo"))
    with pytest.raises(UsageError, match="only a NOT_STARTED task"):
        engine.dispatch(execution_id, "t")
    with pytest.raises(UsageError, match="no task 'other'"):
        engine.task(execution_id, "other")
    assert engine.wait_for(execution_id, "t").status is TaskStatus.SUCCEED


def test_the_public_names_are_pinned() -> None:
    import rill_executor.testing.rillflow as simulator

    assert sorted(simulator.__all__) == [
        "CallbackRecord",
        "Dag",
        "DagStatus",
        "DispatchRecord",
        "EngineSimulator",
        "Pattern",
        "Retry",
        "Task",
        "TaskStatus",
        "TaskView",
        "Transition",
        "Transport",
        "callback_sign",
        "serve_app",
        "verify_callback_sign",
    ]


def test_the_testing_package_does_not_import_the_simulator() -> None:
    # The simulator needs the rillflow extra; the store kit must import without it.
    code = (
        "import sys, rill_executor.testing; print('rill_executor.testing.rillflow' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
