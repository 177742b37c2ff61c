"""The deliverer: sends the outbox's completion notices to the engine, and settles them.

Notices are leased before they are sent, so several worker processes (uvicorn ``--workers``)
never send one notice at the same time; a deliverer that dies holding a lease only delays
the notice until the lease runs out. A notice the engine did not take is tried again later,
after a jittered delay whose ceiling doubles up to a cap, up to ``max_attempts`` tries: the
lease, the timeout, the cap and the tries are chosen against the engine's timings
(``_timings``).

A *lapse notice* (a watched job whose owner's lease ran out: see ``_redrive``) is not sent:
the deliverer hands it to its ``redrive`` (the executor's, which runs the job again), or,
alone, ends the job as a retryable failure that the engine is told of.

A notice to an engine this executor does not serve (services that share a namespace, each
with its own ``engines``; or a change of ``engines`` rolling out) is not dropped: it is
given back unsent, pending, its try not counted, and due again a while later
(``pass_over_delay``), for an executor that serves the engine. Its ``passed_over`` outcome
and detail say why it waits.

Callbacks go out through aiohttp: a POST costs its client a fifth to a tenth of httpx's CPU
(docs/benchmarks-log.md), and the deliverer sends one for every task.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import aiohttp

from .. import AsyncLedger, JobState, RillExecutorError, StoreError
from ..integration import Seconds, to_us
from ..store import DueNotice, NoticeStatus
from . import _tracing as tracing
from ._callbacks import (
    Callback,
    CallbackClass,
    callback_for,
    classify,
    error_code,
    pass_over_delay,
    retry_delay,
    settle_as,
)
from ._engines import Engines
from ._redrive import Redriver
from ._timings import CALLBACK_TIMEOUT, MAX_ATTEMPTS, NOTICE_LEASE

__all__ = ["Deliverer", "Delivery"]

log = logging.getLogger("rill_executor.rillflow")

MAX_ANSWER_BYTES = 64 * 1024
"""Of an engine's answer to a callback (a small JSON document), the most that is read."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """What became of one notice in one delivery round."""

    key: str
    notice_id: str
    watch: str
    classification: CallbackClass
    detail: str
    settled: bool  # False: the lease ran out before the answer was recorded


class Deliverer:
    """Delivers ``ledger``'s due notices: ``await deliver()`` once, or ``start()`` a loop."""

    def __init__(
        self,
        ledger: AsyncLedger,
        *,
        client: aiohttp.ClientSession | None = None,
        owner: str | None = None,
        lease: Seconds = timedelta(seconds=NOTICE_LEASE),
        batch: int = 16,
        poll: Seconds = timedelta(seconds=1),
        max_attempts: int = MAX_ATTEMPTS,
        timeout: Seconds = timedelta(seconds=CALLBACK_TIMEOUT),
        redrive: Callable[[DueNotice], Awaitable[str]] | None = None,
    ) -> None:
        self.ledger = ledger
        self.clock = ledger.clock  # the poll's pace, a notice's age, an outage's length
        self.redrive = redrive or Redriver(ledger, None)
        """What to do with a lapse notice; ``RillFlowExecutor`` sets its own."""
        self.engines = Engines(None)
        """Where callbacks may go; ``RillFlowExecutor`` sets its own (``engines=``)."""
        self.owner = owner or f"deliverer-{secrets.token_hex(6)}"
        self._lease = timedelta(microseconds=to_us(lease, "lease"))
        self._batch = batch
        self._poll_us = to_us(poll, "poll")
        self._max_attempts = max_attempts
        self._timeout = aiohttp.ClientTimeout(total=to_us(timeout, "timeout") / 1e6)
        self._client = client
        self._own_client = client is None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._round = 0  # the loop's waits, counted: a poll timer ends only the one it was armed in
        self._task: asyncio.Task[None] | None = None

    async def deliver(self) -> list[Delivery]:
        """Lease the due notices and send them, until none is due; what became of each."""
        done: list[Delivery] = []
        while True:
            due = await self.ledger.lease_notices(
                owner=self.owner, lease=self._lease, limit=self._batch
            )
            if not due:
                return done
            done.extend(await asyncio.gather(*(self._send(notice) for notice in due)))

    async def _send(self, notice: DueNotice) -> Delivery:
        if notice.info.state is JobState.PROCESSING:
            return await self._lapsed(notice)
        callback = callback_for(notice.info, notice.result)
        elsewhere = self.engines.elsewhere(callback.url)
        if elsewhere is not None:
            return await self._pass_over(notice, elsewhere)
        namespace, trace_context = notice.namespace, tracing.trace_headers(notice.info.target)
        with tracing.callback_span(namespace, notice.job_id, callback.url, trace_context) as span:
            kind, detail, answered = await self._post(callback)
            status_code, code, error = answered
            tracing.delivered(span, namespace, kind.value, status_code, code, error)
        status, retry_in = settle_as(kind), 0.0
        if status == NoticeStatus.PENDING:
            if notice.info.attempts >= self._max_attempts:
                status, detail = (
                    NoticeStatus.DROPPED,
                    f"gave up after {notice.info.attempts} tries; {detail}",
                )
            else:
                retry_in = _retry_in(notice)
        settled = await self.ledger.settle_notice(
            notice, status, kind.value, detail=detail, retry_in=retry_in
        )
        if kind not in (CallbackClass.OK, CallbackClass.FINAL_DUPLICATE):
            log.warning("callback for %s (%s): %s, %s", notice.key, notice.info.watch, kind, detail)
        return Delivery(notice.key, notice.info.id, notice.info.watch, kind, detail, settled)

    async def _pass_over(self, notice: DueNotice, why: str) -> Delivery:
        """Give a notice this executor may not send back unsent, for one that may."""
        kind = CallbackClass.PASSED_OVER
        detail = f"not sent by {self.owner}: {why}"
        now = datetime.fromtimestamp(self.clock.time_ns() / 1e9, UTC)
        age = (now - notice.info.created_at).total_seconds()
        settled = await self.ledger.settle_notice(
            notice,
            settle_as(kind),
            kind.value,
            detail=detail,
            retry_in=pass_over_delay(age),
            tried=False,
        )
        log.debug(
            "callback for %s (%s) left to another executor: %s", notice.key, notice.info.watch, why
        )
        return Delivery(notice.key, notice.info.id, notice.info.watch, kind, detail, settled)

    async def _lapsed(self, notice: DueNotice) -> Delivery:
        """Re-drive the job of a lapse notice. One that could not be acted on (the store is
        down, say) is tried again later, like a callback the engine did not take."""
        try:
            kind, detail = CallbackClass.REDRIVEN, await self.redrive(notice)
        except RillExecutorError as exc:
            kind, detail = CallbackClass.RETRY_LATER, f"not re-driven yet: {exc}"
            log.warning("lapsed job %r not re-driven yet: %s", notice.key, exc)
        status, retry_in = settle_as(kind), 0.0
        if status == NoticeStatus.PENDING:
            retry_in = _retry_in(notice)
        settled = await self.ledger.settle_notice(
            notice, status, kind.value, detail=detail, retry_in=retry_in
        )
        return Delivery(notice.key, notice.info.id, notice.info.watch, kind, detail, settled)

    async def _post(
        self, callback: Callback
    ) -> tuple[CallbackClass, str, tuple[int | None, str | None, str | None]]:
        """Send one callback: what its answer means, a detail for the record, and for the
        span its HTTP status, the engine's error code and the ``error.type`` of a failure."""
        refusal = self.engines.refusal(callback.url)
        if refusal is not None:  # not an http(s) URL (not stored by a dispatch): nobody can
            return CallbackClass.REFUSED, f"not sent: {refusal}", (None, None, "NotAllowed")
        headers = {"Content-Type": "application/json", **tracing.callback_headers()}
        try:
            async with self._session().post(
                callback.url,
                data=callback.body,
                headers=headers,
                timeout=self._timeout,
                allow_redirects=False,  # a redirect could lead anywhere: only engines= are sent to
            ) as answer:
                status, text = answer.status, await _answer_text(answer)
        except (aiohttp.ClientError, TimeoutError) as exc:
            reason = str(exc) or f"no answer within {self._timeout.total:g} s"
            kind, detail = classify(None, f"{type(exc).__name__}: {reason}")
            return kind, detail, (None, None, type(exc).__qualname__)
        kind, detail = classify(status, text)
        failed = kind in (CallbackClass.REFUSED, CallbackClass.RETRY_LATER)
        error = str(status) if failed else None
        return kind, detail, (status, error_code(text), error)

    def _session(self) -> aiohttp.ClientSession:
        """The session callbacks go out on: the one given, or the deliverer's own, opened in
        the event loop that sends (an aiohttp session belongs to one loop)."""
        loop = asyncio.get_running_loop()
        if self._own_client and (self._client is None or self._client_loop is not loop):
            if self._client is not None:  # its loop is another: its connections are of no use
                self._client.detach()
            self._client = aiohttp.ClientSession(trust_env=False)
            self._client_loop = loop
        assert self._client is not None
        return self._client

    def wake(self) -> None:
        """Deliver now rather than at the next poll (after a commit, say)."""
        self._wake.set()

    async def _run(self) -> None:
        outage: int | None = None  # when the failing rounds began (the clock's monotonic_ns)
        while True:
            try:
                await self.deliver()
            except Exception as exc:  # a store outage, say: try again at the next poll
                if outage is None:
                    outage = self.clock.monotonic_ns()
                    _log_outage(exc, self._poll_us / 1e6)
            else:
                if outage is not None:
                    log.warning(
                        "delivering completion notices works again, after %.1f s",
                        (self.clock.monotonic_ns() - outage) / 1e9,
                    )
                    outage = None
            await self._next_round()

    async def _next_round(self) -> None:
        """Wait for a ``wake`` or the next poll, on the ledger's clock."""
        due = self.clock.monotonic_ns() + self._poll_us * 1000
        self.clock.loop_call_at(
            asyncio.get_running_loop(), due, functools.partial(self._poll_due, self._round)
        )
        await self._wake.wait()
        self._wake.clear()
        self._round += 1  # a timer still armed (a wake came first) wakes no later round

    def _poll_due(self, armed_in: int) -> None:
        """A poll timer fired: it ends the wait of the round that armed it, if that one
        still waits."""
        if armed_in == self._round:
            self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"rill-{self.owner}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._own_client and self._client is not None:
            await self._client.close()
            self._client = None


def _retry_in(notice: DueNotice) -> float:
    """The delay before ``notice``'s next try, jittered by a seed of its own."""
    return retry_delay(notice.info.attempts, seed=f"{notice.job_id}/{notice.info.id}")


async def _answer_text(answer: aiohttp.ClientResponse) -> str:
    """The engine's answer, as it arrives (in as many reads as it takes), up to
    ``MAX_ANSWER_BYTES``."""
    body = bytearray()
    while len(body) < MAX_ANSWER_BYTES:
        chunk = await answer.content.read(MAX_ANSWER_BYTES - len(body))
        if not chunk:
            break
        body += chunk
    return body.decode("utf-8", "replace")


def _log_outage(exc: Exception, poll: float) -> None:
    """The first failed round of an outage: one line (with the traceback only for what is
    not a store error, a bug say); the end of the outage gets one line too."""
    message = "delivering completion notices failed; trying again every %.1f s: %s"
    if isinstance(exc, StoreError):
        log.warning(message, poll, exc)
    else:
        log.exception(message, poll, exc)
