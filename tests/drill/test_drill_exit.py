"""What fails a drill: its checks, and with ``--enforce-target`` a missed recovery target."""

from __future__ import annotations

from dataclasses import replace

from rill_executor.cli._drill import _failures
from rill_executor.testing.drill import Check, FaultKind, Injected, RecoveryTarget, summarise

from .records import RESULT, record


def _missed_kill() -> Injected:
    return Injected(at=0.0, offset=0.0, kind=FaultKind.KILL, target="e/t", affected=[("e", "t")])


def test_a_missed_target_fails_the_drill_only_when_enforced() -> None:
    rec = record(None, {"t": RESULT}, [])
    rec = replace(rec, faults=[replace(_missed_kill(), at=rec.started - 100)])
    result = summarise(rec, [Check(name="audit_clean", ok=True)], RecoveryTarget(1, 1))
    assert result.ok and result.missed == ("kill",)
    assert _failures(result, enforce_target=False) == []
    assert _failures(result, enforce_target=True) == ["the recovery target for kill"]
    failing = summarise(
        rec, [Check(name="audit_clean", ok=False, problems=("x",))], RecoveryTarget(1, 1)
    )
    assert _failures(failing, enforce_target=False) == ["audit_clean"]
