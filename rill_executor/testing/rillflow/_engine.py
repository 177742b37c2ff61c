"""The simulated engine: executions, task states, dispatch runs, timers and callbacks."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import httpx

from rill_executor._errors import ConfigError, UsageError

from ._callbacks import Answer, FinishRequest, build_app, error_answer, ok_answer
from ._dispatch import Transport, failure_reason, invoke_message, judge_sync_answer, prepare, send
from ._model import (
    CallbackRecord,
    DagStatus,
    DispatchRecord,
    Pattern,
    Task,
    TaskStatus,
    TaskView,
    Transition,
)
from ._server import serve_app
from ._sign import callback_url

__all__ = ["EngineSimulator"]

ILLEGAL_STATE = 30601  # TraversalErrorCode.DAG_ILLEGAL_STATE
EXECUTION_NOT_FOUND = 30605  # TraversalErrorCode.DAG_EXECUTION_NOT_FOUND
INTERNAL = 30101  # BizError.ERROR_INTERNAL, e.g. the task lock not obtained


@dataclass
class _TaskState:
    spec: Task
    status: TaskStatus = TaskStatus.NOT_STARTED
    output: dict[str, Any] | None = None
    message: str | None = None
    attempts: int = 0
    # Bumped on every dispatch and redo, so a timer armed for an earlier run does nothing.
    generation: int = 0
    history: list[Transition] = field(default_factory=list)
    # The engine's task lock: held through a dispatch and through a callback's handling.
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class _Execution:
    id: str
    tasks: dict[str, _TaskState]
    traceparent: str | None


class EngineSimulator:
    """A Rill Flow engine in a box: dispatches tasks to your executor over real HTTP.

    Use it as a context manager; it serves the engine's callback endpoints on a free
    127.0.0.1 port while open::

        with EngineSimulator() as engine:
            execution_id = engine.submit(Task("transcode", f"{executor_url}/transcode"))
            view = engine.wait_for(execution_id, "transcode")

    Dispatches run in background threads with the engine's HTTP client timeouts and one
    identical resend (see ``Transport``); a failed dispatch, a failing answer or callback
    and an async timeout all go through the task's ``Retry`` policy. ``sign_secret`` makes
    every callback URL carry the engine's ``sign``. ``lock_timeout`` is how long a callback
    waits for the task lock (the engine's 10 s) before it is answered 500/30101.
    """

    def __init__(
        self,
        *,
        sign_secret: str | None = None,
        transport: Transport | None = None,
        lock_timeout: float = 10.0,
        callback_max_chars: int = 6144,
        max_workers: int = 32,
    ) -> None:
        if lock_timeout <= 0 or callback_max_chars <= 0 or max_workers <= 0:
            raise ConfigError("lock_timeout, callback_max_chars and max_workers must be > 0")
        self.sign_secret = sign_secret
        self.transport = transport or Transport()
        self.lock_timeout = lock_timeout
        self.callback_max_chars = callback_max_chars
        self._max_workers = max_workers
        self.intercept: Callable[[Mapping[str, str]], Answer | None] | None = None
        self._changed = threading.Condition(threading.RLock())
        self._executions: dict[str, _Execution] = {}
        self._dispatches: list[DispatchRecord] = []
        self._callbacks: list[CallbackRecord] = []
        self._timers: set[threading.Timer] = set()
        self._last_ts = 0
        self._url: str | None = None
        self._server: AbstractContextManager[str] | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._client: httpx.Client | None = None
        self._closed = False

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> EngineSimulator:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        """Serve the callback endpoints and get ready to dispatch."""
        if self._url is not None or self._closed:
            raise UsageError("an EngineSimulator starts once; create a new one instead")
        self._server = serve_app(build_app(self))
        self._url = self._server.__enter__()
        self._client = self.transport.client()
        self._pool = ThreadPoolExecutor(self._max_workers, thread_name_prefix="rillflow-dispatch")

    def close(self) -> None:
        """Cancel pending retries and timeouts, wait for running dispatches, stop serving."""
        with self._changed:
            self._closed = True
            timers, self._timers = self._timers, set()
        for timer in timers:
            timer.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._client is not None:
            self._client.close()
        if self._server is not None:
            self._server.__exit__(None, None, None)

    @property
    def url(self) -> str:
        """The engine's base URL (``X-Flow-Server``)."""
        if self._url is None:
            raise UsageError("the simulator is not started; use it as a context manager")
        return self._url

    @property
    def trigger_url(self) -> str:
        """Where callbacks go: ``{url}/flow/trigger.json``."""
        return f"{self.url}/flow/trigger.json"

    # --- driving ---------------------------------------------------------------------------

    def submit(
        self,
        *tasks: Task,
        dag: str = "dag",
        workspace: str = "test",
        traceparent: str | None = None,
        dispatch: bool = True,
    ) -> str:
        """Create an execution of ``tasks``; dispatch them all unless ``dispatch=False``.

        Returns the execution id, ``{workspace}:{dag}_c_{uuid}``. Tasks have no dependencies
        here: each is dispatched on its own (``dispatch`` dispatches one later). The
        execution is finished once a task without ``tolerance`` fails for good or every task
        succeeded; callbacks for a finished execution are answered "is finished".
        """
        names = [task.name for task in tasks]
        if not tasks or len(set(names)) != len(names):
            raise UsageError(f"submit needs at least one task and distinct names, got {names}")
        execution_id = f"{workspace}:{dag}_c_{uuid.uuid4()}"
        with self._changed:
            self._executions[execution_id] = _Execution(
                execution_id, {task.name: _TaskState(task) for task in tasks}, traceparent
            )
        if dispatch:
            for name in names:
                self.dispatch(execution_id, name)
        return execution_id

    def dispatch(self, execution_id: str, task_name: str) -> None:
        """Dispatch a task that has not started yet (in the background)."""
        with self._changed:
            state = self._state(execution_id, task_name)
            if state.status is not TaskStatus.NOT_STARTED:
                raise UsageError(
                    f"task {task_name!r} is {state.status}; only a NOT_STARTED task is "
                    "dispatched (use redo to run it again)"
                )
            self._move(state, TaskStatus.READY, "submitted")
            generation = state.generation
        self._spawn(execution_id, task_name, generation)

    def redo(self, execution_id: str, task_name: str) -> None:
        """The engine's redo: reset the task and dispatch it again, whatever its state.

        A RUNNING task's first run is not stopped, so the executor sees a second, concurrent
        dispatch. The attempt counter is not reset; pending retries and timeouts are dropped.
        """
        with self._changed:
            state = self._state(execution_id, task_name)
            state.generation += 1
            state.output = None
            state.message = None
            self._move(state, TaskStatus.NOT_STARTED, "redo")
            self._move(state, TaskStatus.READY, "redo")
            generation = state.generation
        self._spawn(execution_id, task_name, generation)

    # --- looking -----------------------------------------------------------------------------

    def task(self, execution_id: str, task_name: str) -> TaskView:
        """A snapshot of one task."""
        with self._changed:
            state = self._state(execution_id, task_name)
            return TaskView(
                execution_id=execution_id,
                name=task_name,
                status=state.status,
                output=None if state.output is None else dict(state.output),
                attempts=state.attempts,
                message=state.message,
                history=tuple(state.history),
            )

    def execution_status(self, execution_id: str) -> DagStatus:
        """RUNNING, or how the execution finished."""
        with self._changed:
            return self._dag_status(self._execution(execution_id))

    def dispatches(
        self, execution_id: str | None = None, task_name: str | None = None
    ) -> list[DispatchRecord]:
        """Every HTTP request sent so far (resends included), oldest first."""
        with self._changed:
            return [r for r in self._dispatches if _matches(r, execution_id, task_name)]

    def callbacks(
        self, execution_id: str | None = None, task_name: str | None = None
    ) -> list[CallbackRecord]:
        """Every callback received so far, with the engine's answer, oldest first."""
        with self._changed:
            return [
                r
                for r in self._callbacks
                if (execution_id is None or r.query.get("execution_id") == execution_id)
                and (task_name is None or r.query.get("task_name") == task_name)
            ]

    def wait_until(self, predicate: Callable[[], bool], *, timeout: float = 10.0) -> None:
        """Block until ``predicate()`` holds (checked on every change); ``TimeoutError`` if not."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"the condition did not hold within {timeout} s")
                self._changed.wait(min(left, 0.1))

    def wait_for(self, execution_id: str, task_name: str, *, timeout: float = 10.0) -> TaskView:
        """Wait until the task is SUCCEED, FAILED (no retry left) or SKIPPED; its snapshot."""
        try:
            self.wait_until(
                lambda: self._state(execution_id, task_name).status.is_final, timeout=timeout
            )
        except TimeoutError:
            view = self.task(execution_id, task_name)
            raise TimeoutError(
                f"task {task_name!r} of {execution_id} is still {view.status} after {timeout} s "
                f"({view.attempts} attempts)"
            ) from None
        return self.task(execution_id, task_name)

    def wait_for_status(
        self, execution_id: str, task_name: str, status: TaskStatus, *, timeout: float = 10.0
    ) -> TaskView:
        """Wait until the task is in ``status``; its snapshot."""
        self.wait_until(
            lambda: self._state(execution_id, task_name).status is status, timeout=timeout
        )
        return self.task(execution_id, task_name)

    def wait_for_dispatches(
        self, execution_id: str, task_name: str, count: int, *, timeout: float = 10.0
    ) -> list[DispatchRecord]:
        """Wait until at least ``count`` requests were sent for the task; all of them."""
        self.wait_until(
            lambda: len(self.dispatches(execution_id, task_name)) >= count, timeout=timeout
        )
        return self.dispatches(execution_id, task_name)

    # --- the callback side (called by the endpoints) ------------------------------------------

    def task_exists(self, execution_id: str, task_name: str) -> bool:
        with self._changed:
            execution = self._executions.get(execution_id)
            return execution is not None and task_name in execution.tasks

    def record_callback(self, record: CallbackRecord) -> None:
        with self._changed:
            self._callbacks.append(record)
            self._changed.notify_all()

    def finish(self, request: FinishRequest, record: Callable[[Answer], CallbackRecord]) -> Answer:
        """Apply a callback as the engine does: under the task lock, by the task's state.

        The callback is recorded in the same step that applies it, so a test that saw the
        task change also sees the callback that changed it.
        """
        execution_id, name = request.execution_id, request.task_name
        with self._changed:
            execution = self._executions.get(execution_id)
            state = None if execution is None else execution.tasks.get(name)
        if execution is None:
            message = f"validateDAGInfo dag executionId:{execution_id} not found"
            return self._answer(record, error_answer(500, EXECUTION_NOT_FOUND, message))
        if state is None:
            message = f"dag {execution_id} can not get task {name}"
            return self._answer(record, error_answer(500, ILLEGAL_STATE, message))
        if not state.lock.acquire(timeout=self.lock_timeout):
            return self._answer(record, error_answer(500, INTERNAL, "internal server error"))
        try:
            with self._changed:
                return self._answer(record, self._judge(execution, state, request))
        finally:
            state.lock.release()

    def _answer(self, record: Callable[[Answer], CallbackRecord], answer: Answer) -> Answer:
        self.record_callback(record(answer))
        return answer

    def _judge(self, execution: _Execution, state: _TaskState, request: FinishRequest) -> Answer:
        status = state.status
        if self._dag_status(execution) is not DagStatus.RUNNING:
            message = f"validateDAGInfo dag executionId:{execution.id} is finished"
            return error_answer(500, ILLEGAL_STATE, message, status)
        if status in {TaskStatus.NOT_STARTED, TaskStatus.READY}:
            message = f"attempt finish wrong task {state.spec.name}"
            return error_answer(500, ILLEGAL_STATE, message, status)
        if status.is_final:
            return error_answer(
                500, ILLEGAL_STATE, f"repeated finish task {state.spec.name}", status
            )
        state.generation += 1  # disarms this run's timeout
        if request.succeeded:
            state.output = request.output
            state.message = invoke_message(request.output)
            self._move(state, TaskStatus.SUCCEED, f"{request.endpoint} success")
        else:
            self._fail(execution.id, state, invoke_message(request.output) or "failed by callback")
        return ok_answer(status)

    # --- internals -----------------------------------------------------------------------------

    def _execution(self, execution_id: str) -> _Execution:
        execution = self._executions.get(execution_id)
        if execution is None:
            raise UsageError(f"no execution {execution_id!r} in this simulator; submit it first")
        return execution

    def _state(self, execution_id: str, task_name: str) -> _TaskState:
        state = self._execution(execution_id).tasks.get(task_name)
        if state is None:
            raise UsageError(f"execution {execution_id!r} has no task {task_name!r}")
        return state

    @staticmethod
    def _dag_status(execution: _Execution) -> DagStatus:
        states = execution.tasks.values()
        if any(s.status is TaskStatus.FAILED and not s.spec.tolerance for s in states):
            return DagStatus.FAILED
        if all(s.status.is_final for s in states):
            return DagStatus.SUCCEED
        return DagStatus.RUNNING

    def _move(self, state: _TaskState, status: TaskStatus, reason: str) -> None:
        state.status = status
        state.history.append(Transition(time.time(), status, reason))
        self._changed.notify_all()

    def _next_ts(self) -> int:
        # Epoch milliseconds, strictly increasing so that two dispatches never share a ts.
        with self._changed:
            self._last_ts = max(int(time.time() * 1000), self._last_ts + 1)
            return self._last_ts

    def _spawn(self, execution_id: str, task_name: str, generation: int) -> None:
        with self._changed:
            if self._closed or self._pool is None:
                raise UsageError("the simulator is not running; use it as a context manager")
            self._pool.submit(self._run, execution_id, task_name, generation)

    def _spawn_retry(self, execution_id: str, task_name: str, generation: int) -> None:
        with self._changed:
            if not self._closed:
                self._spawn(execution_id, task_name, generation)

    def _schedule(self, delay: float, action: Callable[[], None]) -> None:
        def fire() -> None:
            with self._changed:
                self._timers.discard(timer)
                if self._closed:
                    return
            action()

        timer = threading.Timer(delay, fire)
        timer.daemon = True
        with self._changed:
            if self._closed:
                return
            self._timers.add(timer)
        timer.start()

    def _run(self, execution_id: str, task_name: str, generation: int) -> None:
        """One dispatch of a task, holding its task lock as the engine does."""
        with self._changed:
            execution = self._executions[execution_id]
            state = execution.tasks[task_name]
        with state.lock:
            with self._changed:
                if state.generation != generation or state.status is not TaskStatus.READY:
                    return  # a redo replaced this run
                if self._dag_status(execution) is not DagStatus.RUNNING:
                    return
                state.attempts += 1
                state.generation += 1
                attempt, generation = state.attempts, state.generation
                self._move(state, TaskStatus.RUNNING, f"dispatch {attempt}")
            ts = self._next_ts()
            callback = callback_url(self.trigger_url, execution_id, task_name, ts, self.sign_secret)
            prepared = prepare(
                state.spec,
                execution_id,
                flow_server=self.url,
                callback=callback,
                traceparent=execution.traceparent,
            )
            assert self._client is not None  # set by start(), before any dispatch
            records, text = send(
                self._client,
                self.transport,
                prepared,
                execution_id=execution_id,
                task_name=task_name,
                attempt=attempt,
                ts=ts,
            )
            with self._changed:
                self._dispatches.extend(records)
                self._changed.notify_all()
                if state.generation != generation:
                    return  # redone while the request was on the wire
                self._after_dispatch(execution, state, records, text)

    def _after_dispatch(
        self,
        execution: _Execution,
        state: _TaskState,
        records: list[DispatchRecord],
        text: str | None,
    ) -> None:
        if text is None:
            self._fail(execution.id, state, failure_reason(records))
        elif state.spec.pattern is Pattern.TASK_ASYNC:
            timeout = state.spec.timeout_in_seconds
            if timeout is not None:
                generation = state.generation
                self._schedule(
                    timeout, lambda: self._time_out(execution.id, state.spec.name, generation)
                )
        else:
            status, output, message = judge_sync_answer(text)
            state.message = message
            if status is TaskStatus.SUCCEED:
                state.output = output
                self._move(state, TaskStatus.SUCCEED, "sync answer")
            else:
                self._fail(execution.id, state, message or "sync answer failed")

    def _time_out(self, execution_id: str, task_name: str, generation: int) -> None:
        state = self._executions[execution_id].tasks[task_name]
        with state.lock, self._changed:
            if state.generation == generation and state.status is TaskStatus.RUNNING:
                state.generation += 1
                self._fail(execution_id, state, "timeout")

    def _fail(self, execution_id: str, state: _TaskState, message: str) -> None:
        """FAILED, then READY with a retry scheduled if the policy allows one."""
        state.message = message
        self._move(state, TaskStatus.FAILED, message)
        retry = state.spec.retry
        if not retry.allows_retry(state.attempts):
            return
        self._move(state, TaskStatus.READY, f"retry {state.attempts} scheduled")
        delay = retry.delay_before_retry(state.attempts)
        generation, name = state.generation, state.spec.name
        self._schedule(delay, lambda: self._spawn_retry(execution_id, name, generation))


def _matches(record: DispatchRecord, execution_id: str | None, task_name: str | None) -> bool:
    return (execution_id is None or record.execution_id == execution_id) and (
        task_name is None or record.task_name == task_name
    )
