"""Retention on Redis: no expiry while a job runs or a notice of it is pending; after it
finishes the record expires never before ``retain_until`` and its history never before the
record; fences continue after the record is gone."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import redis

from rill_executor import AttemptOutcome, Claim, Ledger, Replay, fingerprint_of
from rill_executor.store import Watch
from rill_executor_redis import job_keys
from rill_executor_redis.testing import RedisServer
from tests.clocks import STORE_CLOCK

from .conftest import QUIET, AnyStore, with_query

MakeStore = Callable[[str], AnyStore]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _setup(
    make_store: MakeStore, server: RedisServer, retention: float
) -> tuple[Ledger, redis.Redis]:
    store = make_store(with_query(server.url, QUIET))
    ledger = Ledger(store, namespace=f"r{uuid.uuid4().hex[:8]}", lease=0.05, retention=retention)
    return ledger, server.client()


def _expire_times(client: redis.Redis, job_id: str) -> list[int]:
    """PEXPIRETIME of (record, history): -1 no expiry, -2 no key."""
    return [client.pexpiretime(name) for name in job_keys(job_id)]


def test_expiry_follows_the_lifecycle(make_store: MakeStore, private_redis: RedisServer) -> None:
    ledger, client = _setup(make_store, private_redis, retention=3600)
    claim = ledger.claim("k", lease=30)
    assert isinstance(claim, Claim)
    assert _expire_times(client, claim.job_id) == [-1, -1]  # running: never expires

    claim.fail("flaky", retryable=True)
    status = ledger.status("k")
    assert status is not None and status.retain_until is not None
    job_at, history_at = _expire_times(client, claim.job_id)
    retain_until_us = (status.retain_until - EPOCH) // timedelta(microseconds=1)
    assert 0 <= job_at * 1000 - retain_until_us < 1000  # never before retain_until
    assert history_at * 1000 >= retain_until_us + 3600 * 1_000_000  # one retention longer

    again = ledger.claim("k", lease=30)  # a retryable failure runs again: no expiry
    assert isinstance(again, Claim)
    assert _expire_times(client, claim.job_id) == [-1, -1]


@pytest.mark.real_clock(STORE_CLOCK)
def test_after_the_record_expires_the_key_runs_again_with_a_higher_fence(
    make_store: MakeStore, private_redis: RedisServer
) -> None:
    ledger, client = _setup(make_store, private_redis, retention=0.2)
    first = ledger.claim("k", fingerprint=fingerprint_of(1))
    assert isinstance(first, Claim)
    first.commit("old")
    job, history = job_keys(first.job_id)
    deadline = time.monotonic() + 10
    while client.exists(job) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert client.exists(job) == 0 and client.exists(history) == 1
    assert ledger.status("k") is None
    again = ledger.claim("k", fingerprint=fingerprint_of(2))  # not a conflict: retention over
    assert isinstance(again, Claim) and again.fence == first.fence + 1
    status = ledger.status("k")
    assert status is not None
    assert [(a.attempt_id, a.outcome) for a in status.attempts] == [
        (first.attempt_id, AttemptOutcome.SUCCEEDED),  # the history kept what happened
        (again.attempt_id, AttemptOutcome.RUNNING),
    ]
    assert client.pexpiretime(history) == -1  # running again: nothing expires


@pytest.mark.real_clock(STORE_CLOCK)
def test_a_record_past_retain_until_is_taken_over_with_its_history(
    make_store: MakeStore, private_redis: RedisServer
) -> None:
    """retain_until, on the server's clock, decides; a key Redis has not expired yet (here
    made persistent) no longer binds once it has passed."""
    ledger, client = _setup(make_store, private_redis, retention=0.2)
    first = ledger.claim("k")
    assert isinstance(first, Claim)
    first.commit("old")
    job, history = job_keys(first.job_id)
    client.persist(job)
    client.persist(history)
    assert isinstance(ledger.claim("k"), Replay)
    time.sleep(0.3)
    again = ledger.claim("k")
    assert isinstance(again, Claim) and again.fence == first.fence + 1
    status = ledger.status("k")
    assert status is not None
    assert [(a.attempt_id, a.outcome) for a in status.attempts] == [
        (first.attempt_id, AttemptOutcome.SUCCEEDED),
        (again.attempt_id, AttemptOutcome.RUNNING),
    ]


@pytest.mark.real_clock(STORE_CLOCK)
def test_a_pending_notice_holds_the_expiry_back_until_it_settles(
    make_store: MakeStore, private_redis: RedisServer
) -> None:
    ledger, client = _setup(make_store, private_redis, retention=0.2)
    claim = ledger.claim("k", lease=30, watch=Watch("task", {"n": 1}))
    assert isinstance(claim, Claim)
    claim.commit("done")  # its notice is queued: no expiry, though the retention is short
    assert _expire_times(client, claim.job_id) == [-1, -1]
    time.sleep(0.3)  # past retain_until
    status = ledger.status("k")
    assert status is not None and [n.status for n in status.notices] == ["pending"]
    report = ledger.purge()
    assert (report.purged, report.kept_notices) == (0, 1)

    (notice,) = ledger.lease_notices(owner="d", lease=30)
    assert ledger.settle_notice(notice, "delivered", "ok")
    job, history = job_keys(claim.job_id)
    assert client.exists(job) == 0  # its retention had passed: it goes at once
    assert client.pexpiretime(history) > 0  # the history, with the fence, a retention later
    again = ledger.claim("k", lease=30)
    assert isinstance(again, Claim) and again.fence == claim.fence + 1


def test_a_watch_answered_from_an_ended_job_holds_its_expiry_back(
    make_store: MakeStore, private_redis: RedisServer
) -> None:
    ledger, client = _setup(make_store, private_redis, retention=3600)
    claim = ledger.claim("k", lease=30)
    assert isinstance(claim, Claim)
    claim.commit("done")
    expiries = _expire_times(client, claim.job_id)
    assert min(expiries) > 0
    replay = ledger.claim("k", watch=Watch("task", {"n": 2}))  # answered at once: a notice
    assert isinstance(replay, Replay)
    assert _expire_times(client, claim.job_id) == [-1, -1]
    (notice,) = ledger.lease_notices(owner="d", lease=30)
    assert ledger.settle_notice(notice, "dropped", "refused")
    assert _expire_times(client, claim.job_id) == expiries  # as the finish set them


def test_a_resent_dispatch_already_answered_keeps_the_expiry(
    make_store: MakeStore, private_redis: RedisServer
) -> None:
    ledger, client = _setup(make_store, private_redis, retention=3600)
    claim = ledger.claim("k", lease=30, watch=Watch("task", {"n": 1}))
    assert isinstance(claim, Claim)
    claim.commit("done")
    (notice,) = ledger.lease_notices(owner="d", lease=30)
    assert ledger.settle_notice(notice, "delivered", "ok")
    expiries = _expire_times(client, claim.job_id)
    assert min(expiries) > 0
    resent = ledger.claim("k", watch=Watch("task", {"n": 1}))  # no second notice
    assert isinstance(resent, Replay)
    assert _expire_times(client, claim.job_id) == expiries
