"""The ``idempotent`` decorator: one spec, a sync loop and an async loop.

``IdempotentSpec`` holds the pure parts (business identity of a call, which errors are
terminal, the wait schedule); ``run_sync`` / ``run_async`` do the I/O around the handler.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import time
import typing
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from ._claim import AsyncClaim, Claim
from ._codec import adapter_for
from ._core import Seconds, to_us
from ._errors import RillExecutorError, TerminalError, UsageError
from ._heartbeat import AsyncHeartbeat, Heartbeats
from ._keys import fingerprint_of
from ._outcomes import Conflict, InProgress, Replay

if TYPE_CHECKING:
    from ._ledger import AsyncLedger, Ledger

__all__ = ["IdempotentSpec", "current_async_claim", "current_claim"]

log = logging.getLogger("rill_executor")
_current: contextvars.ContextVar[Claim | AsyncClaim] = contextvars.ContextVar("rill_claim")


def current_claim() -> Claim:
    """The ``Claim`` of the ``idempotent`` handler running in this context."""
    claim = _current.get(None)
    if not isinstance(claim, Claim):
        raise UsageError("current_claim() is only available inside a sync idempotent handler")
    return claim


def current_async_claim() -> AsyncClaim:
    """The ``AsyncClaim`` of the ``idempotent`` async handler running in this task."""
    claim = _current.get(None)
    if not isinstance(claim, AsyncClaim):
        raise UsageError(
            "current_async_claim() is only available inside an async idempotent handler"
        )
    return claim


@dataclass(frozen=True)
class IdempotentSpec:
    fn: Callable[..., Any]
    key: Callable[..., object]
    fingerprint: Callable[..., Any] | None
    result_version: Callable[..., str | None] | str | None
    wait: float | None
    heartbeat: float | None
    terminal: tuple[type[BaseException], ...]
    signature: inspect.Signature = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "signature", inspect.signature(self.fn))

    @classmethod
    def build(
        cls,
        fn: Callable[..., Any],
        *,
        key: Callable[..., object],
        fingerprint: Callable[..., Any] | None,
        result_version: Callable[..., str | None] | str | None,
        wait: Seconds | None,
        heartbeat: bool | Seconds,
        terminal: tuple[type[BaseException], ...],
        lease_us: int,
    ) -> IdempotentSpec:
        if not callable(key):
            raise UsageError("idempotent(key=...) must be a function of the handler's arguments")
        interval: float | None
        if heartbeat is True:
            interval = lease_us / 3 / 1e6
        elif heartbeat is False:
            interval = None
        else:
            interval = to_us(heartbeat, "heartbeat") / 1e6
        wait_s = None if wait is None else to_us(wait, "wait") / 1e6
        return cls(
            fn, key, fingerprint, result_version, wait_s, interval, (TerminalError, *terminal)
        )

    def identity(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Any, str, str | None]:
        """(key, fingerprint, result version) of one call."""
        key = self.key(*args, **kwargs)
        if self.fingerprint is not None:
            payload = self.fingerprint(*args, **kwargs)
        else:
            bound = self.signature.bind(*args, **kwargs)
            bound.apply_defaults()
            payload = dict(bound.arguments)
        version = (
            self.result_version(*args, **kwargs)
            if callable(self.result_version)
            else self.result_version
        )
        return key, fingerprint_of(payload), version

    @functools.cached_property
    def return_type(self) -> Any:
        # Resolved on first use, so forward references defined after the handler work.
        return typing.get_type_hints(self.fn).get("return", Any)

    @property
    def adapter(self) -> TypeAdapter[Any]:
        return adapter_for(self.return_type)

    def is_terminal(self, exc: BaseException) -> bool:
        return isinstance(exc, self.terminal)

    def waiter(self) -> Waiter:
        return Waiter(self.wait)


class Waiter:
    """When to look again at a job another attempt is running (sans-IO)."""

    def __init__(self, wait: float | None) -> None:
        self._deadline = None if wait is None else time.monotonic() + wait
        self._delay = 0.02

    def next_delay(self, busy: InProgress) -> float | None:
        if self._deadline is None:
            return None
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            return None
        delay = min(self._delay, remaining, max(busy.lease_left.total_seconds(), 0.001))
        self._delay = min(self._delay * 2, 1.0)
        return delay


def _answer(spec: IdempotentSpec, outcome: Replay | Conflict) -> Any:
    if isinstance(outcome, Conflict):
        raise outcome.error()
    return outcome.result(spec.return_type)


def _note(exc: BaseException, problem: RillExecutorError) -> None:
    exc.add_note(f"rill-executor: recording this failure was rejected too: {problem}")


def run_sync(
    ledger: Ledger, spec: IdempotentSpec, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    key, fingerprint, version = spec.identity(args, kwargs)
    waiter = spec.waiter()
    while True:
        outcome = ledger.claim(key, fingerprint=fingerprint, result_version=version)
        if isinstance(outcome, Claim):
            return _run_claimed_sync(ledger.heartbeats, spec, outcome, args, kwargs)
        if not isinstance(outcome, InProgress):
            return _answer(spec, outcome)
        delay = waiter.next_delay(outcome)
        if delay is None:
            raise outcome.error()
        time.sleep(delay)


def _run_claimed_sync(
    heartbeats: Heartbeats,
    spec: IdempotentSpec,
    claim: Claim,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    token = _current.set(claim)
    beat: AbstractContextManager[object] = (
        heartbeats.watch(claim, spec.heartbeat) if spec.heartbeat else nullcontext()
    )
    try:
        with beat:
            try:
                result = spec.fn(*args, **kwargs)
            except BaseException as exc:
                retryable = not spec.is_terminal(exc)
                try:
                    claim.fail(exc, retryable=retryable)
                except RillExecutorError as problem:
                    _note(exc, problem)
                raise
        claim.commit(result, adapter=spec.adapter)
        return result
    finally:
        _current.reset(token)


async def run_async(
    ledger: AsyncLedger, spec: IdempotentSpec, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    key, fingerprint, version = spec.identity(args, kwargs)
    waiter = spec.waiter()
    while True:
        outcome = await ledger.claim(key, fingerprint=fingerprint, result_version=version)
        if isinstance(outcome, AsyncClaim):
            return await _run_claimed_async(spec, outcome, args, kwargs)
        if not isinstance(outcome, InProgress):
            return _answer(spec, outcome)
        delay = waiter.next_delay(outcome)
        if delay is None:
            raise outcome.error()
        await asyncio.sleep(delay)


async def _run_claimed_async(
    spec: IdempotentSpec, claim: AsyncClaim, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    token = _current.set(claim)
    beat: AbstractAsyncContextManager[object] = (
        AsyncHeartbeat(claim, spec.heartbeat) if spec.heartbeat else _null_async()
    )
    try:
        async with beat:
            try:
                result = await typing.cast(Awaitable[Any], spec.fn(*args, **kwargs))
            except BaseException as exc:
                retryable = not spec.is_terminal(exc)
                try:
                    await claim.fail(exc, retryable=retryable)
                except RillExecutorError as problem:
                    _note(exc, problem)
                raise
        await claim.commit(result, adapter=spec.adapter)
        return result
    finally:
        _current.reset(token)


class _null_async(AbstractAsyncContextManager[None]):
    async def __aexit__(self, *exc: object) -> None:
        return None
