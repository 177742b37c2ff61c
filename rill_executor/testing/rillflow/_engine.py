"""The simulated engine: executions, task states, dispatch runs, timers and callbacks."""

from __future__ import annotations

import copy
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Literal

import httpx

from rill_executor import ConfigError, UsageError
from rill_executor._clock import checked_clock
from rill_executor.store import SYSTEM_CLOCK, Clock

from .._clock import TimerHandle
from . import _mapping
from ._callbacks import Answer, FinishRequest, build_app, error_answer, ok_answer
from ._dag import Dag, ForeachNode, FunctionNode, Node
from ._dispatch import (
    DispatchRefused,
    Transport,
    auth_requested,
    failure_reason,
    invoke_message,
    judge_sync_answer,
    prepare,
    send,
)
from ._javaorder import foreach_group_order
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
from ._policy import Retry
from ._server import serve_app
from ._sign import callback_url
from ._timers import Instant, Instants, RealTimeTimers, timers_for

__all__ = ["EngineSimulator"]

ILLEGAL_STATE = 30601  # TraversalErrorCode.DAG_ILLEGAL_STATE
EXECUTION_NOT_FOUND = 30605  # TraversalErrorCode.DAG_EXECUTION_NOT_FOUND
INTERNAL = 30101  # BizError.ERROR_INTERNAL, e.g. the task lock not obtained
# FlowSchedulerJobs.businessTimeCheck, cron "0/3 * * * * *": the engine looks for due retries
# and timeouts at every third second of the minute, i.e. at epoch seconds divisible by 3.
POLL_SECONDS = 3
_POLL_NS = POLL_SECONDS * 10**9
_AUTH = "generate_auth"


# Generations are unique across tasks, so a run or timer of a task a redo removed (a foreach
# child) never matches the task that replaced it under the same name.
_GENERATIONS = itertools.count(1)
_FINAL = frozenset(status for status in TaskStatus if status.is_final)


@dataclass
class _TaskState:
    name: str
    # The function task to dispatch (its input mapped at each dispatch); None for a foreach.
    spec: Task | None
    node: Node | None = None
    after: tuple[str, ...] = ()  # the predecessors (DAG tasks)
    route: str | None = None  # "{foreach}_{index}" of a foreach child: its sub-context
    status: TaskStatus = TaskStatus.NOT_STARTED
    output: dict[str, Any] | None = None
    message: str | None = None
    # The engine's count of invocations (TaskInvokeMsg.invokeTimeInfos), which its retry
    # policy reads: a dispatch adds one only if the last one ended (``open`` is False).
    attempts: int = 0
    open: bool = False
    dispatched: int = 0  # every dispatch, redos of a RUNNING task included
    # Renewed on every dispatch and redo, so a timeout armed for an earlier run does nothing.
    generation: int = field(default_factory=lambda: next(_GENERATIONS))
    # The pending retry: one per task (the engine's time-check member names the task, not
    # the run), replaced by a newer one, not dropped by a redo.
    retry: object | None = None
    history: list[Transition] = field(default_factory=list)
    # The engine's task lock: held through a dispatch and through a callback's handling.
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def function(self) -> Task:
        assert self.spec is not None, f"{self.name} is not a function task"
        return self.spec

    def renew(self) -> int:
        self.generation = next(_GENERATIONS)
        return self.generation

    @property
    def done(self) -> bool:
        """Whether successors may run: SUCCEED or SKIPPED (a failure with ``tolerance``)."""
        return self.status in {TaskStatus.SUCCEED, TaskStatus.SKIPPED}


@dataclass
class _Execution:
    id: str
    tasks: dict[str, _TaskState]
    traceparent: str | None
    dag: Dag | None = None
    context: dict[str, Any] = field(default_factory=dict)
    sub_contexts: dict[str, dict[str, Any]] = field(default_factory=dict)


class EngineSimulator:
    """A Rill Flow engine in a box: dispatches tasks to your executor over real HTTP.

    Use it as a context manager; it serves the engine's callback endpoints on 127.0.0.1
    while open, on ``port`` (default: a free one)::

        with EngineSimulator() as engine:
            execution_id = engine.submit(Task("transcode", f"{executor_url}/transcode"))
            view = engine.wait_for(execution_id, "transcode")

    Dispatches run in background threads with the engine's HTTP client timeouts and one
    identical resend (see ``Transport``); a failed dispatch, a failing answer or callback
    and an async timeout all go through the task's ``Retry`` policy. ``sign_secret`` makes
    every callback URL carry the engine's ``sign``; with ``sign_workspaces`` only those of
    the listed workspaces (the engine's list of business ids) and of dispatches whose input
    sets ``generate_auth`` to true or 1, which the engine then leaves out of the body.
    ``lock_timeout`` is how long a callback waits for the task lock (the engine's 10 s)
    before it is answered 500/30101.

    ``timers`` is the clock of retries and timeouts. ``"poll"`` (the default) is the
    engine's: a timer is due after whole seconds (``intervalInSeconds`` is an Integer, a
    ``timeoutInSeconds`` that is not a whole number > 0 arms no timeout at all) and fires at
    the engine's next poll, every 3 s, so up to 3 s late; a retry due at once is dispatched
    at once. ``"exact"`` is a test clock the engine does not have: each timer fires after
    exactly its delay, fractions of a second taken as given. Ask for it by name, where a
    test is about something other than the engine's clock and would only wait longer.

    ``clock`` is the time the timers wait on and every record is stamped with (default: the
    real one). With a ``rill_executor.testing.VirtualClock`` no timer fires by itself: the
    clock's ``advance`` fires each due retry or timeout at its instant (on the poll with
    ``timers="poll"``), in due order, and ``wait_idle`` waits for what it set off. Share the
    clock with the executor's ``Ledger`` and ``MemoryStore`` and a retry minutes away, or a
    lease running out, costs no waiting.
    """

    def __init__(
        self,
        *,
        sign_secret: str | None = None,
        sign_workspaces: Collection[str] | None = None,
        transport: Transport | None = None,
        lock_timeout: float = 10.0,
        callback_max_chars: int = 6144,
        max_workers: int = 32,
        port: int = 0,
        timers: Literal["poll", "exact"] = "poll",
        clock: Clock | None = None,
    ) -> None:
        if lock_timeout <= 0 or callback_max_chars <= 0 or max_workers <= 0:
            raise ConfigError("lock_timeout, callback_max_chars and max_workers must be > 0")
        if timers not in ("poll", "exact"):
            raise ConfigError(
                f"timers must be 'poll' (the engine's clock) or 'exact' (a test clock), "
                f"got {timers!r}"
            )
        self.timers = timers
        self.clock = SYSTEM_CLOCK if clock is None else checked_clock(clock)
        self._runner = timers_for(self.clock)
        self._time = Instants(self.clock, timeless=not isinstance(self._runner, RealTimeTimers))
        self.sign_secret = sign_secret
        self.sign_workspaces = None if sign_workspaces is None else frozenset(sign_workspaces)
        self.transport = transport or Transport()
        self.lock_timeout = lock_timeout
        self.callback_max_chars = callback_max_chars
        self._max_workers = max_workers
        self._port = port
        self.intercept: Callable[[Mapping[str, str]], Answer | None] | None = None
        self._changed = threading.Condition(threading.RLock())
        self._executions: dict[str, _Execution] = {}
        self._dispatches: list[DispatchRecord] = []
        self._callbacks: list[CallbackRecord] = []
        self._timers: set[TimerHandle] = set()
        self._busy = 0  # dispatches and fired timers handed to the pool, not yet done
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
        self._server = serve_app(build_app(self), port=self._port)
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
        if isinstance(self._runner, RealTimeTimers):
            self._runner.close()
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
        here: each is dispatched on its own (``dispatch`` dispatches one later). As the
        engine's, the execution runs while any task has not finished (one not dispatched yet
        included), then ends FAILED if a task failed for good, else SUCCEED (a task with
        ``tolerance`` that failed for good is SKIPPED); callbacks for a finished execution
        are answered "is finished".
        """
        names = [task.name for task in tasks]
        if not tasks or len(set(names)) != len(names):
            raise UsageError(f"submit needs at least one task and distinct names, got {names}")
        execution_id = f"{workspace}:{dag}_c_{uuid.uuid4()}"
        with self._changed:
            self._executions[execution_id] = _Execution(
                execution_id,
                {task.name: _TaskState(task.name, task) for task in tasks},
                traceparent,
            )
        if dispatch:
            for name in names:
                self.dispatch(execution_id, name)
        return execution_id

    def submit_dag(
        self, dag: Dag, context: Mapping[str, Any], *, traceparent: str | None = None
    ) -> str:
        """Run ``dag`` with ``context`` as the engine does; returns the execution id.

        The id is ``{workspace}:{dagName}_c_{uuid}``. Root tasks are dispatched at once, a
        successor once all its predecessors succeeded or were SKIPPED (failed with ``tolerance``). A
        task's input is mapped from the context at each dispatch, its output mapped back
        into the context when it succeeds. A foreach maps its input, takes the collection
        out of it and runs its tasks once per element, concurrently, named
        ``{foreach}_{index}-{task}``; each group has its own context (the foreach's input
        plus the element under ``item``), and the foreach's output is
        ``{"sub_context": [group contexts]}``, in the engine's order: Java's hash order of
        the groups' context fields (``_javaorder``), not index order (three groups come as
        2, 1, 0), so whatever is mapped from it must carry its own index.
        """
        if not isinstance(dag, Dag):
            raise UsageError(f"submit_dag takes a Dag (Dag.load), got {dag!r}")
        execution_id = f"{dag.workspace}:{dag.name}_c_{uuid.uuid4()}"
        execution = _Execution(execution_id, {}, traceparent, dag, copy.deepcopy(dict(context)))
        self._add_states(execution, dag.tasks, None)
        with self._changed:
            if self._closed or self._pool is None:
                raise UsageError("the simulator is not running; use it as a context manager")
            self._executions[execution_id] = execution
            self._advance(execution)
        return execution_id

    def dispatch(self, execution_id: str, task_name: str) -> None:
        """Dispatch a task that has not started yet (in the background)."""
        with self._changed:
            state = self._state(execution_id, task_name)
            if self._execution(execution_id).dag is not None:
                raise UsageError("the tasks of a DAG are dispatched by their dependencies")
            if state.status is not TaskStatus.NOT_STARTED:
                raise UsageError(
                    f"task {task_name!r} is {state.status}; only a NOT_STARTED task is "
                    "dispatched (use redo to run it again)"
                )
            self._move(state, TaskStatus.READY, "submitted")
            generation = state.generation
        self._spawn(execution_id, task_name, generation)

    def redo(
        self,
        execution_id: str,
        task_name: str,
        *,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        """The engine's redo: reset the task and dispatch it again, whatever its state.

        A RUNNING task's first run is not stopped, so the executor sees a second, concurrent
        dispatch, and the engine counts no attempt for it (the run it redoes has not ended),
        so the task gets one retry more. The attempt counter is not reset. A pending retry is
        not dropped (``resetTask`` leaves the engine's time check alone): it still fires, and
        dispatches the task again, alongside the redo's run. A pending timeout is dropped.

        In a DAG, as the engine's ``resetTask``: a foreach child's name is taken back to its
        foreach (the part before the first ``_``), which runs all its groups again; the task
        and everything downstream go back to NOT_STARTED (a NOT_STARTED task is left alone);
        ``context`` is merged into the execution's context (its top-level keys replaced);
        then the tasks whose predecessors are done are dispatched with inputs mapped anew.
        """
        with self._changed:
            if self._execution(execution_id).dag is not None:
                self._redo_dag(self._execution(execution_id), task_name, context)
                return
            if context is not None:
                raise UsageError("redo(context=...) applies to executions of a DAG")
            state = self._state(execution_id, task_name)
            state.renew()
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
            return _view(execution_id, self._state(execution_id, task_name))

    def status(self, execution_id: str, task_name: str) -> TaskStatus:
        """The task's status alone: no snapshot copied (a drill asks it of every task it
        watches, tens of thousands in a long one, several times a second)."""
        with self._changed:
            return self._state(execution_id, task_name).status

    def tasks(self, execution_id: str) -> dict[str, TaskView]:
        """A snapshot of every task of the execution, foreach children included."""
        with self._changed:
            states = self._execution(execution_id).tasks.values()
            return {state.name: _view(execution_id, state) for state in states}

    def context(self, execution_id: str) -> dict[str, Any]:
        """A copy of the execution's context (a foreach group's own context not included)."""
        with self._changed:
            return copy.deepcopy(self._execution(execution_id).context)

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
        """Wait until the task is SUCCEED, FAILED (no retry left) or SKIPPED; its snapshot.

        In a DAG, a foreach child that does not exist yet is waited for too.
        """
        try:
            self.wait_until(
                lambda: self._status(execution_id, task_name) in _FINAL, timeout=timeout
            )
        except TimeoutError:
            if self._status(execution_id, task_name) is None:
                raise TimeoutError(
                    f"task {task_name!r} of {execution_id} was not created within {timeout} s"
                ) from None
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
        self.wait_until(lambda: self._status(execution_id, task_name) is status, timeout=timeout)
        return self.task(execution_id, task_name)

    def wait_for_dispatches(
        self, execution_id: str, task_name: str, count: int, *, timeout: float = 10.0
    ) -> list[DispatchRecord]:
        """Wait until at least ``count`` requests were sent for the task; all of them."""
        self.wait_until(
            lambda: len(self.dispatches(execution_id, task_name)) >= count, timeout=timeout
        )
        return self.dispatches(execution_id, task_name)

    def wait_idle(self, *, timeout: float = 10.0) -> None:
        """Wait until no dispatch and no fired retry or timeout is under way.

        On a virtual clock, call it after ``advance`` to see what the timers it fired did
        before time moves on (a callback an executor sends later is not waited for).
        """
        self.wait_until(lambda: self._busy == 0, timeout=timeout)

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
        if state.spec is None:
            return error_answer(500, ILLEGAL_STATE, f"task {state.name} is a foreach", status)
        if self._dag_status(execution) is not DagStatus.RUNNING:
            message = f"validateDAGInfo dag executionId:{execution.id} is finished"
            return error_answer(500, ILLEGAL_STATE, message, status)
        if status in {TaskStatus.NOT_STARTED, TaskStatus.READY}:
            message = f"attempt finish wrong task {state.name}"
            return error_answer(500, ILLEGAL_STATE, message, status)
        if status.is_final:
            return error_answer(500, ILLEGAL_STATE, f"repeated finish task {state.name}", status)
        state.renew()  # disarms this run's timeout
        if request.succeeded:
            state.message = invoke_message(request.output)
            self._succeed(execution, state, request.output, f"{request.endpoint} success")
        else:
            message = invoke_message(request.output) or "failed by callback"
            self._fail(execution.id, state, message, request.output)
        return ok_answer(status)

    # --- internals -----------------------------------------------------------------------------

    def _execution(self, execution_id: str) -> _Execution:
        execution = self._executions.get(execution_id)
        if execution is None:
            raise UsageError(f"no execution {execution_id!r} in this simulator; submit it first")
        return execution

    def _status(self, execution_id: str, task_name: str) -> TaskStatus | None:
        """The task's status; ``None`` for a task a DAG has not created (yet)."""
        execution = self._execution(execution_id)
        if execution.dag is not None and task_name not in execution.tasks:
            return None
        return self._state(execution_id, task_name).status

    def _state(self, execution_id: str, task_name: str) -> _TaskState:
        state = self._execution(execution_id).tasks.get(task_name)
        if state is None:
            raise UsageError(f"execution {execution_id!r} has no task {task_name!r}")
        return state

    @staticmethod
    def _dag_status(execution: _Execution) -> DagStatus:
        states = [s for s in execution.tasks.values() if s.route is None]
        # DAGWalkHelper.calculateDAGStatus: RUNNING while a task is READY or RUNNING or could
        # start (a task of submit() not dispatched yet), whatever failed meanwhile.
        runnable = {TaskStatus.READY, TaskStatus.RUNNING}
        if execution.dag is None:
            runnable.add(TaskStatus.NOT_STARTED)
        if any(s.status in runnable for s in states):
            return DagStatus.RUNNING
        if any(s.status is TaskStatus.FAILED for s in states):
            return DagStatus.FAILED
        if all(s.status.is_final for s in states):
            return DagStatus.SUCCEED
        return DagStatus.RUNNING

    def _move(self, state: _TaskState, status: TaskStatus, reason: str) -> None:
        state.status = status
        state.history.append(Transition(self._time.time_ns() / 1e9, status, reason))
        self._changed.notify_all()

    def _next_ts(self) -> int:
        # Epoch milliseconds, strictly increasing so that two dispatches never share a ts.
        with self._changed:
            self._last_ts = max(self._time.time_ns() // 1_000_000, self._last_ts + 1)
            return self._last_ts

    def _spawn(self, execution_id: str, task_name: str, generation: int) -> None:
        with self._changed:
            if self._closed or self._pool is None:
                raise UsageError("the simulator is not running; use it as a context manager")
            self._submit(lambda: self._run(execution_id, task_name, generation, None))

    def _submit(self, work: Callable[[], None], at: Instant | None = None) -> None:
        """Run ``work`` on the dispatch pool as from ``at`` (default: now), counted until
        done (``wait_idle``)."""
        assert self._pool is not None
        work = self._time.bind(work, at)

        def counted() -> None:
            try:
                work()
            finally:
                with self._changed:
                    self._busy -= 1
                    self._changed.notify_all()

        self._busy += 1
        self._pool.submit(counted)

    def _due(self, delay: float) -> Instant:
        """When a timer due in ``delay`` s fires: at the engine's next poll (an epoch second
        divisible by 3), or after exactly ``delay``."""
        wall, mono = self._time.now()
        due = wall + round(delay * 1e9)
        if self.timers == "poll":
            due = -(-due // _POLL_NS) * _POLL_NS  # rounded up to the poll
        return due, mono + due - wall

    def _retry_delay(self, retry: Retry, k: int) -> float:
        if self.timers == "exact":
            return retry.delay_before_retry(k)
        retry.delay_before_retry(k)  # refuses a delay no record could outlive
        # SimpleRetryPolicy.calculateRetryInterval: (int) (intervalInSeconds * multiplier^k),
        # intervalInSeconds an Integer.
        return float(int(int(retry.interval_in_seconds) * retry.multiplier**k))

    def _timeout(self, task: Task) -> float | None:
        seconds = task.timeout_in_seconds
        if seconds is None or self.timers == "exact":
            return seconds
        # DAGOperations.getTimeoutSeconds: Long.valueOf, then > 0; anything else, no timeout.
        return seconds if float(seconds).is_integer() and seconds > 0 else None

    def _schedule(self, due: Instant, action: Callable[[], None]) -> None:
        """Arm a timer: at ``due`` the clock's runner hands ``action`` to the pool, to run as
        from that instant. The runner (a thread, or whoever advances a virtual clock) never
        waits for a task lock."""

        def fire() -> None:
            with self._changed:
                self._timers.discard(timer)
                if not self._closed:
                    self._submit(action, at=due)

        with self._changed:
            if self._closed:
                return
            timer = self._runner.call_at(due[1], fire)
            self._timers.add(timer)

    def _run(
        self, execution_id: str, task_name: str, generation: int, retry: object | None
    ) -> None:
        """One dispatch of a task, holding its task lock as the engine does.

        A retry (``retry``, its timer's token) dispatches whatever the task's state, as the
        engine's time check does (``TimeCheckRunner.handleTimeCheck``, TASK_WAIT_CHECK,
        straight to ``runTasks``), unless a newer retry replaced it.
        """
        with self._changed:
            execution = self._executions[execution_id]
            found = execution.tasks.get(task_name)
        if found is None:
            return  # a redo removed this foreach child
        state = found
        with state.lock:
            with self._changed:
                if retry is not None:
                    if state.retry is not retry:
                        return  # a newer retry of the task replaced this one
                    state.retry = None
                elif state.generation != generation or state.status is not TaskStatus.READY:
                    return  # a redo replaced this run
                if self._dag_status(execution) is not DagStatus.RUNNING:
                    return
                # AbstractTaskRunner.updateTaskInvokeStartTime: a new invocation only if the
                # last one ended; a redo of a RUNNING task does not count one.
                if not state.open:
                    state.attempts += 1
                    state.open = True
                state.dispatched += 1
                attempt, generation = state.dispatched, state.renew()
                if isinstance(state.node, FunctionNode):
                    state.spec = replace(state.function, input=self._input(execution, state))
                spec = state.function
                self._move(state, TaskStatus.RUNNING, f"dispatch {attempt}")
            ts = self._next_ts()
            secret = self._secret_for(execution_id, spec)
            if secret is not None:  # the engine takes generate_auth out of the input it signs
                spec = replace(spec, input={k: v for k, v in spec.input.items() if k != _AUTH})
            callback = callback_url(self.trigger_url, execution_id, task_name, ts, secret)
            try:
                prepared = prepare(
                    spec,
                    execution_id,
                    flow_server=self.url,
                    callback=callback,
                    traceparent=execution.traceparent,
                )
            except DispatchRefused as refused:  # nothing was sent: a failed dispatch
                with self._changed:
                    if state.generation == generation:
                        self._fail(execution_id, state, str(refused))
                return
            assert self._client is not None  # set by start(), before any dispatch
            records, text = send(
                self._client,
                self.transport,
                prepared,
                execution_id=execution_id,
                task_name=task_name,
                attempt=attempt,
                ts=ts,
                clock=self._time,
            )
            with self._changed:
                self._dispatches.extend(records)
                self._changed.notify_all()
                if state.generation != generation:
                    return  # redone while the request was on the wire
                self._after_dispatch(execution, state, records, text)

    def _secret_for(self, execution_id: str, spec: Task) -> str | None:
        """The secret to sign this dispatch's callback URL with (``FlowAuthHeaderGenerator``):
        a workspace on the engine's list, or an input asking with ``generate_auth``."""
        if self.sign_secret is None:
            return None
        listed = self.sign_workspaces is None or (
            execution_id.split(":", 1)[0] in self.sign_workspaces
        )
        return self.sign_secret if listed or auth_requested(spec.input) else None

    def _after_dispatch(
        self,
        execution: _Execution,
        state: _TaskState,
        records: list[DispatchRecord],
        text: str | None,
    ) -> None:
        if text is None:
            self._fail(execution.id, state, failure_reason(records))
        elif state.function.pattern is Pattern.TASK_ASYNC:
            timeout = self._timeout(state.function)
            if timeout is not None:
                generation = state.generation
                self._schedule(
                    self._due(timeout),
                    lambda: self._time_out(execution.id, state.name, generation),
                )
            elif state.function.timeout_in_seconds is not None:
                seconds = state.function.timeout_in_seconds
                reason = f"no timeout: timeoutInSeconds {seconds!r} is not a whole number"
                self._move(state, TaskStatus.RUNNING, reason)
        else:
            status, output, message = judge_sync_answer(text)
            state.message = message
            if status is TaskStatus.SUCCEED:
                self._succeed(execution, state, output or {}, "sync answer")
            else:
                self._fail(execution.id, state, message or "sync answer failed", output)

    def _time_out(self, execution_id: str, task_name: str, generation: int) -> None:
        state = self._executions[execution_id].tasks.get(task_name)
        if state is None:
            return
        with state.lock, self._changed:
            if state.generation == generation and state.status is TaskStatus.RUNNING:
                state.renew()
                self._fail(execution_id, state, "timeout")

    def _fail(
        self,
        execution_id: str,
        state: _TaskState,
        message: str,
        output: dict[str, Any] | None = None,
    ) -> None:
        """FAILED, then READY with a retry scheduled if the policy allows one.

        With no retry left, a task with ``tolerance`` is SKIPPED instead
        (``FunctionTaskRunner.handleNormalCallback``, ``AbstractTaskRunner.run``), and its
        ``output`` (an answer's or a callback's) is mapped as a success's would be.
        """
        state.message = message
        state.open = False  # the attempt ended: the next dispatch counts a new one
        retry = state.function.retry
        if state.function.tolerance and not retry.allows_retry(state.attempts):
            self._skip(self._executions[execution_id], state, output, message)
            return
        self._move(state, TaskStatus.FAILED, message)
        if not retry.allows_retry(state.attempts):
            self._advance(self._executions[execution_id])
            return
        self._move(state, TaskStatus.READY, f"retry {state.attempts} scheduled")
        delay = self._retry_delay(retry, state.attempts)
        if delay == 0:  # DAGOperations.runTaskWithTimeInterval: at once, not through the poll
            if not self._closed:
                self._spawn(execution_id, state.name, state.generation)
            return
        token, name = object(), state.name
        state.retry = token
        self._schedule(self._due(delay), lambda: self._run(execution_id, name, 0, token))

    # --- DAGs --------------------------------------------------------------------------------

    def _succeed(
        self, execution: _Execution, state: _TaskState, output: dict[str, Any], reason: str
    ) -> None:
        """SUCCEED with ``output``, mapped into the task's context first (if not empty)."""
        state.open = False
        self._end(execution, state, output, TaskStatus.SUCCEED, reason)

    def _skip(
        self,
        execution: _Execution,
        state: _TaskState,
        output: dict[str, Any] | None,
        message: str,
    ) -> None:
        """SKIPPED, a tolerated failure: its ``output`` is mapped as a success's."""
        self._end(execution, state, output, TaskStatus.SKIPPED, f"failed with tolerance: {message}")

    def _end(
        self,
        execution: _Execution,
        state: _TaskState,
        output: dict[str, Any] | None,
        status: TaskStatus,
        reason: str,
    ) -> None:
        state.output = output
        if isinstance(state.node, FunctionNode) and output:
            self._map(
                execution,
                state.node.output_mappings,
                self._context_of(execution, state),
                output=copy.deepcopy(output),
            )
        self._move(state, status, reason)
        self._advance(execution)

    def _map(
        self,
        execution: _Execution,
        rules: tuple[_mapping.Rule, ...],
        context: dict[str, Any],
        *,
        input: dict[str, Any] | None = None,
        output: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Apply ``rules`` (writing into ``context`` in place); the input they built."""
        input = {} if input is None else input

        def trigger_url(task_name: str) -> str:
            return f"{self.trigger_url}?execution_id={execution.id}&task_name={task_name}"

        _mapping.apply(
            rules, context=context, input=input, output=output or {}, trigger_url=trigger_url
        )
        return input

    @staticmethod
    def _context_of(execution: _Execution, state: _TaskState) -> dict[str, Any]:
        if state.route is None:
            return execution.context
        return execution.sub_contexts[state.route]

    def _input(self, execution: _Execution, state: _TaskState) -> dict[str, Any]:
        assert state.node is not None
        context = copy.deepcopy(self._context_of(execution, state))
        return self._map(execution, state.node.input_mappings, context)

    def _add_states(
        self, execution: _Execution, nodes: tuple[Node, ...], route: str | None
    ) -> None:
        def full(name: str) -> str:
            return name if route is None else f"{route}-{name}"

        before = {node.name: [full(n.name) for n in nodes if node.name in n.next] for node in nodes}
        for node in nodes:
            name = full(node.name)
            spec = replace(node.task, name=name) if isinstance(node, FunctionNode) else None
            execution.tasks[name] = _TaskState(name, spec, node, tuple(before[node.name]), route)

    def _advance(self, execution: _Execution) -> None:
        """The engine's traversal: start what is ready, finish foreach tasks that are done."""
        if execution.dag is None or self._closed:
            return
        moved = True
        while moved:
            moved = False
            for state in list(execution.tasks.values()):
                if state.status is TaskStatus.NOT_STARTED and all(
                    execution.tasks[name].done for name in state.after
                ):
                    if isinstance(state.node, ForeachNode):
                        self._expand(execution, state, state.node)
                    else:
                        self._move(state, TaskStatus.READY, "predecessors done")
                        self._spawn(execution.id, state.name, state.generation)
                    moved = True
                elif isinstance(state.node, ForeachNode) and state.status is TaskStatus.RUNNING:
                    moved = self._collect(execution, state, state.node) or moved

    def _expand(self, execution: _Execution, state: _TaskState, node: ForeachNode) -> None:
        """``ForeachTaskRunner.doRun``: one group of child tasks per element."""
        state.attempts += 1
        context = copy.deepcopy(execution.context)
        input = self._map(execution, node.input_mappings, context)
        collection = _mapping.get({"input": input}, node.collection)
        if collection is None or collection == []:
            state.message = "loop collection or subTasks empty"
            state.output = {"sub_context": []}
            self._move(state, TaskStatus.SUCCEED, state.message)
            return
        if not isinstance(collection, list):
            state.message = f"the collection is not a list: {collection!r}"
            self._move(state, TaskStatus.FAILED, state.message)
            return
        _mapping.delete({"input": input}, node.collection)
        for index, item in enumerate(collection):
            route = f"{state.name}_{index}"
            group = {**copy.deepcopy(input), node.item: item}
            if node.index is not None:
                group[node.index] = index
            execution.sub_contexts[route] = group
            self._add_states(execution, node.tasks, route)
        self._move(state, TaskStatus.RUNNING, f"{len(collection)} groups")

    def _collect(self, execution: _Execution, state: _TaskState, node: ForeachNode) -> bool:
        """``finishParentTask``: once no group runs, the foreach succeeds or fails."""
        routes = _routes(execution, state.name)
        children = [s for s in execution.tasks.values() if _parent(s) == state.name]
        failed = [s for s in children if s.status is TaskStatus.FAILED]
        # A group is done when all its tasks are, failed as soon as one of them failed.
        failed_routes = {s.route for s in failed}
        if any(not s.done and s.route not in failed_routes for s in children):
            return False
        if failed:
            state.message = failed[0].message
            self._move(state, TaskStatus.FAILED, f"group of {failed[0].name} failed")
            return True
        # The engine lists the groups in Java's hash order of their context fields.
        order = foreach_group_order(state.name, len(routes))
        groups = [execution.sub_contexts[f"{state.name}_{index}"] for index in order]
        output = {"sub_context": copy.deepcopy(groups)}
        state.output = output
        self._map(execution, node.output_mappings, execution.context, output=output)
        self._move(state, TaskStatus.SUCCEED, "all groups done")
        return True

    def _redo_dag(
        self, execution: _Execution, task_name: str, context: Mapping[str, Any] | None
    ) -> None:
        # DAGRunner.resetTask: the ancestor of a foreach child, reset with its successors.
        state = self._state(execution.id, task_name.split("_", maxsplit=1)[0])
        if state.status is not TaskStatus.NOT_STARTED:
            self._reset(execution, state)
        if context:
            execution.context.update(copy.deepcopy(dict(context)))
        self._advance(execution)

    def _reset(self, execution: _Execution, state: _TaskState) -> None:
        state.renew()
        state.output = state.message = None
        if state.status is not TaskStatus.NOT_STARTED:
            self._move(state, TaskStatus.NOT_STARTED, "redo")
        if isinstance(state.node, ForeachNode):
            for route in _routes(execution, state.name):
                del execution.sub_contexts[route]
            for child in [s for s in execution.tasks.values() if _parent(s) == state.name]:
                child.renew()
                del execution.tasks[child.name]
        assert state.node is not None
        for successor in state.node.next:
            self._reset(execution, execution.tasks[successor])


def _routes(execution: _Execution, foreach: str) -> list[str]:
    """The groups of a foreach, ``{foreach}_{index}``, in index order."""
    return [route for route in execution.sub_contexts if route.rsplit("_", 1)[0] == foreach]


def _parent(state: _TaskState) -> str | None:
    return None if state.route is None else state.route.rsplit("_", 1)[0]


def _view(execution_id: str, state: _TaskState) -> TaskView:
    return TaskView(
        execution_id=execution_id,
        name=state.name,
        status=state.status,
        output=None if state.output is None else copy.deepcopy(state.output),
        attempts=state.attempts,
        message=state.message,
        history=tuple(state.history),
    )


def _matches(record: DispatchRecord, execution_id: str | None, task_name: str | None) -> bool:
    return (execution_id is None or record.execution_id == execution_id) and (
        task_name is None or record.task_name == task_name
    )
