"""Rill Flow executors: dispatches in, idempotent runs, answers and callbacks out.

Needs the ``rillflow`` extra (FastAPI, httpx)::

    from fastapi import FastAPI
    from rill_executor import AsyncLedger
    from rill_executor.rillflow import RillFlowExecutor

    ledger = AsyncLedger("sqlite:///jobs.db", namespace="transcode")
    executor = RillFlowExecutor(ledger)

    @executor.task("/transcode", key=lambda job: f"{job.video}:{job.segment}:{job.profile}")
    async def transcode(job: SegmentJob) -> SegmentResult: ...

    app = FastAPI(lifespan=executor.lifespan)
    app.include_router(executor.router)

See ``docs/rillflow.md``.
"""

from .. import HandedOff
from ._callbacks import MAX_CALLBACK_CHARS, Callback, CallbackClass, callback_for, classify
from ._deliverer import Deliverer, Delivery
from ._dispatch import BadDispatch, Dispatch, parse_dispatch
from ._engines import Engines
from ._executor import RillFlowExecutor
from ._status import status_router
from ._task import CallbackTooLarge, HandOffNeedsAsync
from ._timings import (
    CALLBACK_TIMEOUT,
    ENGINE_POLL,
    MAX_ATTEMPTS,
    NOTICE_LEASE,
    RETRY_BASE,
    RETRY_CAP,
)
from ._tokens import CompletionTokens, InvalidToken, TokenClaims

__all__ = [
    "CALLBACK_TIMEOUT",
    "ENGINE_POLL",
    "MAX_ATTEMPTS",
    "MAX_CALLBACK_CHARS",
    "NOTICE_LEASE",
    "RETRY_BASE",
    "RETRY_CAP",
    "BadDispatch",
    "Callback",
    "CallbackClass",
    "CallbackTooLarge",
    "CompletionTokens",
    "Deliverer",
    "Delivery",
    "Dispatch",
    "Engines",
    "HandOffNeedsAsync",
    "HandedOff",
    "InvalidToken",
    "RillFlowExecutor",
    "TokenClaims",
    "callback_for",
    "classify",
    "parse_dispatch",
    "status_router",
]
