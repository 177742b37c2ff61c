"""What the drill runs through the engine: a ``Workload`` submits executions and names the
tasks to watch, each with the business key its executor stores it under.

``SegmentWorkload`` drives a segment executor such as ``examples/rillflow_executor``: each
execution is a few independent ``task_async`` tasks on one resource, with the input
``{"video", "segment", "profile", "seconds"}`` and the key ``{video}:{segment}:{profile}``.
A workload of whole DAGs plugs in the same way: submit, and list the tasks to watch.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from ..rillflow import EngineSimulator, Pattern, Retry, Task
from ..rillflow._engine import POLL_SECONDS

__all__ = ["SegmentWorkload", "Watched", "Workload"]


@dataclass(frozen=True)
class Watched:
    """A task the drill watches, and where its executor keeps its job."""

    execution_id: str
    task_name: str
    key: str  # the business key in the store
    handler: str | None = None  # the handler's name, when the store keys jobs by handler
    outputs: int | None = None  # the output objects its job commits (None: the workload's)


class Workload(Protocol):
    """Submits executions to the engine and says what to watch."""

    @property
    def namespace(self) -> str:
        """The store namespace the executor keeps these jobs in."""
        ...

    @property
    def outputs_per_key(self) -> int | None:
        """How many committed output objects each key must have (None: not checked)."""
        ...

    def submit(
        self, engine: EngineSimulator, executor_url: str, serial: int, timeout: float | None
    ) -> list[Watched]:
        """Submit execution number ``serial`` (0, 1, …) dispatching to ``executor_url``;
        with ``timeout``, its tasks' timeline is that short and their work longer."""
        ...

    def discover(self, engine: EngineSimulator) -> list[Watched]:
        """Tasks to watch that appeared since (a workflow's later tasks, foreach shards)."""
        ...

    def settled(self, engine: EngineSimulator) -> bool:
        """Whether the engine is done with every execution submitted (a workflow's tasks
        may still be waiting for their predecessors while every watched one is final)."""
        ...


@dataclass(frozen=True)
class SegmentWorkload:
    """Executions of ``segments`` segment tasks each, work of ``min_seconds``..``max_seconds``
    (drawn from ``seed``); the videos are named ``{run}-v{serial}``, ``run`` random unless
    given, so two drills on one store never share a key. With ``fail_every``, every n-th
    task's input carries ``"fail": "once"``: an executor that honours it fails that
    segment's first run, as a flaky encoder would (the example executor ignores it)."""

    seed: int = 1
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:8])  # keeps runs' keys apart
    path: str = "/segments"
    segments: int = 3
    min_seconds: float = 0.2
    max_seconds: float = 2.0
    profile: str = "h264-v2"
    namespace: str = "segments"
    handler: str | None = "segment"
    outputs_per_key: int | None = None
    fail_every: int | None = None  # every n-th task asks for a transient failure (fail: once)
    retry: Retry = field(default_factory=lambda: Retry(max_retry_times=8, interval_in_seconds=1.0))

    def submit(
        self, engine: EngineSimulator, executor_url: str, serial: int, timeout: float | None
    ) -> list[Watched]:
        rng = random.Random(self.seed * 1_000_003 + serial)
        video = f"{self.run}-v{serial}"
        tasks = []
        for segment in range(self.segments):
            seconds = round(rng.uniform(self.min_seconds, self.max_seconds), 3)
            if timeout is not None:  # outlasts the timeout, which fires at the engine's poll
                seconds = max(seconds, timeout + POLL_SECONDS + 1.0)
            body: dict[str, object] = {
                "video": video,
                "segment": segment,
                "profile": self.profile,
                "seconds": seconds,
            }
            if self.fail_every and (serial * self.segments + segment) % self.fail_every == 0:
                body["fail"] = "once"
            tasks.append(
                Task(
                    f"segment{segment}",
                    f"{executor_url}{self.path}",
                    pattern=Pattern.TASK_ASYNC,
                    input=body,
                    retry=self.retry,
                    timeout_in_seconds=timeout,
                )
            )
        execution_id = engine.submit(*tasks, dag="drill")
        return [
            Watched(
                execution_id, t.name, f"{video}:{t.input['segment']}:{self.profile}", self.handler
            )
            for t in tasks
        ]

    def discover(self, engine: EngineSimulator) -> list[Watched]:
        return []  # every task is known at submit

    def settled(self, engine: EngineSimulator) -> bool:
        return True
