"""The drill's report: per fault kind, how many were injected, how long the tasks they hit
took to SUCCEED again (p50, p99, max), and what share of them did; with the checks. Every kind of
the drill's menu has its line, 0 injected when it was never drawn.

A fault's recovery time, for each task it hit, runs from the fault to the task's first
SUCCEED after it: in the engine's task history, or a success callback the engine applied
(a later redo of a foreach, or of a task upstream of one, makes the engine's sub tasks
anew, and their history with them). A task that never got there counts against the success
rate. A fault that hit no task counts as injected only. Each kind is judged against the
drill's ``RecoveryTarget``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from pydantic import BaseModel, ConfigDict

from ..rillflow import TaskStatus
from ._checks import Check, applied_success, counted, task_of
from ._record import DrillRecord
from ._schedule import FaultKind
from ._target import RecoveryTarget

__all__ = ["DrillResult", "FaultStats", "FaultView", "summarise"]


class FaultStats(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str
    injected: int
    skipped: int  # planned, but nothing to hit (no running task, no network link)
    hits: int  # tasks hit, all faults of the kind together
    recovered: int  # of those, tasks that reached SUCCEED after the fault
    p50: float | None  # recovery seconds
    p99: float | None
    max: float | None
    target_met: bool | None = None  # None: no task hit, nothing to judge

    @property
    def success_rate(self) -> float | None:
        return None if self.hits == 0 else self.recovered / self.hits


class FaultView(BaseModel):
    model_config = ConfigDict(frozen=True)

    offset: float
    kind: str
    target: str
    until: float | None  # seconds from the start
    affected: int
    recovery: float | None  # the slowest recovery among the tasks it hit
    skipped: str | None


class DrillResult(BaseModel):
    """Everything a drill reports: ``ok`` when every check holds."""

    model_config = ConfigDict(frozen=True)

    seed: int
    processes: int
    duration: float  # seconds of injection
    settled: float  # seconds from the end of injection to quiescence
    executions: int
    tasks: int
    dispatches: int
    callbacks: int
    repeated_callbacks: int  # a dispatch's callback sent again after one got its answer
    stats: tuple[FaultStats, ...]
    faults: tuple[FaultView, ...]
    checks: tuple[Check, ...]
    target: str = ""  # the recovery target, in words
    target_p99: float | None = None  # its bound on each kind's p99, seconds

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def missed(self) -> tuple[str, ...]:
        """The fault kinds whose recovery missed the target."""
        return tuple(s.kind for s in self.stats if s.target_met is False)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 3)


def _successes(rec: DrillRecord) -> dict[tuple[str, str], list[float]]:
    """When each task entered SUCCEED: its history, and the success callbacks the engine
    applied (the only record left of a sub task a redo made anew)."""
    found: dict[tuple[str, str], list[float]] = defaultdict(list)
    for task, view in rec.tasks.items():
        found[task] += [t.at for t in view.history if t.status is TaskStatus.SUCCEED]
    for cb in rec.callbacks:
        if applied_success(cb):
            found[task_of(cb)].append(cb.received_at)
    return found


def _succeeded_after(
    done: dict[tuple[str, str], list[float]], task: tuple[str, str], at: float
) -> float | None:
    after = [t for t in done.get(task, ()) if t >= at]
    return min(after) - at if after else None


def summarise(
    rec: DrillRecord, checks: list[Check], target: RecoveryTarget | None = None
) -> DrillResult:
    """The drill's report from its record and its ``checks``: per fault kind, how many were
    injected, hit tasks and recovered, with the recovery times and whether they met
    ``target`` (the record's by default); then the checks."""
    target = target or rec.target
    done = _successes(rec)
    times: dict[FaultKind, list[float]] = defaultdict(list)
    counts: dict[FaultKind, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    views = []
    for fault in rec.faults:
        c = counts[fault.kind]
        c[0] += 1
        c[1] += fault.skipped is not None
        slowest: float | None = None
        for task in fault.affected:
            c[2] += 1
            took = _succeeded_after(done, task, fault.at)
            if took is not None:
                c[3] += 1
                times[fault.kind].append(took)
                slowest = max(slowest or 0.0, took)
        views.append(
            FaultView(
                offset=fault.offset,
                kind=fault.kind.value,
                target=fault.target,
                until=None if fault.until is None else round(fault.until - rec.started, 3),
                affected=len(fault.affected),
                recovery=None if slowest is None else round(slowest, 3),
                skipped=fault.skipped,
            )
        )
    stats = tuple(
        _stats(kind, counts[kind], times[kind], target)
        for kind in FaultKind
        if kind in counts or kind in rec.menu
    )
    answered = Counter(
        (*task_of(cb), cb.query.get("ts", "")) for cb in rec.callbacks if counted(cb)
    )
    return DrillResult(
        seed=rec.seed,
        processes=rec.processes,
        duration=round(rec.ended - rec.started, 3),
        settled=round(rec.quiet - rec.ended, 3),
        executions=len({w.execution_id for w in rec.watched}),
        tasks=len(rec.watched),
        dispatches=len(rec.dispatches),
        callbacks=len(rec.callbacks),
        repeated_callbacks=sum(n - 1 for n in answered.values() if n > 1),
        stats=stats,
        faults=tuple(views),
        checks=tuple(checks),
        target=target.describe(),
        target_p99=target.p99,
    )


def _stats(kind: FaultKind, c: list[int], times: list[float], target: RecoveryTarget) -> FaultStats:
    p99, most = _percentile(times, 0.99), _percentile(times, 1.0)
    return FaultStats(
        kind=kind.value,
        injected=c[0],
        skipped=c[1],
        hits=c[2],
        recovered=c[3],
        p50=_percentile(times, 0.5),
        p99=p99,
        max=most,
        target_met=target.met(c[2], c[3], p99, most),
    )
