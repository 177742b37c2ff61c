"""A call that may hang, run so that hanging fails the test instead of the suite."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["ends_within"]


def ends_within(seconds: float, call: Callable[[], Any]) -> tuple[bool, Any]:
    """``call()`` in a daemon thread: whether it ended in time, and its result or exception."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive(), outcome[0] if outcome else None
