"""A minimal Rill Flow executor: one task, idempotent by its business key.

Run it (two worker processes share the store and deliver callbacks without sending one twice)::

    RILL_STORE=sqlite:///jobs.db uvicorn examples.rillflow_executor.app:app --workers 2 --port 8000

Then point a Rill Flow function task at ``http://127.0.0.1:8000/segments`` (``task_sync`` or
``task_async``) with an input such as ``{"video": "A", "segment": 1, "profile": "h264-v2"}``.
``RILL_STATUS_TOKEN`` (16+ characters) opens ``GET /rill/jobs/segments/{key}?handler=segment``
(``segments`` is the namespace of its jobs; ``RILL_NAMESPACE`` names another).
With ``RILL_TOKEN_SECRET`` (32+ bytes) an input with ``"external": true`` is handed to an
external encoder: its completion token is appended to ``RILL_HANDOFF_LOG`` (standing in for
the encoder's queue), and the encoder reports with it to ``POST /rill/complete``.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

from fastapi import FastAPI
from pydantic import BaseModel

from rill_executor import AsyncLedger, HandedOff, TerminalError
from rill_executor.rillflow import Dispatch, Engines, RillFlowExecutor, status_router


class Segment(BaseModel):
    video: str
    segment: int
    profile: str
    seconds: float = 0.0  # how long the work takes (for trying the engine's timeouts)
    fail: str | None = None  # "terminal": a failure that must not be retried
    external: bool = False  # handed to an external encoder that reports with a token


class Encoded(BaseModel):
    uri: str
    frames: int


LEASE = float(os.environ.get("RILL_LEASE", "10"))
ledger = AsyncLedger(
    os.environ.get("RILL_STORE", "sqlite:///jobs.db"),
    namespace=os.environ.get("RILL_NAMESPACE", "segments"),
    lease=LEASE,
)
# Where callbacks may go: RILL_ENGINES, the engine's base URLs or hosts, comma-separated
# (unset: only the dispatch's own sender; see docs/security.md). A refusal names it.
executor = RillFlowExecutor(
    ledger,
    lease=timedelta(seconds=LEASE),
    token_secret=os.environ.get("RILL_TOKEN_SECRET"),
    engines=Engines.from_env("RILL_ENGINES"),
)
app = FastAPI(lifespan=executor.lifespan)
app.include_router(executor.router)
if token := os.environ.get("RILL_STATUS_TOKEN"):
    app.include_router(status_router([ledger], tokens={token: [ledger.namespace]}))

_RUNS = os.environ.get("RILL_RUN_LOG")  # a file each run appends a line to (for tests)
_HANDOFFS = Path(os.environ.get("RILL_HANDOFF_LOG", "handoffs.log"))


@executor.task(
    "/segments",
    key=lambda job: f"{job.video}:{job.segment}:{job.profile}",
    result_version=lambda job: job.profile,
    name="segment",
)
def segment(job: Segment, dispatch: Dispatch) -> Encoded:
    if _RUNS:
        with Path(_RUNS).open("a") as log:
            log.write(f"{job.video}:{job.segment}:{job.profile} {dispatch.execution_id}\n")
    if job.external:  # the encoder heartbeats the lease (POST /rill/heartbeat) while it works
        token = executor.hand_off(timedelta(hours=1), lease=timedelta(seconds=LEASE))
        with _HANDOFFS.open("a") as queue:
            queue.write(f"{job.video}:{job.segment}:{job.profile} {token}\n")
        raise HandedOff()
    time.sleep(job.seconds)
    if job.fail == "terminal":
        raise TerminalError(f"cannot encode {job.video} as {job.profile}")
    return Encoded(uri=f"s3://segments/{job.video}/{job.segment}.{job.profile}.mp4", frames=250)
