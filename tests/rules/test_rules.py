"""Every case of the rule table (``cases.py``) replayed on every store's real implementation:
the memory store (the Python rules), PostgreSQL (its statements and ``rill_claim``), SQLite
and MariaDB (the client-decided flows in transactions), Redis (the Lua scripts).

The job of each case is built by real operations, each on the store's clock standing at
the case's start (the store's own now, read once) plus the step's offset
(``with_frozen_clock``): nothing waits, and every time is exact, so a rule that decides at
a lease's or a retention's very end (``<`` against ``<=``) is held to it on every store.
A time in a row is checked to the microsecond: the instant of the step it names plus the
seconds written.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from rill_executor._codec import encode_error
from rill_executor._keys import job_id
from rill_executor._rules.events import encode_event, split_log
from rill_executor._rules.resolution import resolution_error
from rill_executor.store import (
    AttemptRef,
    ClaimRequest,
    Completion,
    JobState,
    MemoryStore,
    NoticeSettlement,
    PurgeRequest,
    Resolution,
    Store,
    StoreStatus,
)
from rill_executor.testing import with_frozen_clock

from .cases import CASES
from .table import (
    DANGLING,
    RESOLVE_RETENTION,
    RETENTION,
    At,
    Case,
    Claim,
    Commit,
    Ev,
    Event,
    Fail,
    Heartbeat,
    LeaseNotices,
    Notice,
    Purge,
    Resolve,
    Row,
    Settle,
    Step,
    Try,
)

S = 1_000_000  # µs a second


STORES = ("memory", "postgres", "sqlite", "mariadb", "redis")


def _open(kind: str, request: pytest.FixtureRequest) -> Store:
    if kind == "memory":
        return MemoryStore()
    if kind == "redis":
        from rill_executor_redis import RedisStore

        return RedisStore.from_url(request.getfixturevalue("redis_url"))
    from rill_executor_sql import SqlStore

    return SqlStore(request.getfixturevalue(f"{kind}_url"), upgrade=True)


@pytest.fixture(scope="module", params=STORES)
def store(request: pytest.FixtureRequest) -> Iterator[tuple[str, Store]]:
    opened = _open(request.param, request)
    yield request.param, opened
    opened.close()


@dataclass
class Run:
    """One case on one store: its job, and the instant the case starts at (µs, the store's
    time when it began); step ``i`` happens at that instant plus its offset, exactly."""

    store: Store
    namespace: str = field(default_factory=lambda: f"rules-{uuid.uuid4().hex[:12]}")
    offsets: list[float] = field(default_factory=list)
    base: int = 0

    def __post_init__(self) -> None:  # the store's own now: one read of an empty outbox
        self.base = self.store.lease_notices(self.namespace, "nobody", 1, 1).now

    @property
    def job_id(self) -> str:
        return job_id(self.namespace, "k")

    def instant(self, offset: float) -> int:
        return self.base + round(offset * S)

    def at(self, offset: float) -> Store:
        """The store on a clock standing at the case's start plus ``offset`` seconds."""
        return with_frozen_clock(self.store, self.instant(offset))


def _watch(watch: str | None) -> str | None:
    return None if watch is None else json.dumps({"id": watch, "target": {"task": watch}})


def _perform(store: Store, run: Run, step: Step) -> tuple[Any, int | None]:
    """Do ``step``: its outcome as the table writes it, and the store's now if it says."""
    job = run.job_id
    if isinstance(step, Claim):
        answer = store.claim(
            ClaimRequest(
                job,
                run.namespace,
                "k",
                step.fingerprint,
                step.version,
                step.attempt,
                round(step.lease * S),
                watch=_watch(step.watch),
            )
        )
        return answer.ok, answer.now
    if isinstance(step, Heartbeat):
        answer = store.heartbeat(AttemptRef(job, step.attempt, step.fence), round(step.lease * S))
        return answer.ok, answer.now
    if isinstance(step, Commit | Fail):
        answer = store.finish(AttemptRef(job, step.attempt, step.fence), _completion(step))
        return answer.ok, answer.now
    if isinstance(step, Resolve):
        answer = store.resolve(job, _resolution(step))
        return answer.ok, answer.now
    if isinstance(step, LeaseNotices):
        batch = store.lease_notices(run.namespace, step.owner, round(step.lease * S), 10)
        leased = [json.loads(n.notice) for n in batch.notices]
        return tuple((n["watch"], n["state"], int(n["fence"])) for n in leased), batch.now
    if isinstance(step, Settle):
        settlement = NoticeSettlement(step.notice, step.owner, step.status, "ok")
        return store.settle_notice(job, settlement), None
    if isinstance(step, Purge):
        page = store.purge(PurgeRequest(run.namespace, round(DANGLING * S), dry_run=step.dry_run))
        return (page.purged, page.kept_notices), page.now
    assert isinstance(step, Event)
    event = encode_event(
        "token_refused", attempt_id=step.attempt, fence=step.fence, reason="superseded"
    )
    return store.record_event(job, event), None


def _completion(step: Commit | Fail) -> Completion:
    retention = round(RETENTION * S)
    if isinstance(step, Commit):
        return Completion(JobState.SUCCEEDED, json.dumps(step.result), None, None, retention)
    error = encode_error("boom", retryable=step.retryable)
    return Completion(JobState.FAILED, None, error, step.retryable, retention)


def _resolution(step: Resolve) -> Resolution:
    error = None if step.action == "reuse" else resolution_error(step.action, "why (by ops)")
    result = None if step.result is None else json.dumps(step.result)
    return Resolution(
        step.action, "why", "ops", step.force, result, error, round(RESOLVE_RETENTION * S)
    )


def _time(value: int | None, want: Any, run: Run) -> Any:
    """``value`` as ``want`` (an ``At``) if it is that time, else as read (for the report)."""
    if value is None or not isinstance(want, At):
        return value
    step = len(run.offsets) - 1 if want.step == "op" else int(want.step)
    expected = run.instant(run.offsets[step]) + round(want.plus * S)
    if value == expected:
        return want
    return f"{(value - expected) / S:+.6f} s off {want}"


def _row(status: StoreStatus | None, want: Row | None, run: Run) -> Row | None:
    """The job as the table writes it, its times matched against ``want``'s."""
    if status is None:
        return None
    job, expected = status.job, want or Row("", 0)
    notices = tuple(
        Notice(
            n["watch"],
            int(n["fence"]),
            n["state"],
            n["status"],
            int(n["attempts"]),
            n["lease_owner"],
        )
        for n in json.loads(job.notices or "[]")
    )
    entries, dropped = split_log(json.loads(status.events or "[]"))
    wanted_events = list(expected.events) + [None] * len(entries)
    events = tuple(
        Ev(
            e["kind"],
            e["fence"],
            e["detail"],
            _time(int(e["at"]), w.at if w else None, run),
            (e.get("data") or {}).get("before", {}).get("lease_live"),
        )
        for e, w in zip(entries, wanted_events, strict=False)
    )
    return Row(
        state=job.state.value,
        fence=job.fence,
        owner=job.owner_attempt,
        lease=_time(job.lease_until, expected.lease, run),
        retain=_time(job.retain_until, expected.retain, run),
        retryable=job.retryable,
        result=None if job.result is None else json.loads(job.result),
        attempts=tuple(Try(a.attempt_id, a.fence, a.outcome.value) for a in status.attempts),
        notices=notices,
        watchers=tuple(sorted(json.loads(job.watchers or "{}"))),
        events=events,
        dropped=dropped,
    )


def replay(store: Store, case: Case, want: Row | None) -> tuple[Any, Row | None]:
    """``case`` on ``store``: the operation's outcome and the row it left."""
    run = Run(store)
    outcome = None
    for step in (*case.given, case.op):
        run.offsets.append(step.at)
        outcome, now = _perform(run.at(step.at), run, step)
        # 0: no now reported (PostgreSQL's answer about a job that is not there)
        assert now in (None, 0, run.instant(step.at)), f"{step} ran off the view's clock"
    status = run.at(case.op.at).status(run.job_id)
    return outcome, _row(status, want, run)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_rule(store: tuple[str, Store], case: Case) -> None:
    kind, opened = store
    row = case.row_on(kind)
    assert replay(opened, case, row) == (case.outcome, row)
