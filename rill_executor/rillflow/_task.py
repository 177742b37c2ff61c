"""A mounted handler: its input type, its idempotency spec, and the check that its result
fits in a Rill Flow callback."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import typing
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from .._codec import adapter_for
from .._errors import TerminalError
from .._idempotent import IdempotentSpec
from ._callbacks import MAX_CALLBACK_CHARS, output_of
from ._dispatch import BadDispatch, Dispatch

__all__ = ["CallbackTooLarge", "Running", "Task", "check_callback", "running"]


class CallbackTooLarge(TerminalError):
    """A result that would not fit in the engine's callback (6,144 characters)."""


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


def check_callback(output: TypeAdapter[Any], result: Any) -> None:
    try:
        text = json.dumps(output_of(output.dump_python(result, mode="json")), separators=(",", ":"))
    except Exception:
        return  # not serialisable: the ledger's own check says so
    if len(text) > MAX_CALLBACK_CHARS:
        raise CallbackTooLarge(
            f"the result is {len(text)} characters of JSON, over the {MAX_CALLBACK_CHARS} a Rill"
            " Flow callback may carry; write the data as an output object"
            " (claim.outputs.put) and return its reference instead"
        )
