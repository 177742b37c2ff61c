"""Every case of the rule table (``cases.py``) replayed on every store's real implementation:
the memory store (the Python rules), PostgreSQL (its statements and ``rill_claim``), SQLite
and MariaDB (the client-decided flows in transactions), Redis (the Lua scripts).

The job of each case is built by real operations; the clock is moved with
``with_clock_offset`` (the store's own clock, read later by the case's offset), never waited
for. A time in a row is checked against the clock of the step it names: equal to that
step's now plus the seconds written, or, for a step whose answer carries no now (an event,
a settle), between the nows of the steps around it, each read at the step's offset.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from rill_executor._codec import encode_error
from rill_executor._events import encode_event, split_log
from rill_executor._keys import job_id
from rill_executor._resolution import resolution_error
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
from rill_executor.testing import with_clock_offset

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


class Views:
    """A store and its views on shifted clocks, one per offset, made once."""

    def __init__(self, kind: str, store: Store) -> None:
        self.kind, self.store = kind, store
        self._views: dict[float, Store] = {}

    def at(self, seconds: float) -> Store:
        if seconds not in self._views:
            self._views[seconds] = with_clock_offset(self.store, seconds)
        return self._views[seconds]

    def close(self) -> None:
        for view in self._views.values():
            view.close()
        self.store.close()


def _open(kind: str, request: pytest.FixtureRequest) -> Store:
    if kind == "memory":
        return MemoryStore()
    if kind == "redis":
        from rill_executor_redis import RedisStore

        return RedisStore.from_url(request.getfixturevalue("redis_url"))
    from rill_executor_sql import SqlStore

    return SqlStore(request.getfixturevalue(f"{kind}_url"), upgrade=True)


STORES = ("memory", "postgres", "sqlite", "mariadb", "redis")


@pytest.fixture(scope="module", params=STORES)
def views(request: pytest.FixtureRequest) -> Iterator[Views]:
    found = Views(request.param, _open(request.param, request))
    yield found
    found.close()


@dataclass
class Run:
    """One case on one store: its job, and the store's now at each step (µs, or None)."""

    namespace: str = field(default_factory=lambda: f"rules-{uuid.uuid4().hex[:12]}")
    offsets: list[float] = field(default_factory=list)
    nows: list[int | None] = field(default_factory=list)

    @property
    def job_id(self) -> str:
        return job_id(self.namespace, "k")

    def bounds(self, index: int) -> tuple[int, int]:
        """Step ``index``'s now: exact, or between its neighbours' (each moved to its offset)."""
        now = self.nows[index]
        if now is not None:
            return now, now
        shift = round(self.offsets[index] * S)
        before = [
            n - round(o * S)
            for n, o in zip(self.nows[:index], self.offsets, strict=False)
            if n is not None
        ]
        after = [
            n - round(o * S)
            for n, o in zip(self.nows[index + 1 :], self.offsets[index + 1 :], strict=True)
            if n is not None
        ]
        return (before[-1] if before else -(2**62)) + shift, (after[0] if after else 2**62) + shift


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
    index = len(run.nows) - 2 if want.step == "op" else int(want.step)
    low, high = run.bounds(index)
    plus = round(want.plus * S)
    if low + plus <= value <= high + plus:
        return want
    return f"{(value - low) / S:+.6f} s after step {want.step}'s now"


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


def replay(views: Views, case: Case, want: Row | None) -> tuple[Any, Row | None]:
    """``case`` on the store of ``views``: the operation's outcome and the row it left."""
    run = Run()
    outcome = None
    for step in (*case.given, case.op):
        run.offsets.append(step.at)
        outcome, now = _perform(views.at(step.at), run, step)
        run.nows.append(now)
    status = views.at(case.op.at).status(run.job_id)
    run.offsets.append(case.op.at)
    run.nows.append(None if status is None else status.now)
    return outcome, _row(status, want, run)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_rule(views: Views, case: Case) -> None:
    row = case.row_on(views.kind)
    assert replay(views, case, row) == (case.outcome, row)
