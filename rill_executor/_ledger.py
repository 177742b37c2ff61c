"""``Ledger`` and ``AsyncLedger``: claim, status and the ``idempotent`` decorator.

Both are thin I/O loops: a decorated call is the step in ``_steps.call``, every other operation a
step in ``_steps.operations``, and each twin performs their actions, blocking or awaiting. The
``LedgerConfig`` is built once, at construction.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from datetime import timedelta
from types import TracebackType
from typing import Any, Generic, ParamSpec, TypeVar, cast

from . import _telemetry as telemetry
from ._claim import AsyncClaim, Claim, resend_once, resend_once_async
from ._claim import current as current_claim
from ._clock import SYSTEM_CLOCK, Clock, checked_clock
from ._codec import DEFAULT_MAX_RESULT_BYTES
from ._config import LedgerConfig, Seconds
from ._duplicate_window import DuplicateWindow
from ._errors import ConfigError
from ._heartbeat import AsyncHeartbeats, Heartbeats, settled
from ._housekeeping import CollectReport, OutputAudit
from ._idempotent import (
    HANDLER_NAME,
    Handler,
    HandlerNames,
    IdempotentOptions,
    IdempotentSpec,
    Origin,
    stored_key,
)
from ._listing import JobList
from ._namespace_audit import DrillReport
from ._outcomes import Conflict, InProgress, Replay
from ._outputs import OutputStore
from ._records import JobRow, JobState, JobStatus, OutputRef
from ._registry import open_async_store, open_output_store, open_store
from ._rules.core import LedgerCore
from ._rules.notices import DueNotice, Watch
from ._rules.purge import PurgeReport
from ._rules.resolution import NO_RESULT
from ._steps import operations
from ._steps.call import (
    Action,
    Blocking,
    Finish,
    Own,
    Renew,
    Run,
    SendClaim,
    Sleep,
    call,
    resumed,
)
from ._steps.drive import drive, drive_async
from ._steps.store_calls import StoreCall
from ._store import AsyncStore, Store
from ._threaded_store import ThreadedAsyncStore

__all__ = ["AsyncLedger", "Ledger"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", Store, AsyncStore)
ClaimOutcome = Claim | Replay | InProgress | Conflict
AsyncClaimOutcome = AsyncClaim | Replay | InProgress | Conflict


class _LedgerBase(Generic[S]):
    store: S

    def __init__(
        self,
        store: S | str,
        *,
        namespace: str,
        lease: Seconds = timedelta(seconds=30),
        retention: Seconds = timedelta(days=7),
        duplicate_window: DuplicateWindow | Seconds | None = None,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        outputs: OutputStore | str | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        config = LedgerConfig.build(
            namespace=namespace,
            lease=lease,
            retention=retention,
            duplicate_window=duplicate_window,
            max_result_bytes=max_result_bytes,
        )
        self._setup(
            self._open(store) if isinstance(store, str) else store,
            config,
            open_output_store(outputs) if isinstance(outputs, str) else outputs,
            checked_clock(clock),
        )

    def _setup(
        self, store: S, config: LedgerConfig, outputs: OutputStore | None, clock: Clock
    ) -> None:
        self.store = store
        self.config = config
        self._core = LedgerCore(config, telemetry.store_kind(store), clock)
        self.outputs = outputs
        self._names = HandlerNames(config.namespace)  # the handler names decorated here

    def _open(self, url: str) -> S:
        raise NotImplementedError

    @property
    def namespace(self) -> str:
        return self._core.namespace

    @property
    def lease(self) -> timedelta:
        return timedelta(microseconds=self.config.lease_us)

    @property
    def retention(self) -> timedelta:
        return timedelta(microseconds=self.config.retention_us)

    @property
    def clock(self) -> Clock:
        """The ``Clock`` given as ``clock=`` (``SYSTEM_CLOCK`` by default): what an
        integration built on this ledger (``RillFlowExecutor``) reads the time from too."""
        return self._core.clock

    def idempotent(
        self,
        *,
        key: Callable[..., object],
        fingerprint: Callable[..., Any] | None = None,
        result_version: Callable[..., str | None] | str | None = None,
        wait: Seconds | None = None,
        heartbeat: bool | Seconds = True,
        terminal: tuple[type[BaseException], ...] = (),
        name: str | None = None,
    ) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Run the handler once per business key; duplicates get the committed result.

        ``key`` / ``fingerprint`` / ``result_version`` take the handler's arguments. The
        fingerprint defaults to all arguments. ``wait`` joins a running attempt for at most
        that long before raising ``JobInProgress``. ``heartbeat`` renews the lease every
        lease/3 (or the given interval). ``terminal`` exceptions are replayed, not re-run.
        ``name`` is the durable identity of the handler's jobs (default: its qualified name,
        whatever its module): they are stored under the key ``{name}/{key}``, so two
        handlers never replay each other's results; set it to keep the jobs across a rename,
        or to share them. Two different functions that would get one default name on this
        ledger are refused with ``ConfigError``; the same function decorated again (its
        module imported under another name, or reloaded) is not. A function defined inside
        another (``main.<locals>.transcode``) or a lambda has no lasting default: without
        ``name`` it is refused with ``ConfigError``.
        ``Ledger`` takes ``def`` and ``async def`` handlers (the store calls of an async one
        run in a worker thread); ``AsyncLedger`` takes ``async def`` handlers.
        """
        options = IdempotentOptions(
            key, fingerprint, result_version, wait, heartbeat, terminal, name
        )

        def decorate(fn: Callable[P, R]) -> Callable[P, R]:
            self._accepts(fn)
            spec = self.spec(fn, options)
            wrapper = functools.wraps(fn)(self._wrap(spec))
            setattr(wrapper, HANDLER_NAME, spec.name)
            return cast(Callable[P, R], wrapper)

        return decorate

    def spec(
        self,
        fn: Callable[..., Any],
        options: IdempotentOptions,
        *,
        origin: Callable[..., Any] | None = None,
    ) -> IdempotentSpec:
        """The spec of handler ``fn`` under ``options`` (what ``idempotent`` takes), its name
        taken on this ledger as ``idempotent`` takes it; ``origin`` is the function the user
        wrote, when ``fn`` wraps it (an integration's adapter of the engine's arguments).
        Run it with ``AsyncLedger.run`` / ``run_claimed``."""
        spec = IdempotentSpec.build(fn, options, self.config)
        if options.name is None:
            self._names.take(spec.name, Origin.of(origin or fn))
        return spec

    def job_id(self, key: str, *, handler: Handler | None = None) -> str:
        """The store's id of the job of ``key`` (``handler``'s job, as ``status`` takes
        it): the folder its outputs are written under, the id the reports name."""
        return self._core.job_id(stored_key(key, handler))

    def _accepts(self, fn: Callable[..., Any]) -> None:
        """Refuse, with ``ConfigError``, a handler this ledger cannot run."""

    def _wrap(self, spec: IdempotentSpec) -> Callable[..., Any]:
        raise NotImplementedError


class Ledger(_LedgerBase[Store]):
    """The business-idempotency ledger over a synchronous store.

    ``store`` is a ``Store`` or a URL for ``open_store``. ``lease`` is how long a claim lives
    without a heartbeat (store clock); ``retention`` how long finished records are kept at
    least; ``duplicate_window``, if given, is how long after a task's first dispatch the
    engine may still send a duplicate (a ``DuplicateWindow`` built from its retry policy, or
    a duration), and a retention shorter than it is refused with ``ConfigError``. ``clock``
    is the time the ledger's decisions read and its waits pass on (``Clock``): the process's
    own, or a test's ``VirtualClock``.
    """

    def _open(self, url: str) -> Store:
        return open_store(url)

    def _setup(
        self, store: Store, config: LedgerConfig, outputs: OutputStore | None, clock: Clock
    ) -> None:
        super()._setup(store, config, outputs, clock)
        self.heartbeats = Heartbeats(clock)  # renews the leases of running handlers

    def claim(
        self,
        key: str,
        *,
        fingerprint: str | None = None,
        result_version: str | None = None,
        attempt_id: str | None = None,
        lease: Seconds | None = None,
        origin: Any = None,
        watch: Watch | None = None,
        trace: str | None = None,
    ) -> ClaimOutcome:
        """Claim ``key`` in one store round trip; see ``ClaimOutcome`` for the answers.

        ``origin`` (JSON data) says what this attempt answers, e.g. an engine dispatch; it
        is kept in the attempt's history entry. ``watch`` asks for a completion notice
        when the job ends (see ``lease_notices``); a job that already ended answers it at
        once, a running one keeps it until its finish. ``trace`` (a W3C ``traceparent``)
        is kept with the attempt's record, so a duplicate answered from it can link to the
        attempt's span (``Replay.trace``, ``InProgress.trace``).
        """
        step = operations.claim(
            self._core, key, fingerprint, result_version, attempt_id, lease, origin, watch, trace
        )
        outcome = drive(step, self._perform)
        return self._own(outcome) if isinstance(outcome, JobRow) else outcome

    def status(self, key: str, *, handler: Handler | None = None) -> JobStatus | None:
        """The job of ``key`` with all its attempts, or None if there is none; ``handler``
        (a decorated function or its name) looks up that handler's job for ``key``."""
        step = operations.status(self._core, key, handler)
        return drive(step, self._perform)

    def resolve(
        self,
        key: str,
        action: str,
        *,
        reason: str,
        actor: str | None = None,
        force: bool = False,
        result: Any = NO_RESULT,
        handler: Handler | None = None,
    ) -> JobStatus:
        """An operator's decision on ``key``'s job: ``action`` ``reuse`` (its committed
        result, or ``result``), ``redo`` (the next claim runs the work again) or
        ``terminate`` (a terminal failure). Fenced: the fence is bumped, so an attempt still
        running can never commit. Recorded in the event log with ``reason``, ``actor``
        (default: the OS user at this host), the time and the state before. A job whose
        lease is live is refused unless ``force``. Sent once, never resent: after a
        ``StoreUnavailable``, read the status to see whether it was applied. With a
        decorated ``handler``, a ``reuse``'s ``result`` must replay as its return type
        (else ``InvalidResult``); given by name, the type is not known and not checked. The
        record keeps the retention its finish recorded (else this ledger's). Returns the
        job as it stands after; ``ResolutionRefused`` if nothing was written."""
        step = operations.resolve(self._core, key, action, reason, actor, force, result, handler)
        return drive(step, self._perform)

    def record_event(
        self,
        key: str,
        kind: str,
        *,
        attempt_id: str | None = None,
        fence: int | None = None,
        reason: str | None = None,
        detail: str | None = None,
        handler: Handler | None = None,
    ) -> bool:
        """Append an entry to the job's event log (``JobStatus.events``; those naming an
        attempt show in its ``AttemptInfo.events`` too): e.g. a late report from a
        superseded attempt that was refused. False, writing nothing, if there is no job."""
        step = operations.record_event(
            self._core, key, kind, attempt_id, fence, reason, detail, handler
        )
        return drive(step, self._perform)

    def lease_notices(
        self, *, owner: str, lease: Seconds = timedelta(seconds=30), limit: int = 16
    ) -> list[DueNotice]:
        """Lease up to ``limit`` of this namespace's due completion notices to ``owner``
        for ``lease``: no other deliverer gets them meanwhile. Send each, then settle it."""
        step = operations.lease_notices(self._core, owner, lease, limit)
        return drive(step, self._perform)

    def settle_notice(
        self,
        notice: DueNotice,
        status: str,
        outcome: str,
        *,
        detail: str | None = None,
        retry_in: Seconds = 0,
        tried: bool = True,
    ) -> bool:
        """Record how a delivery ended: ``delivered``, ``dropped`` (never to be taken), or
        ``pending`` to try again after ``retry_in``. ``tried=False``: the notice was not
        sent (this process may not send it) and is given back, pending, its lease not
        counted as a try. False if the lease was lost first."""
        step = operations.settle_notice(
            self._core, notice, status, outcome, detail, retry_in, tried
        )
        return drive(step, self._perform)

    def jobs(
        self,
        *,
        state: JobState | str | tuple[JobState | str, ...] | None = None,
        dangling: bool = False,
        older_than: Seconds | None = None,
        result_version: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> JobList:
        """A page of this namespace's jobs, without their attempts: those in ``state`` (one
        or several), ``dangling`` ones (``processing`` with the lease run out: the owner is
        gone), those not updated for ``older_than``, of ``result_version``; every filter
        given must hold. Pass the page's ``cursor`` as ``after`` for the next page."""
        step = operations.jobs(
            self._core, state, dangling, older_than, result_version, after, limit
        )
        return drive(step, self._perform)

    def drill(
        self, *, page: int = 1000, progress: Callable[[int], None] | None = None
    ) -> DrillReport:
        """The drill report of this namespace: every job's record checked against the
        invariants (``broken`` must be empty) and the recovery counted: dangling jobs,
        attempts, takeovers, refused writes, resolutions, notices and, with an output store,
        orphan outputs. Reads every job whole, ``page`` jobs a store read (one ``status``
        a job on a store without ``list_statuses``); ``progress`` is told each page's count."""
        step = operations.drill(self._core, self.outputs, page, progress)
        return drive(step, self._perform)

    def purge(
        self,
        *,
        limit: int = 1000,
        after: str | None = None,
        dry_run: bool = False,
        dangling_after: Seconds | None = None,
    ) -> PurgeReport:
        """Delete up to ``limit`` of this namespace's records past retention: ended jobs
        whose retention passed, and ``processing`` jobs whose lease ran out at least
        ``dangling_after`` ago (default: the ledger's retention). A record with a pending
        completion notice is kept (``kept_notices``); the key's fences go on from the
        deleted record's. Pass the report's ``cursor`` as ``after`` until it is None;
        ``dry_run`` counts without deleting. One store call."""
        step = operations.purge(self._core, limit, after, dry_run, dangling_after)
        return drive(step, self._perform)

    def audit(self, key: str, *, handler: Handler | None = None) -> OutputAudit:
        """Every output object of ``key``: who wrote it, committed, in flight or orphan;
        ``handler`` (a decorated function or its name) audits that handler's job."""
        step = operations.audit(self._core, self.outputs, key, handler)
        return drive(step, self._perform)

    def collect_orphans(self, *, grace: Seconds = timedelta(hours=1)) -> CollectReport:
        """Delete this namespace's orphan objects older than ``grace``: objects this job
        store provably wrote from attempts that ended without committing them. Never a
        committed output of a retained job, never an object it cannot account for (those
        are reported as ``unknown``). Idempotent; safe to run from several processes."""
        step = operations.collect_orphans(self._core, self.outputs, grace)
        return drive(step, self._perform)

    def verify(self, ref: OutputRef) -> None:
        """Read the object behind ``ref``; ``ChecksumMismatch`` if it is not what was written."""
        drive(operations.verify(self._core, self.outputs, ref), self._perform)

    def publish(self, key: str, *, handler: Handler | None = None) -> list[OutputRef]:
        """Copy the committed outputs of ``key`` to their canonical keys (write-once);
        ``handler`` publishes that decorated handler's job."""
        step = operations.publish(self._core, self.outputs, key, handler)
        return drive(step, self._perform)

    def _wrap(self, spec: IdempotentSpec) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(spec.fn):
            threaded = self._threaded

            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                return await threaded.run(spec, args, kwargs)

            return async_wrapper

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return drive(call(self._core, spec, args, kwargs, {}), self._perform)

        return wrapper

    @functools.cached_property
    def _threaded(self) -> AsyncLedger:
        """This ledger for ``async def`` handlers: the store's calls in a worker thread."""
        threaded = AsyncLedger.__new__(AsyncLedger)
        threaded._setup(ThreadedAsyncStore(self.store), self.config, self.outputs, self._core.clock)
        return threaded

    def _own(self, row: JobRow) -> Claim:
        return Claim(self._core, self.store, row, self.outputs)

    def _perform(self, action: Action) -> Any:
        # The claims in actions are those this ledger made (``Own``): ``Claim()`` says so
        match action:
            case SendClaim(request):
                return resend_once(lambda: self.store.claim(request))
            case Own(row):
                return self._own(row)
            case Run(Claim() as claim, spec, args, kwargs):
                token = current_claim.set(claim)
                try:
                    if spec.heartbeat is None:
                        return spec.fn(*args, **kwargs)
                    watch = self.heartbeats.start(claim, spec.heartbeat)
                    try:
                        return spec.fn(*args, **kwargs)
                    finally:
                        self.heartbeats.stop(watch)
                finally:
                    current_claim.reset(token)
            case Finish(Claim() as claim, completion):
                return claim.finish(completion)
            case Renew(Claim() as claim):
                return claim.heartbeat()
            case Sleep(seconds):
                self._core.clock.sleep(seconds)
                return None
            case StoreCall():
                return action.on(self.store)
            case Blocking(fn, args):
                return fn(*args)
        raise TypeError(f"{action!r} is no action a Ledger performs")

    def close(self) -> None:
        self.heartbeats.close()
        self.store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncLedger(_LedgerBase[AsyncStore]):
    """The asyncio twin of ``Ledger``; ``store`` is an ``AsyncStore`` or a URL."""

    def _open(self, url: str) -> AsyncStore:
        return open_async_store(url)

    def _setup(
        self, store: AsyncStore, config: LedgerConfig, outputs: OutputStore | None, clock: Clock
    ) -> None:
        super()._setup(store, config, outputs, clock)
        self.heartbeats = AsyncHeartbeats(clock)  # renews the leases of running handlers

    async def claim(
        self,
        key: str,
        *,
        fingerprint: str | None = None,
        result_version: str | None = None,
        attempt_id: str | None = None,
        lease: Seconds | None = None,
        origin: Any = None,
        watch: Watch | None = None,
        trace: str | None = None,
    ) -> AsyncClaimOutcome:
        step = operations.claim(
            self._core, key, fingerprint, result_version, attempt_id, lease, origin, watch, trace
        )
        outcome = await drive_async(step, self._perform)
        return self._own(outcome) if isinstance(outcome, JobRow) else outcome

    async def status(self, key: str, *, handler: Handler | None = None) -> JobStatus | None:
        step = operations.status(self._core, key, handler)
        return await drive_async(step, self._perform)

    async def resolve(
        self,
        key: str,
        action: str,
        *,
        reason: str,
        actor: str | None = None,
        force: bool = False,
        result: Any = NO_RESULT,
        handler: Handler | None = None,
    ) -> JobStatus:
        step = operations.resolve(self._core, key, action, reason, actor, force, result, handler)
        return await drive_async(step, self._perform)

    async def record_event(
        self,
        key: str,
        kind: str,
        *,
        attempt_id: str | None = None,
        fence: int | None = None,
        reason: str | None = None,
        detail: str | None = None,
        handler: Handler | None = None,
    ) -> bool:
        step = operations.record_event(
            self._core, key, kind, attempt_id, fence, reason, detail, handler
        )
        return await drive_async(step, self._perform)

    async def lease_notices(
        self, *, owner: str, lease: Seconds = timedelta(seconds=30), limit: int = 16
    ) -> list[DueNotice]:
        step = operations.lease_notices(self._core, owner, lease, limit)
        return await drive_async(step, self._perform)

    async def settle_notice(
        self,
        notice: DueNotice,
        status: str,
        outcome: str,
        *,
        detail: str | None = None,
        retry_in: Seconds = 0,
        tried: bool = True,
    ) -> bool:
        step = operations.settle_notice(
            self._core, notice, status, outcome, detail, retry_in, tried
        )
        return await drive_async(step, self._perform)

    async def jobs(
        self,
        *,
        state: JobState | str | tuple[JobState | str, ...] | None = None,
        dangling: bool = False,
        older_than: Seconds | None = None,
        result_version: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> JobList:
        step = operations.jobs(
            self._core, state, dangling, older_than, result_version, after, limit
        )
        return await drive_async(step, self._perform)

    async def drill(
        self, *, page: int = 1000, progress: Callable[[int], None] | None = None
    ) -> DrillReport:
        step = operations.drill(self._core, self.outputs, page, progress)
        return await drive_async(step, self._perform)

    async def purge(
        self,
        *,
        limit: int = 1000,
        after: str | None = None,
        dry_run: bool = False,
        dangling_after: Seconds | None = None,
    ) -> PurgeReport:
        step = operations.purge(self._core, limit, after, dry_run, dangling_after)
        return await drive_async(step, self._perform)

    async def audit(self, key: str, *, handler: Handler | None = None) -> OutputAudit:
        step = operations.audit(self._core, self.outputs, key, handler)
        return await drive_async(step, self._perform)

    async def collect_orphans(self, *, grace: Seconds = timedelta(hours=1)) -> CollectReport:
        step = operations.collect_orphans(self._core, self.outputs, grace)
        return await drive_async(step, self._perform)

    async def verify(self, ref: OutputRef) -> None:
        await drive_async(operations.verify(self._core, self.outputs, ref), self._perform)

    async def publish(self, key: str, *, handler: Handler | None = None) -> list[OutputRef]:
        step = operations.publish(self._core, self.outputs, key, handler)
        return await drive_async(step, self._perform)

    def _accepts(self, fn: Callable[..., Any]) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise ConfigError(
                f"AsyncLedger.idempotent needs an async def handler, got {fn.__qualname__};"
                " use Ledger.idempotent for plain functions"
            )

    def _wrap(self, spec: IdempotentSpec) -> Callable[..., Any]:
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            return await self.run(spec, args, kwargs)

        return wrapper

    async def run(
        self,
        spec: IdempotentSpec,
        args: tuple[Any, ...],
        kwargs: dict[str, Any] | None = None,
        *,
        attempt_id: str | None = None,
        origin: Any = None,
        lease: Seconds | None = None,
    ) -> Any:
        """Call ``spec``'s handler with ``args`` as its decorated function does (claim,
        run, commit; a duplicate replays), every claim it makes taking ``attempt_id``,
        ``origin`` and ``lease`` as ``claim`` does: what an integration uses to run a
        handler for a dispatch it has an id and an origin for."""
        options = {"attempt_id": attempt_id, "origin": origin, "lease": lease}
        return await drive_async(call(self._core, spec, args, kwargs or {}, options), self._perform)

    async def run_claimed(
        self,
        spec: IdempotentSpec,
        claim: AsyncClaim,
        args: tuple[Any, ...],
        run: telemetry.RunSpan | None = None,
        *,
        persist: bool = False,
    ) -> Any:
        """Run ``spec``'s handler under ``claim``, a claim this caller was granted, as a
        decorated call runs it (heartbeat, commit or recorded failure); ``run`` is the
        span the claim was made under, if the caller opened one. ``persist``: a finish that
        does not reach the store is tried again while the lease lasts (a run nobody waits
        on)."""
        return await drive_async(
            resumed(self._core, spec, claim, args, run, persist), self._perform
        )

    def resume(self, key: str, *, job_id: str, attempt_id: str, fence: int) -> AsyncClaim:
        """The claim of attempt ``attempt_id`` at ``fence`` of ``key``'s job, known by
        reference only (a completion token's): no store call; every write through it is
        fenced as usual, so a superseded attempt writes nothing. Its lease, until its first
        heartbeat, is taken as this ledger's default."""
        return AsyncClaim.resume(
            self._core,
            self.store,
            job_id=job_id,
            key=key,
            attempt_id=attempt_id,
            fence=fence,
            outputs=self.outputs,
        )

    def _own(self, row: JobRow) -> AsyncClaim:
        return AsyncClaim(self._core, self.store, row, self.outputs)

    async def _perform(self, action: Action) -> Any:
        # The claims in actions are those this ledger made (``Own``): ``AsyncClaim()`` says so
        match action:
            case SendClaim(request):
                return await resend_once_async(lambda: self.store.claim(request))
            case Own(row):
                return self._own(row)
            case Run(AsyncClaim() as claim, spec, args, kwargs):
                return await self._run_handler(claim, spec, args, kwargs)
            case Finish(AsyncClaim() as claim, completion):
                return await claim.finish(completion)
            case Renew(AsyncClaim() as claim):
                return await claim.heartbeat()
            case Sleep(seconds):
                await self._core.clock.asleep(seconds)
                return None
            case StoreCall():
                return await action.on_async(self.store)
            case Blocking(fn, args):
                return await asyncio.to_thread(fn, *args)
        raise TypeError(f"{action!r} is no action an AsyncLedger performs")

    async def _run_handler(
        self, claim: AsyncClaim, spec: IdempotentSpec, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """The handler under ``claim``, current to it, with its heartbeat."""
        token = current_claim.set(claim)
        try:
            if spec.heartbeat is None:
                return await spec.fn(*args, **kwargs)
            watch = self.heartbeats.start(claim, spec.heartbeat)
            try:
                return await spec.fn(*args, **kwargs)
            finally:
                if (renewal := self.heartbeats.stop(watch)) is not None:
                    await settled(renewal)
        finally:
            current_claim.reset(token)

    async def close(self) -> None:
        await self.store.close()

    async def __aenter__(self) -> AsyncLedger:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
