"""The ledger's operations besides the decorated call, each one I/O-free step.

Each function here is a generator in the style of ``call``: it checks what the caller
passed, yields plain actions (a ``StoreCall`` to the job store, one class per operation,
``Blocking`` for the output store's work) and receives what came of each. ``Ledger`` and
``AsyncLedger`` drive them with ``drive`` / ``drive_async``, so every operation's checks,
order of calls and spans are written once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from .. import _telemetry as telemetry
from .._config import Seconds, to_us
from .._errors import ConfigError, UsageError
from .._housekeeping import (
    AuditEntry,
    CollectReport,
    OutputAudit,
    classify,
    job_folder,
    publish_ref,
    sort_namespace,
    unknown_entry,
    verify_ref,
)
from .._idempotent import Handler, stored_key
from .._keys import validate_result_version, validate_store_id
from .._listing import JobList, check_query
from .._namespace_audit import DrillReport, NamespaceAudit
from .._outcomes import Conflict, InProgress, Replay
from .._outputs import OutputStore, StoredObject
from .._records import JobRow, JobState, JobStatus, OutputRef, at_us
from .._rules.core import LedgerCore
from .._rules.events import encode_event
from .._rules.notices import DueNotice, Watch
from .._rules.purge import PurgeReport, check_purge
from .._rules.resolution import refusal_of, resolution_request, result_type
from .._store import JobQuery, PurgeRequest, StatusPage
from .call import Blocking, Step, deciding
from .store_calls import (
    LeaseNotices,
    ListJobs,
    Purge,
    ReadStatus,
    ReadStatuses,
    ReadStoreId,
    RecordEvent,
    Resolve,
    SettleNotice,
)

__all__ = [
    "audit",
    "claim",
    "collect_orphans",
    "drill",
    "jobs",
    "lease_notices",
    "publish",
    "purge",
    "record_event",
    "resolve",
    "settle_notice",
    "status",
    "verify",
]

States = JobState | str | tuple[JobState | str, ...] | None


def claim(
    core: LedgerCore,
    key: str,
    fingerprint: str | None,
    result_version: str | None,
    attempt_id: str | None,
    lease: Seconds | None,
    origin: Any,
    watch: Watch | None,
    trace: str | None,
) -> Step[JobRow | Replay | InProgress | Conflict]:
    """An explicit claim: the row granted (the ledger makes it its claim), or the ``Replay`` /
    ``InProgress`` / ``Conflict``."""
    request = core.claim_request(
        key,
        fingerprint=fingerprint,
        result_version=result_version,
        attempt_id=attempt_id,
        lease=lease,
        origin=origin,
        watch=watch,
        trace=trace or telemetry.current_traceparent(),
    )
    return (yield from deciding(core, request))


def status(core: LedgerCore, key: str, handler: Handler | None) -> Step[JobStatus | None]:
    """The job of ``key`` with all its attempts, or None."""
    job_id = core.job_id(stored_key(key, handler))
    return core.status((yield ReadStatus(job_id)))


def resolve(
    core: LedgerCore,
    key: str,
    action: str,
    reason: str,
    actor: str | None,
    force: bool,
    result: Any,
    handler: Handler | None,
) -> Step[JobStatus]:
    """An operator's decision on ``key``'s job, sent once; the job as it stands after."""
    stored, config = stored_key(key, handler), core.config
    resolution = resolution_request(
        action,
        reason=reason,
        actor=actor,
        force=force,
        result=result,
        retention_us=config.retention_us,
        max_result_bytes=config.max_result_bytes,
        returns=result_type(handler),
    )
    job_id = core.job_id(stored)
    answer = yield Resolve(job_id, resolution)
    if not answer.ok:
        raise refusal_of(answer, resolution, namespace=core.namespace, key=stored)
    found = core.status((yield ReadStatus(job_id)))
    assert found is not None  # resolved jobs are kept for a retention
    return found


def record_event(
    core: LedgerCore,
    key: str,
    kind: str,
    attempt_id: str | None,
    fence: int | None,
    reason: str | None,
    detail: str | None,
    handler: Handler | None,
) -> Step[bool]:
    """An entry appended to the job's event log; False if there is no job."""
    event = encode_event(kind, attempt_id=attempt_id, fence=fence, reason=reason, detail=detail)
    job_id = core.job_id(stored_key(key, handler))
    recorded: bool = yield RecordEvent(job_id, event)
    return recorded


def lease_notices(
    core: LedgerCore, owner: str, lease: Seconds, limit: int
) -> Step[list[DueNotice]]:
    """Up to ``limit`` due completion notices, leased to ``owner``."""
    lease_us = to_us(lease, "lease")
    batch = yield LeaseNotices(core.namespace, owner, lease_us, _limit(limit))
    return core.due_notices(batch, owner)


def settle_notice(
    core: LedgerCore,
    notice: DueNotice,
    status: str,
    outcome: str,
    detail: str | None,
    retry_in: Seconds,
    tried: bool = True,
) -> Step[bool]:
    """How a delivery ended; False if the lease was lost first."""
    settlement = core.settlement(notice, status, outcome, detail, retry_in, tried)
    settled: bool = yield SettleNotice(notice.job_id, settlement)
    return settled


def jobs(
    core: LedgerCore,
    state: States,
    dangling: bool,
    older_than: Seconds | None,
    result_version: str | None,
    after: str | None,
    limit: int,
) -> Step[JobList]:
    """A page of the namespace's jobs, without their attempts."""
    wanted = () if state is None else (state,) if isinstance(state, str) else state
    try:
        states = tuple(JobState(s) for s in wanted)
    except ValueError:
        names = ", ".join(s.value for s in JobState)
        raise UsageError(f"state must be one of {names}, got {state!r}") from None
    query = JobQuery(
        namespace=core.namespace,
        states=states,
        dangling=dangling,
        idle_us=None if older_than is None else to_us(older_than, "older_than", zero=True),
        result_version=None if result_version is None else validate_result_version(result_version),
        after=after,
        limit=limit,
    )
    return JobList.build((yield ListJobs(check_query(query))))


def drill(
    core: LedgerCore,
    outputs: OutputStore | None,
    page: int,
    progress: Callable[[int], None] | None,
) -> Step[DrillReport]:
    """The drill report of the namespace: every job read whole, ``page`` jobs a read."""
    query = check_query(JobQuery(namespace=core.namespace, limit=page))
    report = NamespaceAudit(core.namespace, timedelta(microseconds=core.config.retention_us))
    while True:
        read = yield ReadStatuses(query)
        _add_page(core, report, read, progress)
        if read.cursor is None:
            break
        query = replace(query, after=read.cursor)
    if outputs is not None:
        store_id, folders, _ = yield from _namespace(core, outputs)
        audits = []
        for job_id, found in folders.items():
            audits.append((yield from _job_audit(core, store_id, job_id, found)))
        report.add_outputs(audits)
    return report.report(at_us(read.now))


def purge(
    core: LedgerCore, limit: int, after: str | None, dry_run: bool, dangling_after: Seconds | None
) -> Step[PurgeReport]:
    """Delete up to ``limit`` records past retention (one store call)."""
    if not isinstance(dry_run, bool):
        raise UsageError(f"dry_run must be True or False, got {dry_run!r}")
    dangling_us = (
        core.config.retention_us
        if dangling_after is None
        else to_us(dangling_after, "dangling_after", zero=True)
    )
    request = check_purge(
        PurgeRequest(
            namespace=core.namespace,
            dangling_after_us=dangling_us,
            limit=limit,
            after=after,
            dry_run=dry_run,
        )
    )
    return PurgeReport.build((yield Purge(request)), dry_run=dry_run)


def audit(
    core: LedgerCore, outputs: OutputStore | None, key: str, handler: Handler | None
) -> Step[OutputAudit]:
    """Every output object of ``key``'s job, classified."""
    store, job_id = _output_store(outputs), core.job_id(stored_key(key, handler))
    objects = yield Blocking(_listed, (store, job_folder(core.namespace, job_id)))
    found = core.status((yield ReadStatus(job_id)))
    return _audit(core, (yield ReadStoreId()), job_id, found, objects)


def collect_orphans(
    core: LedgerCore, outputs: OutputStore | None, grace: Seconds
) -> Step[CollectReport]:
    """Delete the namespace's orphan objects older than ``grace``."""
    store, wait = (
        _output_store(outputs),
        timedelta(microseconds=to_us(grace, "grace", zero=True)),
    )
    with telemetry.orphans_span(core.namespace) as span:
        store_id, folders, found = yield from _namespace(core, store)
        for job_id, objects in folders.items():
            job_audit = yield from _job_audit(core, store_id, job_id, objects)
            for entry in _collect(job_audit, wait, found):
                yield Blocking(store.delete, (entry.key,))
        report = found.report(len(folders))
        telemetry.collected(span, report)
        return report


def verify(core: LedgerCore, outputs: OutputStore | None, ref: OutputRef) -> Step[None]:
    """Read the object behind ``ref`` back; ``ChecksumMismatch`` if it is not what was written."""
    store = _output_store(outputs)
    with telemetry.output_span("verify", core.namespace, ref.name):
        yield Blocking(verify_ref, (store, ref))


def publish(
    core: LedgerCore, outputs: OutputStore | None, key: str, handler: Handler | None
) -> Step[list[OutputRef]]:
    """Copy the committed outputs of ``key`` to their canonical keys."""
    store = _output_store(outputs)
    committed = _committed(stored_key(key, handler), (yield from status(core, key, handler)))
    published = []
    for ref in committed.outputs:
        with telemetry.output_span("publish", core.namespace, ref.name):
            published.append((yield Blocking(publish_ref, (store, committed, ref))))
    return published


@dataclass
class _Found:
    """What a collection run found so far."""

    deleted: list[AuditEntry]
    young: list[AuditEntry]
    unknown: list[AuditEntry]

    def report(self, jobs: int) -> CollectReport:
        return CollectReport(
            deleted=tuple(self.deleted),
            kept_young=tuple(self.young),
            jobs=jobs,
            unknown=tuple(self.unknown),
        )


def _namespace(
    core: LedgerCore, outputs: OutputStore
) -> Step[tuple[str, dict[str, list[StoredObject]], _Found]]:
    """The namespace's objects listed and sorted against this job store: its id, the job
    folders to read, and what was found so far (every other object is unknown)."""
    listed = yield Blocking(_listed, (outputs, f"{core.namespace}/"))
    store_id = validate_store_id((yield ReadStoreId()))
    folders, others = sort_namespace(core.namespace, store_id, listed)
    now = _now(core)
    found = _Found([], [], [unknown_entry(core.namespace, store_id, o, now) for o in others])
    return store_id, folders, found


def _job_audit(
    core: LedgerCore, store_id: str, job_id: str, objects: list[StoredObject]
) -> Step[OutputAudit]:
    """A job's output objects against its record."""
    found = core.status((yield ReadStatus(job_id)))
    return _audit(core, store_id, job_id, found, objects)


def _now(core: LedgerCore) -> datetime:
    """The ledger's wall clock (``Clock``): an output's age where no record gives the time."""
    return datetime.fromtimestamp(core.clock.time_ns() / 1e9, UTC)


def _listed(outputs: OutputStore, prefix: str) -> list[StoredObject]:
    return list(outputs.list(prefix))


def _output_store(outputs: OutputStore | None) -> OutputStore:
    if outputs is None:
        raise ConfigError("this ledger has no output store: pass outputs=… to the ledger")
    return outputs


def _audit(
    core: LedgerCore,
    store_id: str,
    job_id: str,
    status: JobStatus | None,
    objects: list[StoredObject],
) -> OutputAudit:
    now = status.store_time if status else _now(core)
    return classify(core.namespace, validate_store_id(store_id), job_id, status, objects, now)


def _collect(audit: OutputAudit, grace: timedelta, found: _Found) -> list[AuditEntry]:
    """Sort a job's orphans into those to delete now and those still in their grace."""
    due = [e for e in audit.orphans if e.age is None or e.age >= grace]
    found.young.extend(e for e in audit.orphans if e not in due)
    found.deleted.extend(due)
    found.unknown.extend(audit.unknown)
    return due


def _add_page(
    core: LedgerCore,
    report: NamespaceAudit,
    page: StatusPage,
    progress: Callable[[int], None] | None,
) -> None:
    for found in page.statuses:
        status = core.status(found)
        assert status is not None  # a found job
        report.add(status)
    if progress is not None:
        progress(len(page.statuses))


def _limit(limit: int) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit <= 1000:
        raise UsageError(f"limit must be an int from 1 to 1000, got {limit!r}")
    return limit


def _committed(key: str, status: JobStatus | None) -> JobStatus:
    if status is None or status.state is not JobState.SUCCEEDED:
        raise UsageError(f"{key!r} has no committed result to publish")
    return status
