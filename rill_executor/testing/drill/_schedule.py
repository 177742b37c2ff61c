"""The fault menu and the seeded schedule: the same seed, menu, rate and duration always
give the same faults at the same offsets.

A planned fault fixes everything random about it in advance: when (seconds from the start),
what, ``pick`` (a number in [0, 1) that chooses the process or task it hits among those
there are at that moment) and ``hold`` (how long a stop, a black hole or added latency
lasts, or the latency itself). With ``each_kind``, the first faults are every kind of the
menu once, in a seeded order, so that a short drill exercises all of it; then the kinds are
drawn at random (the times, picks and holds are those of the same plan without it).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from enum import StrEnum

from rill_executor import UsageError

__all__ = ["FaultKind", "PlannedFault", "parse_rate", "plan"]


class FaultKind(StrEnum):
    """What the drill can do to the executors, their store link, the store and the engine."""

    KILL = "kill"  # SIGKILL an executor process, then start it again
    STOP = "stop"  # SIGSTOP an executor process, SIGCONT it after ``hold``
    RESET = "reset"  # reset every connection of one executor's store link
    BLACKHOLE = "blackhole"  # one executor's store link forwards nothing for ``hold``
    LATENCY = "latency"  # one executor's store link adds latency for a while
    DUP = "dup"  # a concurrent second dispatch of a running task (the engine's redo)
    REDO = "redo"  # redo of a finished task
    TIMEOUT = "timeout"  # a task whose timeline runs out while its work still runs
    LOST_CALLBACK = "lost-callback"  # the next callback of a running task never arrives
    REFUSED_CALLBACK = "refused-callback"  # the engine answers the next one 500 (retry later)
    STORE_RESTART = "store-restart"  # restart the store, when the drill owns it

    @property
    def on_process(self) -> bool:
        return self in {FaultKind.KILL, FaultKind.STOP}

    @property
    def on_store_link(self) -> bool:
        return self in {FaultKind.RESET, FaultKind.BLACKHOLE, FaultKind.LATENCY}

    @property
    def on_task(self) -> bool:
        return self in {
            FaultKind.DUP,
            FaultKind.REDO,
            FaultKind.TIMEOUT,
            FaultKind.LOST_CALLBACK,
            FaultKind.REFUSED_CALLBACK,
        }


@dataclass(frozen=True)
class PlannedFault:
    at: float  # seconds from the drill's start
    kind: FaultKind
    pick: float  # in [0, 1): chooses the target among those there are when it fires
    hold: float  # seconds a stop / black hole / latency lasts


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)?\s*(ms|s|m|min)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, None: 1.0}


def parse_rate(text: str) -> float:
    """``"1/5s"`` (one fault every 5 s), ``"2/1m"``, ``"3/s"``: the mean seconds between faults."""
    match = _RATE.match(text)
    if match is None:
        raise UsageError(f"a fault rate looks like 1/5s or 2/1m, got {text!r}")
    count = float(match.group(1))
    span = float(match.group(2) or 1) * _UNIT[match.group(3)]
    if count <= 0 or span <= 0:
        raise UsageError(f"a fault rate must be positive, got {text!r}")
    return span / count


def plan(
    seed: int,
    kinds: list[FaultKind],
    every: float,
    duration: float,
    *,
    settle: float = 0.0,
    each_kind: bool = False,
) -> list[PlannedFault]:
    """The faults of a drill: exponentially spaced with mean ``every`` seconds, from
    ``settle`` until ``duration``, each of a kind drawn evenly from ``kinds`` (with
    ``each_kind``, every kind once first, in a seeded order)."""
    if not kinds:
        return []
    rng = random.Random(seed)
    first = list(dict.fromkeys(kinds)) if each_kind else []
    random.Random(f"{seed} each kind").shuffle(first)  # the other draws stay as they were
    faults: list[PlannedFault] = []
    at = settle
    while True:
        at += rng.expovariate(1.0 / every)
        if at >= duration:
            return faults
        kind = kinds[rng.randrange(len(kinds))]
        kind = first.pop(0) if first else kind
        faults.append(PlannedFault(round(at, 3), kind, rng.random(), round(rng.uniform(0.5, 4), 3)))
