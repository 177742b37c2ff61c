"""Driving an I/O-free flow: a generator that yields actions, is sent each action's answer
(or has its error raised at the ``yield``), and returns its result. The ledger's steps and a
store adapter's flows are driven by these two, a sync and an async ``perform``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["drive", "drive_async"]

A = TypeVar("A")
T = TypeVar("T")


def drive(flow: Generator[A, Any, T], perform: Callable[[A], Any]) -> T:
    """Run ``flow`` to its answer, performing each action it yields."""
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            action = flow.send(reply) if error is None else flow.throw(error)
        except StopIteration as done:
            answer: T = done.value
            return answer
        try:
            reply, error = perform(action), None
        except BaseException as exc:  # raised into the flow, at its yield
            reply, error = None, exc


async def drive_async(flow: Generator[A, Any, T], perform: Callable[[A], Awaitable[Any]]) -> T:
    """``drive``, awaiting each action."""
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            action = flow.send(reply) if error is None else flow.throw(error)
        except StopIteration as done:
            answer: T = done.value
            return answer
        try:
            reply, error = await perform(action), None
        except BaseException as exc:  # raised into the flow, at its yield
            reply, error = None, exc
