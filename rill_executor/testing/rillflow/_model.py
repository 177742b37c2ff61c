"""What the simulated engine knows: task definitions, task states and its records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal
from urllib.parse import urlsplit

from rill_executor import ConfigError

from ._policy import Retry

__all__ = [
    "CallbackRecord",
    "DagStatus",
    "DispatchRecord",
    "Pattern",
    "Task",
    "TaskStatus",
    "TaskView",
    "Transition",
]


class Pattern(StrEnum):
    """How the engine reads the executor's answer to a dispatch."""

    TASK_SYNC = "task_sync"
    TASK_ASYNC = "task_async"


class TaskStatus(StrEnum):
    """The engine's task states (the subset a function task goes through)."""

    NOT_STARTED = "NOT_STARTED"
    READY = "READY"
    RUNNING = "RUNNING"
    SUCCEED = "SUCCEED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"

    @property
    def is_final(self) -> bool:
        return self in {TaskStatus.SUCCEED, TaskStatus.FAILED, TaskStatus.SKIPPED}


class DagStatus(StrEnum):
    """An execution's state: finished once a task failed for good or every task succeeded."""

    RUNNING = "RUNNING"
    SUCCEED = "SUCCEED"
    FAILED = "FAILED"


@dataclass(frozen=True)
class Task:
    """One function task of a simulated DAG.

    ``input`` is the task's mapped input, sent as the dispatch body with the engine's
    conventions: a mapping under ``header``/``request_header_*`` becomes request headers,
    under ``query``/``query_params_*`` query parameters, under ``body``/``request_config_*``
    top-level body keys. ``timeout_in_seconds`` (the engine's ``timeline.timeoutInSeconds``)
    is only armed for ``task_async``. ``tolerance`` keeps the DAG running when this task fails.
    """

    name: str
    resource: str
    pattern: Pattern = Pattern.TASK_SYNC
    input: Mapping[str, Any] = field(default_factory=dict)
    retry: Retry = field(default_factory=Retry)
    timeout_in_seconds: float | None = None
    request_type: Literal["GET", "POST"] = "POST"
    tolerance: bool = False

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ConfigError(f"a task name must be non-empty and without '/', got {self.name!r}")
        parts = urlsplit(self.resource)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise ConfigError(
                f"task {self.name!r}: resource must be an http(s) URL, got {self.resource!r}"
            )
        object.__setattr__(self, "pattern", Pattern(self.pattern))
        if self.request_type not in {"GET", "POST"}:
            raise ConfigError(
                f"task {self.name!r}: request_type must be 'GET' or 'POST', "
                f"got {self.request_type!r}"
            )
        if self.timeout_in_seconds is not None:
            if self.pattern is not Pattern.TASK_ASYNC:
                raise ConfigError(
                    f"task {self.name!r}: the engine arms timeout_in_seconds only for "
                    "task_async; remove it or use pattern=Pattern.TASK_ASYNC"
                )
            if self.timeout_in_seconds <= 0:
                raise ConfigError(
                    f"task {self.name!r}: timeout_in_seconds must be > 0, "
                    f"got {self.timeout_in_seconds!r}"
                )


@dataclass(frozen=True)
class DispatchRecord:
    """One HTTP request the engine sent to an executor, and what came back.

    ``attempt`` counts the task's dispatches (retries and redos included); ``send`` is 1 for
    the first request of that dispatch and 2 for the engine's identical resend. Exactly one of
    ``status_code`` and ``error`` is set.
    """

    execution_id: str
    task_name: str
    attempt: int
    send: int
    method: str
    url: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: Mapping[str, Any] | None
    ts: int
    started_at: float
    elapsed: float
    status_code: int | None
    response_text: str | None
    error: str | None

    @property
    def ok(self) -> bool:
        """Whether the engine counted this request as answered (a 2xx)."""
        return self.status_code is not None and 200 <= self.status_code < 300


@dataclass(frozen=True)
class CallbackRecord:
    """One completion callback the engine received, and its answer.

    ``task_status`` is the task's state when the callback was judged (``None`` when the
    engine did not get that far, e.g. an unknown task or an oversized body). ``headers``
    are the request's, names in lower case (``traceparent``: who called back).
    """

    endpoint: str
    method: str
    query: Mapping[str, str]
    body_text: str
    status_code: int
    answer: Mapping[str, Any]
    task_status: TaskStatus | None
    received_at: float
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Transition:
    """A task entering ``status`` at ``at`` (epoch seconds), and why."""

    at: float
    status: TaskStatus
    reason: str


@dataclass(frozen=True)
class TaskView:
    """A snapshot of one task: state, output, attempt count and history.

    ``attempts`` is the engine's count, the one its retry policy reads: a dispatch adds one
    unless the run before it has not ended (a redo of a RUNNING task adds none).
    """

    execution_id: str
    name: str
    status: TaskStatus
    output: Mapping[str, Any] | None
    attempts: int
    message: str | None
    history: tuple[Transition, ...]
