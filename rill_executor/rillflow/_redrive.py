"""Re-driving a watched job whose owner died: the engine must not wait for ever.

An async dispatch is acknowledged before its handler runs, so the engine learns the outcome
only from the callback that the run's finish queues. If the process dies mid-run, or cannot
write the finish before its lease runs out, nobody would ever write it: the engine's task
stays RUNNING (for good, without a task timeout). The store notices instead — on its own
clock — by adding a *lapse notice* to the job once its owner's lease has run out while
dispatches watch it, and a deliverer leases that notice like any other (so one process
acts on it). ``Redriver`` then:

- runs the job again in this executor, when the handler is mounted here and the watch kept
  the dispatch it answers (its input, at most ``MAX_KEPT_INPUT_CHARS``): a takeover claim,
  fenced as usual, so a late write of the dead attempt is refused and a concurrent retry
  from the engine either loses the claim and joins, or wins it and this one joins;
- or, when it cannot (no such handler here, no input kept, or ``max_redrives`` lapses of
  the same job already), ends the job as a retryable failure, which every watch is told of,
  so the engine's retry policy dispatches it again.

A lapse notice of an attempt that is no longer the job's owner, or of a job that ended
meanwhile, is settled without doing anything: the job's own finish answers its watches.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from pydantic_core import to_json

from .. import AsyncClaim, AsyncLedger, JobState, JobStatus, RillExecutorError
from ..store import DueNotice
from ._dispatch import Dispatch

__all__ = ["MAX_KEPT_INPUT_CHARS", "Redriver", "dispatch_of", "kept_dispatch"]

log = logging.getLogger("rill_executor.rillflow")

MAX_KEPT_INPUT_CHARS = 16 * 1024
"""The largest task input (as JSON) a watch keeps to run the job again after its owner died;
a larger one is answered with a retryable failure instead, and the engine dispatches it again."""

Start = Callable[[str, AsyncClaim, Dispatch], Awaitable[bool]]


def kept_dispatch(dispatch: Dispatch, handler: str) -> dict[str, Any]:
    """What a watch keeps of its dispatch, beside the callback URL, to run it again."""
    kept: dict[str, Any] = {"handler": handler}
    body = to_json(dispatch.body).decode()
    if len(body) <= MAX_KEPT_INPUT_CHARS:
        kept["dispatch"] = {
            "execution_id": dispatch.execution_id,
            "task_name": dispatch.task_name,
            "ts": dispatch.ts,
            "flow_server": dispatch.flow_server,
            "body": dispatch.body,
        }
    return kept


def dispatch_of(target: Any) -> tuple[str, Dispatch] | None:
    """(handler, dispatch) of a watch target that kept them, else None."""
    if not isinstance(target, dict) or not isinstance(kept := target.get("dispatch"), dict):
        return None
    try:
        return target["handler"], Dispatch(
            execution_id=kept["execution_id"],
            task_name=kept["task_name"],
            mode="async",
            callback_url=target["url"],
            ts=kept["ts"],
            flow_server=kept["flow_server"],
            traceparent=target.get("traceparent"),
            tracestate=target.get("tracestate"),
            body=kept["body"],
        )
    except (KeyError, TypeError):
        return None


class Redriver:
    """Acts on lapse notices for an executor: see the module docs. ``start`` runs a mounted
    handler under a claim (False when no handler of that name is mounted)."""

    def __init__(
        self,
        ledger: AsyncLedger,
        start: Start | None,
        max_redrives: int = 3,
        lease: timedelta | None = None,
    ) -> None:
        self.ledger = ledger
        self._start = start
        self._max = max_redrives
        self._lease = lease

    async def __call__(self, notice: DueNotice) -> str:
        """Act on a leased lapse notice; what was done, for the notice's record."""
        status = await self.ledger.status(notice.key)
        if status is None or status.state is not JobState.PROCESSING:
            return "the job ended meanwhile: its finish answers the watches"
        if status.fence != notice.info.fence:
            return f"attempt at fence {status.fence} took the job over meanwhile"
        lapses = sum(n.state is JobState.PROCESSING for n in status.notices)
        runnable = None if lapses > self._max else _runnable(status)
        claim = await self._take_over(status, runnable)
        if claim is None:
            return "another attempt took the job over meanwhile"
        dead = status.owner.attempt_id if status.owner else "?"
        if runnable is not None and self._start is not None:
            handler, dispatch = runnable
            try:
                if await self._start(handler, claim, dispatch):
                    log.warning(
                        "attempt %s of %r lapsed (its process died or lost the store):"
                        " running it again as attempt %s",
                        dead,
                        notice.key,
                        claim.attempt_id,
                    )
                    return f"run again as attempt {claim.attempt_id}"
            except RillExecutorError as exc:  # the kept input no longer fits the handler
                log.warning("lapsed job %r cannot run again here: %s", notice.key, exc)
        why = (
            f"attempt {dead} lapsed {lapses} times"
            if lapses > self._max
            else f"attempt {dead} lapsed and no handler here can run the job again"
        )
        await claim.fail(f"{why}; the engine may dispatch it again", retryable=True)
        log.warning("lapsed job %r ended as a retryable failure: %s", notice.key, why)
        return f"failed as retryable: {why}"

    async def _take_over(
        self, status: JobStatus, runnable: tuple[str, Dispatch] | None
    ) -> AsyncClaim | None:
        origin: dict[str, Any] = {"engine": "rillflow", "redrive": True}
        if runnable is not None:
            origin = {**runnable[1].origin(), "redrive": True}
        outcome = await self.ledger.claim(
            status.key,
            fingerprint=status.fingerprint,
            result_version=status.result_version,
            attempt_id=f"redrive-{secrets.token_hex(6)}",
            lease=self._lease,
            origin=origin,
        )
        return outcome if isinstance(outcome, AsyncClaim) else None


def _runnable(status: JobStatus) -> tuple[str, Dispatch] | None:
    """A watch's dispatch to run the job with: the newest one kept."""
    kept = [found for target in status.watchers.values() if (found := dispatch_of(target))]
    return kept[-1] if kept else None
