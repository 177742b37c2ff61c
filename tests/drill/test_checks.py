"""Each store check of the drill fails when its guarantee breaks: records written by hand
to a real SQLite store, with an engine record to match."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rill_executor import Claim, Ledger
from rill_executor.testing.drill import DrillRecord, FaultKind, Injected, check, summarise
from tests.clocks import STORE_CLOCK

from .records import RESULT, record


def _failed(store: str, record: DrillRecord) -> set[str]:
    return {c.name for c in check(record, namespace="segments") if not c.ok}


@pytest.mark.real_clock(STORE_CLOCK)
def test_each_store_check_fails_on_the_record_that_breaks_it(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'jobs.db'}"
    with Ledger(store, namespace="segments") as ledger:
        good = ledger.claim("good")
        assert isinstance(good, Claim)
        good.commit(RESULT)
        other = ledger.claim("other")
        assert isinstance(other, Claim)
        other.commit(RESULT)
        # Two attempts: the first ran out of lease and was taken over, with no fault.
        first = ledger.claim("rerun", lease=0.05)
        assert isinstance(first, Claim)
        time.sleep(0.1)
        second = ledger.claim("rerun")
        assert isinstance(second, Claim)
        second.commit(RESULT)
        left = ledger.claim("left", lease=0.05)
        assert isinstance(left, Claim)
    assert _failed(store, record(store, {"good": RESULT}, [])) == set()
    wrong = {"uri": "s3://segments/A/1-again.mp4", "frames": 250}
    assert _failed(store, record(store, {"other": wrong}, [])) == {
        "committed_result",
        "no_stale_callback",
    }
    assert _failed(store, record(store, {"rerun": RESULT}, [])) == {"executions_explained"}
    now = time.time()
    kill = Injected(at=now - 10, offset=0.0, kind=FaultKind.KILL, target="executor 0", until=now)
    assert _failed(store, record(store, {"rerun": RESULT}, [kill])) == set()
    assert "no_dangling_job" in _failed(store, record(store, {"left": RESULT}, []))


def test_one_dispatch_told_two_results_is_notified_twice_and_a_resent_result_is_not() -> None:
    drilled = record(None, {"seg": RESULT}, [])
    duplicate = replace(
        drilled.callbacks[0],
        status_code=500,
        answer={"error_code": 30601, "error": "repeated finish task seg"},
    )
    other = replace(duplicate, body_text=json.dumps({"uri": "s3://segments/A/1-b.mp4"}))
    resent = replace(drilled, callbacks=[*drilled.callbacks, duplicate])
    doubled = replace(drilled, callbacks=[*drilled.callbacks, other])
    assert {c.name for c in check(resent, namespace="segments") if not c.ok} == set()
    assert summarise(resent, []).repeated_callbacks == 1
    assert {c.name for c in check(doubled, namespace="segments") if not c.ok} == {"notified_once"}


def test_a_failure_the_engine_retried_is_no_result_when_an_attempt_recorded_it(
    tmp_path: Path,
) -> None:
    """A retryable failure told to the engine (status=FAILED) and then a success: the engine
    applied both, but only the success is the key's result. The failure must be one an
    attempt of the key recorded; an invented one is a stale callback."""
    store = f"sqlite:///{tmp_path / 'jobs.db'}"
    outage = "the store did not answer the register_output"
    with Ledger(store, namespace="segments") as ledger:
        first = ledger.claim("flaky")
        assert isinstance(first, Claim)
        first.fail(RuntimeError(outage), retryable=True)
        second = ledger.claim("flaky")
        assert isinstance(second, Claim)
        second.commit(RESULT)
    drilled = record(store, {"flaky": RESULT}, [])
    told = replace(
        drilled.callbacks[0],
        query={**drilled.callbacks[0].query, "ts": "0", "status": "FAILED"},  # the try before
        body_text=json.dumps({"error_code": "RuntimeError", "error_msg": outage}),
    )
    retried = replace(drilled, callbacks=[told, *drilled.callbacks])
    invented = replace(told, body_text=json.dumps({"error_code": "X", "error_msg": "never"}))
    made_up = replace(drilled, callbacks=[invented, *drilled.callbacks])
    assert _failed(store, retried) - {"executions_explained"} == set()
    assert _failed(store, made_up) - {"executions_explained"} == {"no_stale_callback"}
