"""A mounted handler: its input type, its idempotency spec, and the check that its result
fits in a Rill Flow callback — checked on the callback body that would be sent, built from
the result exactly as the ledger stores it."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import sys
import typing
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from .. import HandedOff, RillExecutorError, TerminalError, UsageError
from ..integration import IdempotentSpec, adapter_for, encode_result
from ._callbacks import body_text, output_of, too_large
from ._dispatch import BadDispatch, Dispatch

__all__ = [
    "CallbackTooLarge",
    "HandOffNeedsAsync",
    "Running",
    "Task",
    "check_callback",
    "running",
    "stored_form",
]


class CallbackTooLarge(TerminalError):
    """A result whose callback body would not fit in the engine's 6,144 characters."""


class HandOffNeedsAsync(RillExecutorError):
    """A handler handed its work off on a ``task_sync`` dispatch, which must be answered
    with the result: the task must be declared ``task_async``. Recorded as a retryable
    failure (nothing was done for good) and answered 503: the executor's side must act."""

    def __init__(self) -> None:
        super().__init__(
            "the handler handed its work off on a task_sync dispatch, which is answered with"
            " the result: declare the task task_async in the DAG"
        )


class Running(typing.NamedTuple):
    """What ``hand_off`` needs to know about the handler run it is called from."""

    task: Task
    dispatch: Dispatch
    loop: asyncio.AbstractEventLoop


# Set around each handler call; copied into the worker thread that runs a ``def`` handler.
running: contextvars.ContextVar[Running] = contextvars.ContextVar("rill_rillflow_running")


class Task:
    """One mounted handler: its input type, its idempotency spec, and whether it wants the
    dispatch as its second argument."""

    def __init__(
        self, fn: Callable[..., Any], spec_of: Callable[[Callable[..., Any]], IdempotentSpec]
    ) -> None:
        params = list(inspect.signature(fn).parameters.values())
        hints = typing.get_type_hints(fn)
        self.input: TypeAdapter[Any] = adapter_for(
            hints.get(params[0].name, Any) if params else Any
        )
        self.with_dispatch = len(params) >= 2
        returns = hints.get("return", Any)
        output = adapter_for(returns)
        self.output = output
        user = fn

        async def call(payload: Any, dispatch: Dispatch) -> Any:
            args = (payload, dispatch) if self.with_dispatch else (payload,)
            token = running.set(Running(self, dispatch, asyncio.get_running_loop()))
            try:
                if inspect.iscoroutinefunction(user):
                    result = await user(*args)
                else:
                    result = await asyncio.to_thread(user, *args)
            except HandedOff:
                if dispatch.is_async:
                    raise
                raise HandOffNeedsAsync() from None
            finally:
                running.reset(token)
            if dispatch.is_async:
                check_callback(output, result)
            return result

        call.__annotations__ = {"payload": Any, "dispatch": Dispatch, "return": returns}
        call.__module__, call.__qualname__ = fn.__module__, fn.__qualname__
        self.spec = spec_of(call)

    def payload(self, dispatch: Dispatch) -> Any:
        try:
            return self.input.validate_python(dispatch.input())
        except ValidationError as exc:
            raise BadDispatch(f"the task input does not validate: {exc}") from None


def stored_form(output: TypeAdapter[Any], result: Any) -> Any:
    """``result`` as the ledger stores it and a replay reads it (JSON data): the task output
    the engine gets. ``UsageError`` for a result that cannot be stored."""
    return json.loads(encode_result(result, sys.maxsize, output))


def check_callback(output: TypeAdapter[Any], result: Any) -> None:
    """Raise ``CallbackTooLarge`` when the callback body for ``result`` — built from its
    stored form, as the deliverer builds it — is over the engine's limit."""
    try:
        data = stored_form(output, result)
    except UsageError:
        return  # cannot be stored at all: the ledger's own check says so
    problem = too_large(body_text(output_of(data)))
    if problem is not None:
        raise CallbackTooLarge(problem)
