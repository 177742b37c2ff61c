"""An async store nobody closed is closed when its event loop shuts down.

Pooled connections outlive ``asyncio.run`` unless the engine is disposed, and at exit their
drivers close them on a closed loop (aiomysql prints "Event loop is closed"). An async
generator the store holds, suspended, is finalised by the loop's ``shutdown_asyncgens``
(``asyncio.run`` and ``asyncio.Runner`` call it before closing the loop): its ``finally``
disposes the engine while the loop still runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["LoopEndDisposal"]


async def _dispose_at_loop_end(*engines: AsyncEngine) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await _dispose(engines)


async def _dispose(engines: tuple[AsyncEngine, ...]) -> None:
    for engine in engines:
        await engine.dispose()


class LoopEndDisposal:
    """``arm`` on each use (cheap once armed); ``close`` disposes the engines now."""

    def __init__(self, *engines: AsyncEngine) -> None:
        self._engines = engines
        self._loop: asyncio.AbstractEventLoop | None = None
        self._guard: AsyncGenerator[None, None] | None = None

    async def arm(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        self._loop, self._guard = loop, _dispose_at_loop_end(*self._engines)
        await anext(self._guard)  # now the running loop tracks it

    async def close(self) -> None:
        guard, self._loop, self._guard = self._guard, None, None
        if guard is None:
            await _dispose(self._engines)
        else:
            await guard.aclose()
