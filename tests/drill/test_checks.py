"""Each store check of the drill fails when its guarantee breaks: records written by hand
to a real SQLite store, with an engine record to match."""

from __future__ import annotations

import json
import time
from pathlib import Path

from rill_executor import Claim, Ledger
from rill_executor.testing.drill import DrillRecord, FaultKind, Injected, Watched, check
from rill_executor.testing.rillflow import CallbackRecord, TaskStatus, TaskView, Transition

RESULT = {"uri": "s3://segments/A/1.mp4", "frames": 250}


def _view(name: str, output: dict[str, object]) -> TaskView:
    now = time.time()
    history = (
        Transition(now, TaskStatus.RUNNING, "dispatch 1"),
        Transition(now, TaskStatus.SUCCEED, "ok"),
    )
    return TaskView("e", name, TaskStatus.SUCCEED, output, 1, None, history)


def _callback(name: str, body: dict[str, object]) -> CallbackRecord:
    return CallbackRecord(
        endpoint="trigger.json",
        method="POST",
        query={"execution_id": "e", "task_name": name, "ts": "1"},
        body_text=json.dumps(body),
        status_code=200,
        answer={"result": "ok"},
        task_status=TaskStatus.RUNNING,
        received_at=time.time(),
    )


def _record(
    store: str, outputs: dict[str, dict[str, object]], faults: list[Injected]
) -> DrillRecord:
    now = time.time()
    return DrillRecord(
        seed=1,
        started=now - 10,
        ended=now,
        quiet=now,
        quiescent=True,
        processes=1,
        store=store,
        watched=[Watched("e", name, name) for name in outputs],
        faults=faults,
        tasks={("e", name): _view(name, body) for name, body in outputs.items()},
        dispatches=[],
        callbacks=[_callback(name, body) for name, body in outputs.items()],
    )


def _failed(store: str, record: DrillRecord) -> set[str]:
    return {c.name for c in check(record, namespace="segments") if not c.ok}


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
    assert _failed(store, _record(store, {"good": RESULT}, [])) == set()
    wrong = {"uri": "s3://segments/A/1-again.mp4", "frames": 250}
    assert _failed(store, _record(store, {"other": wrong}, [])) == {
        "committed_result",
        "no_stale_callback",
    }
    assert _failed(store, _record(store, {"rerun": RESULT}, [])) == {"executions_explained"}
    now = time.time()
    kill = Injected(at=now - 10, offset=0.0, kind=FaultKind.KILL, target="executor 0", until=now)
    assert _failed(store, _record(store, {"rerun": RESULT}, [kill])) == set()
    assert "no_dangling_job" in _failed(store, _record(store, {"left": RESULT}, []))
