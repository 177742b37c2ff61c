"""One test body, two ledgers: ``LedgerDriver`` gives ``Ledger`` and ``AsyncLedger`` the
same blocking interface, so every kit test runs against both twins.

The async twin runs on an event loop in a background thread; calls cross over with
``asyncio.run_coroutine_threadsafe``.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, TypeVar

from .. import AsyncClaim, AsyncLedger, Claim, JobStatus, Ledger, open_async_store, open_store
from ..integration import Seconds

__all__ = ["BlockingClaim", "LedgerDriver", "Portal"]

T = TypeVar("T")


class Portal:
    """An event loop in a thread, and a blocking ``call`` into it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class BlockingClaim:
    """An ``AsyncClaim`` used through the portal, with ``Claim``'s interface."""

    def __init__(self, portal: Portal, claim: AsyncClaim) -> None:
        self._portal = portal
        self.claim = claim

    def __getattr__(self, name: str) -> Any:
        return getattr(self.claim, name)

    def heartbeat(self, lease: Seconds | None = None) -> datetime:
        return self._portal.call(self.claim.heartbeat(lease))

    def commit(self, result: Any) -> None:
        self._portal.call(self.claim.commit(result))

    @property
    def outputs(self) -> Any:
        portal, outputs = self._portal, self.claim.outputs

        class BlockingOutputs:
            refs = outputs.refs

            def put(self, name: str, data: Any) -> Any:
                return portal.call(outputs.put(name, data))

        return BlockingOutputs()

    def fail(self, error: BaseException | str, *, retryable: bool) -> None:
        self._portal.call(self.claim.fail(error, retryable=retryable))


class LedgerDriver:
    """Opens ledgers on one store URL, as ``sync`` or ``async`` twins."""

    def __init__(self, url: str, mode: str) -> None:
        assert mode in ("sync", "async")
        self.url = url
        self.mode = mode
        self._portal = Portal() if mode == "async" else None
        self._closers: list[Callable[[], None]] = []
        self._store: Any = None

    @property
    def is_async(self) -> bool:
        return self._portal is not None

    def resolve(self, value: Any) -> Any:
        """``value`` itself (a sync twin's answer), or awaited on the driver's loop (an
        async twin's coroutine)."""
        return value if self._portal is None else self._portal.call(value)

    def shared_store(self) -> Any:
        # One store per driver, like one per service: ledgers of several namespaces share it.
        if self._store is None:
            if self._portal is None:
                self._store = open_store(self.url)
                self._closers.append(self._store.close)
            else:
                portal = self._portal

                async def opened() -> Any:
                    return open_async_store(self.url)

                self._store = portal.call(opened())
                self._closers.append(lambda: portal.call(self._store.close()))
        return self._store

    def ledger(
        self, namespace: str, *, wrap: Callable[[Any], Any] | None = None, **options: Any
    ) -> DrivenLedger:
        """A ledger on the shared store; ``wrap`` may put a proxy around that store."""
        store = self.shared_store()
        if wrap is not None:
            store = wrap(store)
        if self._portal is None:
            return DrivenLedger(Ledger(store, namespace=namespace, **options), None)
        return DrivenLedger(AsyncLedger(store, namespace=namespace, **options), self._portal)

    def close(self) -> None:
        for close in reversed(self._closers):
            close()
        if self._portal is not None:
            self._portal.close()


class DrivenLedger:
    def __init__(self, ledger: Ledger | AsyncLedger, portal: Portal | None) -> None:
        self.ledger = ledger
        self._portal = portal

    @property
    def namespace(self) -> str:
        return self.ledger.namespace

    def claim(self, key: Any, **options: Any) -> Any:  # a claim outcome; Any keeps the tests terse
        if self._portal is None:
            assert isinstance(self.ledger, Ledger)
            return self.ledger.claim(key, **options)
        assert isinstance(self.ledger, AsyncLedger)
        outcome = self._portal.call(self.ledger.claim(key, **options))
        return BlockingClaim(self._portal, outcome) if isinstance(outcome, AsyncClaim) else outcome

    def status(self, key: Any, **options: Any) -> JobStatus | None:
        if self._portal is None:
            assert isinstance(self.ledger, Ledger)
            return self.ledger.status(key, **options)
        assert isinstance(self.ledger, AsyncLedger)
        return self._portal.call(self.ledger.status(key, **options))

    def __getattr__(self, name: str) -> Any:
        """Any other ledger method (audit, collect_orphans, verify, publish…), blocking."""
        method = getattr(self.ledger, name)
        if self._portal is None:
            return method
        portal = self._portal
        return lambda *args, **kwargs: portal.call(method(*args, **kwargs))

    def idempotent(self, **options: Any) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorate a plain function; in async mode it runs in a worker thread of the loop."""
        if self._portal is None:
            return self.ledger.idempotent(**options)
        portal = self._portal

        def decorate(fn: Callable[..., T]) -> Callable[..., T]:
            @functools.wraps(fn)
            async def handler(*args: Any, **kwargs: Any) -> T:
                return await asyncio.to_thread(fn, *args, **kwargs)

            wrapped = self.ledger.idempotent(**options)(handler)

            @functools.wraps(wrapped)
            def call(*args: Any, **kwargs: Any) -> T:
                return portal.call(wrapped(*args, **kwargs))

            return call

        return decorate


def is_claim(outcome: object) -> bool:
    return isinstance(outcome, (Claim, BlockingClaim))
