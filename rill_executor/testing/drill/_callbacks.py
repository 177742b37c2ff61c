"""The engine-side callback faults: the next callback of an armed task is lost or refused.

Installed as the simulator's ``intercept`` hook. A lost callback is answered 502 with no
engine body (a gateway that dropped it); a refused one 500/30101 (the engine's task lock not
obtained: retry later). Neither is applied; both are recorded with ``"drill"`` in the answer
so the checks can tell them from the engine's own answers.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from ..rillflow._callbacks import Answer, error_answer

__all__ = ["CallbackFaults"]

INTERNAL = 30101


class CallbackFaults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: dict[tuple[str, str], str] = {}
        self.fired: list[tuple[str, str, str]] = []

    def arm(self, execution_id: str, task_name: str, how: str) -> None:
        """``how``: "lost" or "refused", for the next callback of that task."""
        with self._lock:
            self._armed[(execution_id, task_name)] = how

    def disarm(self) -> None:
        with self._lock:
            self._armed.clear()

    def __call__(self, query: Mapping[str, str]) -> Answer | None:
        task = (query.get("execution_id", ""), query.get("task_name", ""))
        with self._lock:
            how = self._armed.pop(task, None)
            if how is None:
                return None
            self.fired.append((*task, how))
        if how == "lost":
            return Answer(502, {"drill": "lost"})
        refused = error_answer(500, INTERNAL, "internal server error")
        return Answer(refused.status_code, {**refused.body, "drill": "refused"})
