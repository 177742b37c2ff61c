"""What a drill leaves behind to be checked: the faults it injected and what it watched."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..rillflow import CallbackRecord, DispatchRecord, TaskView
from ._schedule import FaultKind
from ._target import RecoveryTarget
from ._workload import Watched

__all__ = ["DrillRecord", "Injected"]


@dataclass
class Injected:
    """One fault as it was injected: when, on what, until when, and the tasks it hit."""

    at: float  # epoch seconds
    offset: float  # seconds from the drill's start
    kind: FaultKind
    target: str  # "executor 1", "store link of executor 0", "store", or "{execution}/{task}"
    until: float | None = None  # end of its window (a restart, a SIGCONT, a healed link)
    affected: list[tuple[str, str]] = field(default_factory=list)  # (execution id, task)
    skipped: str | None = None  # why nothing was hit (no running task, no store link)

    def window(self) -> tuple[float, float]:
        return self.at, self.until if self.until is not None else self.at


@dataclass
class DrillRecord:
    """The engine's records and the drill's own, at the end of a drill."""

    seed: int
    started: float
    ended: float  # when injection stopped
    quiet: float  # when it was found quiescent (or gave up waiting)
    quiescent: bool
    processes: int
    store: str | None
    watched: list[Watched]
    faults: list[Injected]
    tasks: dict[tuple[str, str], TaskView]
    dispatches: list[DispatchRecord]
    callbacks: list[CallbackRecord]
    menu: tuple[FaultKind, ...] = ()  # the kinds it could draw: reported even when never drawn
    target: RecoveryTarget = field(default_factory=RecoveryTarget)  # what recovery should take
