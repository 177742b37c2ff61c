"""The drill's report and plan: every kind of the menu has its line, drawn or not, and a
short drill can draw each kind once."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rill_executor import UsageError
from rill_executor.rillflow import NOTICE_LEASE
from rill_executor.testing.drill import (
    DrillConfig,
    DrillRecord,
    FaultKind,
    Injected,
    RecoveryTarget,
    plan,
    summarise,
)
from rill_executor.testing.rillflow import TaskStatus, Transition

from .records import RESULT, record

MENU = tuple(FaultKind)[:10]


def test_the_report_lists_every_kind_of_the_menu_even_those_never_drawn() -> None:
    kill = Injected(at=0.0, offset=1.0, kind=FaultKind.KILL, target="executor 0")
    rec = replace(record(None, {"t": RESULT}, [kill]), menu=MENU)
    stats = {s.kind: s for s in summarise(rec, []).stats}
    assert list(stats) == [k.value for k in MENU]
    assert stats["kill"].injected == 1
    assert all(s.injected == 0 for kind, s in stats.items() if kind != "kill")


def test_a_short_random_drill_draws_few_kinds_and_each_kind_draws_them_all_first() -> None:
    kinds = list(MENU)
    drawn = {f.kind for f in plan(1, kinds, 3.0, 30.0, settle=1.0)}
    assert len(drawn) < len(kinds)  # what a reader of a menu of 10 would not expect
    each = plan(1, kinds, 3.0, 30.0, settle=1.0, each_kind=True)
    assert sorted(f.kind for f in each[: len(kinds)]) == sorted(kinds)
    assert each == plan(1, kinds, 3.0, 30.0, settle=1.0, each_kind=True)  # seeded
    assert [f.at for f in each] == [f.at for f in plan(1, kinds, 3.0, 30.0, settle=1.0)]


def test_each_kind_in_too_short_a_drill_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="11 kinds do not fit in 5 s"):
        DrillConfig(command="x {port}", duration=5, every=10, each_kind=True)


def _hit(kind: FaultKind, at: float, task: str) -> Injected:
    return Injected(at=at, offset=at, kind=kind, target=f"e/{task}", affected=[("e", task)])


def _succeeding(rec: DrillRecord, task: str, at: float) -> None:
    """The task's history says it entered SUCCEED at ``at``."""
    view = rec.tasks[("e", task)]
    history = (*view.history, Transition(at, TaskStatus.SUCCEED, "ok"))
    rec.tasks[("e", task)] = replace(view, history=history)


def test_each_kind_is_judged_against_the_recovery_target() -> None:
    names = [f"t{n}" for n in range(102)]
    rec = record(None, dict.fromkeys(names, RESULT), [])
    start = rec.started
    rec = replace(rec, tasks={k: replace(v, history=()) for k, v in rec.tasks.items()})
    rec.callbacks.clear()
    faults = [_hit(FaultKind.KILL, start, "t0"), _hit(FaultKind.STOP, start, "t1")]
    _succeeding(rec, "t0", start + 21.0)  # within 15 + 5 + 2
    _succeeding(rec, "t1", start + 23.0)  # beyond it
    for n, name in enumerate(names[2:]):  # 100 redos: p99 1 s, and one of 10 s, over 2 x p99
        faults.append(_hit(FaultKind.REDO, start, name))
        _succeeding(rec, name, start + (10.0 if n == 0 else 1.0))
    faults.append(_hit(FaultKind.DUP, start, "t0"))  # recovered in time, but
    faults.append(_hit(FaultKind.DUP, start, "never"))  # a task that never got there
    rec.tasks[("e", "never")] = replace(rec.tasks[("e", "t0")], history=())
    rec = replace(rec, faults=faults, menu=MENU, target=RecoveryTarget(15.0, 5.0))
    result = summarise(rec, [])
    met = {s.kind: s.target_met for s in result.stats}
    assert (met["kill"], met["stop"], met["redo"], met["dup"]) == (True, False, False, False)
    assert met["timeout"] is None  # nothing hit, nothing to judge
    assert result.missed == ("stop", "dup", "redo")
    assert result.target_p99 == 22.0
    assert "p99 <= 22 s (lease 15 + engine retry 5 + 2)" in result.target
    again = summarise(rec, [], RecoveryTarget(20.0, 5.0))  # a target given overrides the record's
    assert {s.kind: s.target_met for s in again.stats}["stop"] is True


def test_a_drills_target_takes_the_longer_of_its_two_leases() -> None:
    config = DrillConfig(command="x {port}", lease=3.0)
    assert config.target() == RecoveryTarget(NOTICE_LEASE, 5.0)
    assert DrillConfig(command="x {port}", lease=40.0, engine_retry=2).target().p99 == 44.0


def test_a_success_a_later_redo_erased_from_the_history_still_counts() -> None:
    # The engine makes a foreach's sub tasks anew when a later redo resets it: the first
    # SUCCEED after a fault is then only in the callbacks the engine applied.
    rec = record(None, {"t": RESULT}, [])
    redo = _hit(FaultKind.REDO, rec.started + 1.0, "t")
    later = rec.started + 19.0
    rec.tasks[("e", "t")] = replace(
        rec.tasks[("e", "t")],
        history=(
            Transition(later, TaskStatus.RUNNING, "dispatch 1"),
            Transition(later + 0.2, TaskStatus.SUCCEED, "trigger.json success"),
        ),
    )
    (callback,) = rec.callbacks
    applied = replace(callback, received_at=rec.started + 1.3)
    refused = replace(callback, received_at=rec.started + 1.1, status_code=500, answer={})
    failed = replace(
        applied, received_at=rec.started + 1.2, query={**callback.query, "status": "FAILED"}
    )
    rec = replace(rec, faults=[redo], callbacks=[refused, failed, applied])
    (stats,) = [s for s in summarise(rec, []).stats if s.kind == "redo"]
    assert stats.max == pytest.approx(0.3, abs=1e-3)
