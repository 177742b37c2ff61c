"""The executor ``bench_rillflow.py`` measures: ``RillFlowExecutor`` with a no-op handler.

Served by uvicorn (``--app-dir benchmarks rillflow_noop:app``) and configured by the
environment:

- ``RILL_STORE``: the store URL (Redis or PostgreSQL, the schema installed);
- ``RILL_NAMESPACE``: where its jobs go (the benchmark names one per run);
- ``RILL_ENGINES``: the engine base URLs callbacks may go to, comma-separated, as a
  deployment names its engines (docs/security.md): here the callback receiver's.

The handler is an ``async def`` that returns at once: what is measured is the executor's own
work (claim with a watch, commit with its notice, delivery, settling), not the handler's.
"""

from __future__ import annotations

import os
from datetime import timedelta

from fastapi import FastAPI
from pydantic import BaseModel

from rill_executor import AsyncLedger
from rill_executor.rillflow import RillFlowExecutor


class Job(BaseModel):
    id: str


class Done(BaseModel):
    id: str
    ok: bool


ledger = AsyncLedger(
    os.environ["RILL_STORE"],
    namespace=os.environ["RILL_NAMESPACE"],
    retention=timedelta(hours=1),  # on Redis the benchmark's jobs expire after it
)
executor = RillFlowExecutor(
    ledger, engines=[e for e in os.environ["RILL_ENGINES"].split(",") if e.strip()]
)


@executor.task("/noop", key=lambda job: job.id, name="noop")
async def noop(job: Job) -> Done:
    return Done(id=job.id, ok=True)


app = FastAPI(lifespan=executor.lifespan)
app.include_router(executor.router)
