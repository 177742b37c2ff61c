"""The simulator's one hook for the drill: an intercepted callback is answered by the hook,
recorded, and not applied."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from rill_executor.testing.rillflow import EngineSimulator, Task, TaskStatus
from rill_executor.testing.rillflow._callbacks import Answer


def test_an_intercepted_callback_is_recorded_and_not_applied() -> None:
    seen: list[Mapping[str, str]] = []

    def lose(query: Mapping[str, str]) -> Answer | None:
        seen.append(query)
        return Answer(502, {"drill": "lost"}) if len(seen) == 1 else None

    with EngineSimulator() as engine:
        execution = engine.submit(Task("t", "http://127.0.0.1:9/never"), dispatch=False)
        engine.intercept = lose
        query = {"execution_id": execution, "task_name": "t"}
        first = httpx.post(engine.trigger_url, params=query, json={"ok": 1})
        second = httpx.post(engine.trigger_url, params=query, json={"ok": 1})
        assert (first.status_code, first.json()) == (502, {"drill": "lost"})
        assert second.status_code == 500 and second.json()["error_code"] == 30601
        assert [c.answer.get("drill") for c in engine.callbacks()] == ["lost", None]
        assert engine.task(execution, "t").status is TaskStatus.NOT_STARTED
