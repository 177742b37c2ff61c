"""The drill's report and plan: every kind of the menu has its line, drawn or not, and a
short drill can draw each kind once."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rill_executor import UsageError
from rill_executor.testing.drill import DrillConfig, FaultKind, Injected, plan, summarise

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
