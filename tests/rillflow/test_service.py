"""The example executor under uvicorn with two worker processes, in a subprocess, driven by
the engine simulator over real HTTP, on SQLite, PostgreSQL and Redis.

Each scenario is one of the engine's failure windows; each asserts how often the work ran,
what the engine's task ended as, and which callbacks the engine received.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from rill_executor.testing import VirtualClock
from rill_executor.testing.drill import FaultProxy
from rill_executor.testing.rillflow import EngineSimulator, Pattern, Retry, Task, TaskStatus

from ..adapters.faults.outage import StoreLink
from .service import ExecutorService

pytestmark = pytest.mark.slow

OUTPUT = {"frames": 250}


@pytest.fixture(autouse=True)
def namespace(monkeypatch: pytest.MonkeyPatch) -> str:
    """A namespace of the test's own, for every executor it starts: the servers are shared,
    and an executor re-drives any lapsed job of its namespace, another test's too."""
    name = f"segments-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("RILL_NAMESPACE", name)
    return name


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.db'}"
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return str(request.getfixturevalue("redis_url"))


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[ExecutorService]:
    service = ExecutorService(store_url, tmp_path).start()
    yield service
    service.stop()


@pytest.fixture
def engine() -> Iterator[EngineSimulator]:
    with EngineSimulator() as engine:
        yield engine


@pytest.fixture
def exact() -> Iterator[EngineSimulator]:
    """An engine whose timers fire after exactly their (sub-second) delays, not on the
    engine's 3 s poll: for windows that need a timer inside a short run."""
    with EngineSimulator(timers="exact") as engine:
        yield engine


@pytest.fixture
def virtual() -> Iterator[tuple[EngineSimulator, VirtualClock]]:
    """An engine on its own timing (the 3 s poll) whose timers fire only when the test
    advances its clock: a timer lands exactly where the test needs it, with no waiting. The
    executor keeps the real clock: it is a real process on a real store."""
    clock = VirtualClock()
    with EngineSimulator(clock=clock) as engine:
        yield engine, clock


def segment(
    url: str, pattern: Pattern, retry: Retry | None = None, **job: object
) -> tuple[Task, str]:
    """A task for a fresh business key, and that key."""
    video = f"v{uuid.uuid4().hex[:10]}"
    timeout = job.pop("timeout", None)
    task = Task(
        "encode",
        f"{url}/segments",
        pattern=pattern,
        input={"video": video, "segment": 1, "profile": "h264-v2", **job},
        retry=retry or Retry(),
        timeout_in_seconds=timeout,  # type: ignore[arg-type]
    )
    return task, f"{video}:1:h264-v2"


def applied(engine: EngineSimulator, execution: str) -> list[int]:
    return [c.status_code for c in engine.callbacks(execution, "encode")]


def told_once(engine: EngineSimulator, execution: str) -> bool:
    """One callback applied; any other refused by the engine as final (a redo that came
    while the earlier callback was on the wire is told too, and the engine, which applied
    the earlier one to the redone task, answers it "is finished")."""
    callbacks = engine.callbacks(execution, "encode")
    final = [c for c in callbacks if c.status_code != 200]
    return len(callbacks) - len(final) == 1 and all(
        (c.answer or {}).get("error_code") == 30601 for c in final
    )


@pytest.mark.real_clock(
    "the engine's read timeout is a socket timeout; the run is real, in a process"
)
def test_a_slow_sync_handler_runs_once_across_the_resend(
    service: ExecutorService, engine: EngineSimulator
) -> None:
    # Retries to spare: on a loaded machine the 2 s handler may outlast the first two.
    task, key = segment(service.url, Pattern.TASK_SYNC, Retry(4, 1), seconds=2.0)
    execution = engine.submit(task)
    view = engine.wait_for(execution, "encode", timeout=30)
    assert view.status is TaskStatus.SUCCEED, view
    assert view.output is not None and view.output["frames"] == 250
    assert service.runs() == {key: 1}


@pytest.mark.real_clock(
    "the timers must fall inside the handler's real 2 s run, in a uvicorn process"
)
def test_an_async_timeout_and_retries_while_it_runs_execute_once(
    service: ExecutorService, exact: EngineSimulator
) -> None:
    engine = exact  # sub-second timeouts and retries, several inside one 2 s run
    task, key = segment(service.url, Pattern.TASK_ASYNC, Retry(8, 0.3), seconds=2.0, timeout=0.7)
    execution = engine.submit(task)
    view = engine.wait_for(execution, "encode", timeout=30)
    assert view.status is TaskStatus.SUCCEED, view
    assert service.runs() == {key: 1}
    assert applied(engine, execution).count(200) == 1


@pytest.mark.real_clock(
    "the redo must land inside the handler's real 1.5 s run, in a uvicorn process"
)
def test_a_redo_of_a_running_task_does_not_run_it_again(
    service: ExecutorService, engine: EngineSimulator
) -> None:
    task, key = segment(service.url, Pattern.TASK_ASYNC, seconds=1.5)
    execution = engine.submit(task)
    engine.wait_for_status(execution, "encode", TaskStatus.RUNNING)
    engine.redo(execution, "encode")
    view = engine.wait_for(execution, "encode", timeout=30)
    assert view.status is TaskStatus.SUCCEED, view
    assert service.runs() == {key: 1}
    assert applied(engine, execution).count(200) == 1


class _Behind(EngineSimulator):
    """The engine, with its callback endpoint reached through port ``via`` (a forwarder
    or a proxy in front of it)."""

    via: int | None = None

    @property
    def trigger_url(self) -> str:
        assert self.via is not None
        return f"http://127.0.0.1:{self.via}/flow/trigger.json"


def _engine_port(engine: EngineSimulator) -> int:
    port = urlsplit(engine.url).port
    assert port is not None
    return port


@pytest.mark.real_clock("a real process killed with SIGKILL, restarted, and its store's own clock")
def test_a_crash_between_commit_and_callback_loses_nothing(store_url: str, tmp_path: Path) -> None:
    gate = FaultProxy("127.0.0.1", None)  # the engine is unreachable at first
    engine = _Behind()
    engine.via = gate.port
    service = ExecutorService(store_url, tmp_path).start()
    try:
        with engine:
            task, key = segment(service.url, Pattern.TASK_ASYNC, seconds=0.2)
            execution = engine.submit(task)
            deadline = time.monotonic() + 20
            while True:  # committed, and its callback already failed once
                answer = service.status(key)
                notices = answer.json().get("notices", []) if answer.status_code == 200 else []
                if notices and notices[0]["attempts"] >= 1 and notices[0]["outcome"]:
                    break
                assert time.monotonic() < deadline, answer.text
                time.sleep(0.05)
            service.kill()  # SIGKILL: no shutdown, no delivery
            gate.retarget(_engine_port(engine))
            service.start()
            view = engine.wait_for(execution, "encode", timeout=30)
            assert view.status is TaskStatus.SUCCEED, view
            assert view.output is not None and view.output["frames"] == 250
            assert service.runs() == {key: 1}
            assert applied(engine, execution) == [200]
    finally:
        service.stop()
        gate.close()


def _ended_once(
    service: ExecutorService, engine: EngineSimulator, execution: str, key: str
) -> None:
    """The task SUCCEED with one applied callback and one committed result."""
    view = engine.wait_for(execution, "encode", timeout=60)
    assert view.status is TaskStatus.SUCCEED, view
    assert view.output is not None and view.output["frames"] == 250
    assert applied(engine, execution) == [200]
    status = service.status(key).json()
    assert status["state"] == "succeeded"
    assert [a["outcome"] for a in status["attempts"]].count("succeeded") == 1


@pytest.mark.real_clock(
    "a process killed with SIGKILL; its re-drive waits on the store's own clock"
)
def test_an_executor_killed_mid_run_is_redriven_after_its_restart(
    store_url: str, tmp_path: Path
) -> None:
    """No engine timeout: only the executor can end the task. The store marks the dead
    attempt's lapse; the restarted executor's deliverer runs the job again."""
    service = ExecutorService(store_url, tmp_path).start()
    try:
        with EngineSimulator() as engine:
            task, key = segment(service.url, Pattern.TASK_ASYNC, seconds=1.0)
            execution = engine.submit(task)
            engine.wait_for_status(execution, "encode", TaskStatus.RUNNING, timeout=20)
            engine.wait_until(lambda: service.runs() == {key: 1}, timeout=20)
            time.sleep(0.5)
            service.kill()  # SIGKILL mid-run: no finish, no shutdown
            service.start()
            _ended_once(service, engine, execution, key)
            # the killed run, and one more
            assert service.runs() == {key: 2}, service.status(key).json()["attempts"]
            attempts = service.status(key).json()["attempts"]
            assert [a["outcome"] for a in attempts] == ["expired", "succeeded"]
    finally:
        service.stop()


@pytest.mark.real_clock(
    "a process killed with SIGKILL; its re-drive waits on the store's own clock"
)
def test_a_timeout_the_engine_does_not_arm_leaves_a_killed_run_to_the_executor(
    store_url: str, tmp_path: Path
) -> None:
    """``timeoutInSeconds`` 0.5 is no timeout on the engine (``Long.valueOf`` refuses it,
    DAGOperations.getTimeoutSeconds): it never dispatches again, and only the executor's
    re-drive ends the task whose worker was killed."""
    service = ExecutorService(store_url, tmp_path).start()
    try:
        with EngineSimulator() as engine:
            task, key = segment(
                service.url, Pattern.TASK_ASYNC, Retry(2, 1), seconds=1.0, timeout=0.5
            )
            execution = engine.submit(task)
            engine.wait_for_status(execution, "encode", TaskStatus.RUNNING, timeout=20)
            engine.wait_until(lambda: service.runs() == {key: 1}, timeout=20)
            service.kill()  # SIGKILL mid-run: no finish, no shutdown
            service.start()
            _ended_once(service, engine, execution, key)
            assert len(engine.dispatches(execution, "encode")) == 1  # no timeout, no retry
            attempts = service.status(key).json()["attempts"]
            assert [a["outcome"] for a in attempts] == ["expired", "succeeded"]
    finally:
        service.stop()


def test_a_retry_that_fires_alongside_a_redo_joins_its_run(
    service: ExecutorService, virtual: tuple[EngineSimulator, VirtualClock]
) -> None:
    """A redo of a task waiting for its retry does not cancel the retry (DAGRunner.resetTask
    leaves the engine's time check alone): the redo's dispatch and, at the engine's next
    poll, the retry's reach the executor. The job is handed off meanwhile, so both find it
    running: one run, one result, one applied callback."""
    engine, clock = virtual
    gate = FaultProxy("127.0.0.1", None)  # the first dispatch finds nobody: a retry is due
    done = {"uri": "s3://segments/encoded-by-the-farm.mp4", "frames": 250}
    try:
        url = f"http://127.0.0.1:{gate.port}"
        task, key = segment(url, Pattern.TASK_ASYNC, Retry(1, 1), external=True)
        execution = engine.submit(task)
        engine.wait_until(
            lambda: any(
                t.reason == "retry 1 scheduled" for t in engine.task(execution, "encode").history
            ),
            timeout=20,
        )
        gate.retarget(service.port)
        engine.redo(execution, "encode")
        engine.wait_until(lambda: len(service.handoffs()) == 1, timeout=20)  # the redo's run
        ((_, token),) = service.handoffs()
        # The encoder holds the job for as long as the retry may take (the poll, a busy box).
        held = httpx.post(
            f"{service.url}/rill/heartbeat",
            json={"lease": 60},
            headers={"Authorization": f"Bearer {token}"},
            timeout=5,
        )
        assert held.status_code == 200, held.text
        assert sum(d.ok for d in engine.dispatches(execution, "encode")) == 1  # not yet due
        clock.advance(3)  # the retry, due at 1 s, fires at the engine's poll of 3 s
        engine.wait_until(
            lambda: sum(d.ok for d in engine.dispatches(execution, "encode")) == 2, timeout=20
        )  # and the retry's dispatch, answered while the run holds the job
        assert service.complete(token, {"result": done}).status_code == 200
        _ended_once(service, engine, execution, key)
        assert service.runs() == {key: 1} and len(service.handoffs()) == 1
        assert [a["outcome"] for a in service.status(key).json()["attempts"]] == ["succeeded"]
    finally:
        gate.close()


@pytest.mark.real_clock(
    "a real outage of the store's connection, and leases on the store's own clock"
)
@pytest.mark.parametrize("server", ["postgres", "redis"])
def test_the_stores_connection_cut_mid_run_ends_in_one_result(
    server: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The store is unreachable from 1 s into a 4 s run until 5 s later: the commit is
    retried while the lease lasts, and a job whose lease ran out meanwhile is re-driven."""
    link = StoreLink(str(request.getfixturevalue(f"{server}_url")))
    service = ExecutorService(link.url, tmp_path).start()
    try:
        with EngineSimulator() as engine:
            task, key = segment(service.url, Pattern.TASK_ASYNC, seconds=4.0)
            execution = engine.submit(task)
            engine.wait_until(lambda: service.runs() == {key: 1}, timeout=20)
            time.sleep(1.0)
            link.down()
            time.sleep(5.0)
            link.up()
            _ended_once(service, engine, execution, key)
            assert 1 <= service.runs()[key] <= 2  # once more at most, for the lapsed run
    finally:
        service.stop()
        link.close()


@pytest.mark.real_clock(
    "a real process killed with SIGKILL while its callback is cut off by a proxy"
)
def test_a_repeated_finish_is_delivered_not_retried(store_url: str, tmp_path: Path) -> None:
    """The engine applied the callback but its answer was lost: the resend is answered
    "repeated finish", which counts as delivered."""
    inner = EngineSimulator()
    with inner:
        proxy = FaultProxy("127.0.0.1", _engine_port(inner))
        engine = inner
        engine.__class__ = type(
            "Cut",
            (EngineSimulator,),
            {
                "trigger_url": property(
                    lambda self: f"http://127.0.0.1:{proxy.port}/flow/trigger.json"
                )
            },
        )
        service = ExecutorService(store_url, tmp_path).start()
        try:
            task, key = segment(service.url, Pattern.TASK_ASYNC)
            proxy.arm(b"trigger.json")
            execution = engine.submit(task)
            view = engine.wait_for(execution, "encode", timeout=30)
            assert view.status is TaskStatus.SUCCEED
            engine.wait_until(lambda: len(engine.callbacks(execution, "encode")) >= 2, timeout=30)
            time.sleep(0.5)
            codes = [
                (c.status_code, c.answer.get("error_code"))
                for c in engine.callbacks(execution, "encode")
            ]
            assert codes[0][0] == 200 and codes[1] == (500, 30601) and len(codes) == 2, codes
            (notice,) = service.status(key).json()["notices"]
            assert (notice["status"], notice["outcome"], notice["attempts"]) == (
                "delivered",
                "final_duplicate",
                2,
            )
        finally:
            service.stop()
            proxy.close()


def test_a_callback_to_a_task_waiting_for_its_retry_keeps_the_result(
    service: ExecutorService, virtual: tuple[EngineSimulator, VirtualClock]
) -> None:
    """The engine timed the task out and waits to retry it: the callback is answered
    "attempt finish wrong task"; the retry is answered from the stored result."""
    engine, clock = virtual
    # The first dispatch times out (1 s, at the poll of 3 s on the engine's clock) while the
    # handler runs (1.5 s of real time); the retry, due 2 s later (int(2.5)), fires at the
    # poll of 6 s, once the callback came, and is answered from the stored result.
    task, key = segment(service.url, Pattern.TASK_ASYNC, Retry(1, 2.5), seconds=1.5, timeout=1)
    execution = engine.submit(task)
    engine.wait_idle()  # acknowledged: the handler runs
    clock.advance(3)
    engine.wait_idle()
    assert engine.task(execution, "encode").status is TaskStatus.READY
    engine.wait_until(lambda: len(engine.callbacks(execution, "encode")) == 1, timeout=30)
    clock.advance(3)
    view = engine.wait_for(execution, "encode", timeout=30)
    assert view.status is TaskStatus.SUCCEED, view
    assert service.runs() == {key: 1}
    answers = [(c.status_code, c.task_status) for c in engine.callbacks(execution, "encode")]
    assert answers == [(500, TaskStatus.READY), (200, TaskStatus.RUNNING)], answers

    # The executor records the delivery once the engine's answer is back: after the engine
    # applied the callback, so wait for the record, not just for the engine.
    def settled() -> list[tuple[str, str | None]]:
        notices = service.status(key).json()["notices"]
        return [(n["status"], n["outcome"]) for n in notices]

    deadline = time.monotonic() + 10
    while ("pending", None) in settled() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert settled() == [("dropped", "moved_on"), ("delivered", "ok")]


@pytest.mark.parametrize("pattern", [Pattern.TASK_SYNC, Pattern.TASK_ASYNC])
def test_failures_reach_the_engine_terminal_ones_are_not_rerun(
    service: ExecutorService, engine: EngineSimulator, pattern: Pattern
) -> None:
    task, key = segment(service.url, pattern, Retry(2, 0.3), fail="terminal")
    execution = engine.submit(task)
    view = engine.wait_for(execution, "encode", timeout=30)
    assert view.status is TaskStatus.FAILED and view.attempts == 3
    assert service.runs() == {key: 1}
    if pattern is Pattern.TASK_ASYNC:
        failed = [
            c for c in engine.callbacks(execution, "encode") if c.query.get("status") == "FAILED"
        ]
        assert len(failed) == 3 and "cannot encode" in json.loads(failed[0].body_text)["error_msg"]


@pytest.mark.real_clock("a real process stopped past its lease, judged on the store's own clock")
def test_a_stopped_attempt_superseded_meanwhile_sends_no_callback(
    store_url: str, tmp_path: Path
) -> None:
    (tmp_path / "z").mkdir()
    (tmp_path / "y").mkdir()
    zombie = ExecutorService(store_url, tmp_path / "z", lease=1.5, workers=1).start()
    heir = ExecutorService(store_url, tmp_path / "y", lease=1.5).start()
    front = FaultProxy("127.0.0.1", zombie.port)
    try:
        with EngineSimulator() as engine:
            # Retries to spare: a loaded machine may answer the redo's dispatch after the
            # engine's read timeout.
            url = f"http://127.0.0.1:{front.port}"
            task, key = segment(url, Pattern.TASK_ASYNC, Retry(2, 0.5), seconds=3.0)
            execution = engine.submit(task)
            deadline = time.monotonic() + 20
            while not zombie.runs():
                assert time.monotonic() < deadline
                time.sleep(0.02)
            zombie.signal(signal.SIGSTOP)
            time.sleep(2.0)  # past its lease
            front.retarget(heir.port)
            engine.redo(execution, "encode")
            view = engine.wait_for(execution, "encode", timeout=30)
            assert view.status is TaskStatus.SUCCEED
            zombie.signal(signal.SIGCONT)
            time.sleep(3.5)  # the zombie's handler ends and its commit is fenced
            assert applied(engine, execution) == [200]
            status = heir.status(key).json()
            assert [a["outcome"] for a in status["attempts"]] == ["expired", "succeeded"]
            # One callback; and, if the heir's deliverer saw the lapse before the redo came,
            # the lapse notice it acted on (the redo then joined the re-driven run).
            callbacks = [n for n in status["notices"] if n["watch"]]
            assert len(callbacks) == 1
            assert all(n["outcome"] == "redriven" for n in status["notices"] if not n["watch"])
    finally:
        zombie.signal(signal.SIGCONT)
        zombie.stop()
        heir.stop()
        front.close()


@pytest.mark.real_clock(
    "a real process stopped past its hand-off's lease, judged on the store's own clock"
)
def test_a_stopped_attempts_completion_token_is_refused_after_a_takeover(
    store_url: str, tmp_path: Path
) -> None:
    (tmp_path / "z").mkdir()
    (tmp_path / "y").mkdir()
    zombie = ExecutorService(store_url, tmp_path / "z", lease=1.5, workers=1).start()
    heir = ExecutorService(store_url, tmp_path / "y", lease=1.5).start()
    front = FaultProxy("127.0.0.1", zombie.port)
    done = {"uri": "s3://segments/encoded-by-the-farm.mp4", "frames": 250}
    try:
        with EngineSimulator() as engine:
            url = f"http://127.0.0.1:{front.port}"
            task, key = segment(url, Pattern.TASK_ASYNC, external=True)
            execution = engine.submit(task)
            engine.wait_until(lambda: len(zombie.handoffs()) == 1, timeout=20)
            ((_, stale),) = zombie.handoffs()
            zombie.signal(signal.SIGSTOP)
            time.sleep(2.0)  # past the lease the hand-off holds
            front.retarget(heir.port)
            engine.redo(execution, "encode")
            engine.wait_until(lambda: len(heir.handoffs()) == 1, timeout=20)
            ((_, fresh),) = heir.handoffs()
            assert heir.complete(fresh, {"result": done}).status_code == 200
            view = engine.wait_for(execution, "encode", timeout=30)
            assert view.status is TaskStatus.SUCCEED and view.output == {**OUTPUT, **done}
            zombie.signal(signal.SIGCONT)
            late = zombie.complete(stale, {"result": {**done, "uri": "s3://stale.mp4"}})
            assert late.status_code == 409 and late.json()["reason"] == "superseded", late.text
            status = heir.status(key).json()
            assert status["result"] == done and told_once(engine, execution)
            first, second = status["attempts"]
            assert (first["outcome"], second["outcome"]) == ("expired", "succeeded")
            assert [(e["kind"], e["reason"]) for e in first["events"]] == [
                ("token_refused", "superseded")
            ]
            assert second["events"] == []
    finally:
        zombie.signal(signal.SIGCONT)
        zombie.stop()
        heir.stop()
        front.close()
