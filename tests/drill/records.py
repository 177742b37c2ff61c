"""Engine records to check a store against: tasks that SUCCEEDed with the given outputs,
each applied by one callback."""

from __future__ import annotations

import json
import time

from rill_executor.testing.drill import DrillRecord, Injected, Watched
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


def record(
    store: str | None, outputs: dict[str, dict[str, object]], faults: list[Injected]
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
