"""The audit's reading of the outbox: lapse notices are no outcome, and a redone task is
owed the outcome once more at its new dispatch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from rill_executor._namespace_audit import examine
from rill_executor._records import JobStatus

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _notice(id: str, watch: str, target: Any, fence: int, state: str) -> dict[str, Any]:
    return {
        "id": id,
        "watch": watch,
        "target": target,
        "fence": fence,
        "state": state,
        "error": None,
        "status": "delivered",
        "attempts": 1,
        "due": T0,
        "outcome": "ok",
        "detail": None,
        "created_at": T0,
        "settled_at": T0,
    }


def _attempt(fence: int, outcome: str) -> dict[str, Any]:
    return {
        "attempt_id": f"a{fence}",
        "fence": fence,
        "started_at": T0 + timedelta(seconds=fence),
        "ended_at": T0 + timedelta(seconds=fence + 1),
        "outcome": outcome,
        "error": None,
    }


def _status(notices: list[dict[str, Any]]) -> JobStatus:
    return JobStatus.model_validate(
        {
            "namespace": "ns",
            "key": "k",
            "state": "succeeded",
            "fence": 2,
            "result_version": None,
            "fingerprint": "f",
            "owner": None,
            "result": {"ok": 1},
            "error": None,
            "created_at": T0,
            "updated_at": T0,
            "finished_at": T0,
            "retain_until": None,
            "store_time": T0,
            "attempts": [_attempt(1, "expired"), _attempt(2, "succeeded")],
            "notices": notices,
        }
    )


def test_a_lapse_notice_and_a_redone_task_notified_again_break_nothing() -> None:
    status = _status(
        [
            _notice("1.1", "", None, 1, "processing"),  # the owner of fence 1 lapsed
            _notice("2.2", "e/t", "http://engine/cb?ts=1", 2, "succeeded"),
            _notice("2.3", "e/t", "http://engine/cb?ts=2", 2, "succeeded"),  # after a redo
        ]
    )
    assert examine(status, timedelta(days=1)) == []


def test_one_outcome_delivered_twice_to_the_same_dispatch_is_reported() -> None:
    twice = [_notice(f"2.{i}", "e/t", "http://engine/cb?ts=1", 2, "succeeded") for i in (2, 3)]
    found = examine(_status(twice), timedelta(days=1))
    assert [f.invariant for f in found] == ["delivered_once"]
