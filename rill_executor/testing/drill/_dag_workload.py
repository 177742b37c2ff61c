"""A workload of whole workflows: executions of a Rill Flow DAG descriptor.

``DagWorkload`` submits the descriptor (``Dag.load``, dispatching to the drill's front) with
a context per execution, and watches each function task once the engine has dispatched it,
foreach shards included: ``keys`` says, from a task's name and the input it was sent, under
which business key (and handler) the executor keeps its job, and how many output objects
that job commits; a task it returns None for is not watched.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..rillflow import Dag, DagStatus, EngineSimulator
from ..rillflow._dag import ForeachNode, FunctionNode, Node
from ._workload import Watched

__all__ = ["DagWorkload", "TaskKey"]


@dataclass(frozen=True)
class TaskKey:
    """Where a task's job is kept, and how many output objects it commits (None: any)."""

    key: str
    handler: str | None = None
    outputs: int | None = None


@dataclass
class DagWorkload:
    """Executions of ``descriptor`` with ``context(serial)`` each; ``keys(task, input)``
    names each function task's job (``task`` is the function task's own name: a foreach
    shard ``{foreach}_{i}-{task}`` is given as ``task``)."""

    descriptor: str | os.PathLike[str]
    context: Callable[[int], Mapping[str, Any]]
    keys: Callable[[str, Mapping[str, Any]], TaskKey | None]
    namespace: str
    outputs_per_key: int | None = None
    _executions: list[str] = field(default_factory=list)
    _seen: set[tuple[str, str]] = field(default_factory=set)

    def submit(
        self, engine: EngineSimulator, executor_url: str, serial: int, timeout: float | None
    ) -> list[Watched]:
        dag = Dag.load(self.descriptor, base_url=executor_url)
        if timeout is not None:  # every async task's timeline that short: the engine gives up
            dag = dataclasses.replace(dag, tasks=tuple(_timed(n, timeout) for n in dag.tasks))
        self._executions.append(engine.submit_dag(dag, self.context(serial)))
        return self.discover(engine)

    def discover(self, engine: EngineSimulator) -> list[Watched]:
        """The function tasks dispatched since the last call, to watch from now on."""
        found = []
        for execution_id in self._executions:
            for name in engine.tasks(execution_id):
                sent = engine.dispatches(execution_id, name)
                if (execution_id, name) in self._seen or not sent:
                    continue
                task = name.split("-", 1)[1] if "_" in name else name  # a shard: its own name
                where = self.keys(task, sent[0].body or {})
                self._seen.add((execution_id, name))
                if where is not None:
                    found.append(
                        Watched(execution_id, name, where.key, where.handler, where.outputs)
                    )
        return found

    def settled(self, engine: EngineSimulator) -> bool:
        return all(engine.execution_status(e) is not DagStatus.RUNNING for e in self._executions)


def _timed(node: Node, timeout: float) -> Node:
    if isinstance(node, ForeachNode):
        return dataclasses.replace(node, tasks=tuple(_timed_task(t, timeout) for t in node.tasks))
    return _timed_task(node, timeout)


def _timed_task(node: FunctionNode, timeout: float) -> FunctionNode:
    return dataclasses.replace(
        node, task=dataclasses.replace(node.task, timeout_in_seconds=timeout)
    )
