"""A granted claim or finish answers only a few fields and the store completes the row
from its request (``_rows.claimed_from`` / ``finished_from``): that row must be the record
exactly as the server wrote it, read back by ``status``."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable

import pytest

from rill_executor._keys import job_id
from rill_executor.store import (
    AttemptRef,
    ClaimRequest,
    Completion,
    JobRow,
    JobState,
)
from tests.clocks import STORE_CLOCK

from .conftest import QUIET, AnyStore, with_query

MakeStore = Callable[[str], AnyStore]


def _request(key: str, *, lease_us: int = 30_000_000, **extra: str | None) -> ClaimRequest:
    return ClaimRequest(
        job_id=job_id("rows", key),
        namespace="rows",
        key=key,
        fingerprint="ab" * 32,
        result_version=extra.pop("result_version", None),
        attempt_id=uuid.uuid4().hex,
        lease_us=lease_us,
        **extra,
    )


def _stored(store: AnyStore, job: str) -> JobRow:
    status = store.status(job)
    assert status is not None
    return status.job


def _granted(store: AnyStore, request: ClaimRequest) -> JobRow:
    answer = store.claim(request)
    assert answer.ok and answer.job is not None
    assert answer.job == _stored(store, request.job_id)
    return answer.job


def _finished(store: AnyStore, row: JobRow, completion: Completion) -> None:
    ref = AttemptRef(row.job_id, row.owner_attempt or "", row.fence)
    answer = store.finish(ref, completion)
    assert answer.ok and answer.job is not None
    assert answer.job == _stored(store, row.job_id)


def _success(result: str) -> Completion:
    return Completion(JobState.SUCCEEDED, result, None, None, retention_us=3_600_000_000)


@pytest.fixture(params=["standalone", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    name = "redis_url" if request.param == "standalone" else "cluster_url"
    return with_query(request.getfixturevalue(name), QUIET)


def test_a_granted_claim_and_commit_answer_the_stored_row(make_store: MakeStore, url: str) -> None:
    store = make_store(url)
    trace = "00-" + "a1" * 16 + "-" + "b2" * 8 + "-01"
    key = f"plain-{uuid.uuid4().hex}"
    _finished(store, _granted(store, _request(key)), _success('{"n":1}'))
    traced = _request(
        f"traced-{uuid.uuid4().hex}",
        result_version="v\x1fwith a separator",  # a version may hold any character
        origin=json.dumps({"task": 7}),
        trace=trace,
    )
    row = _granted(store, traced)
    beat = store.heartbeat(AttemptRef(row.job_id, traced.attempt_id, row.fence), 60_000_000)
    assert beat.ok and beat.job == _stored(store, row.job_id)
    failure = Completion(JobState.FAILED, None, json.dumps({"type": "E"}), True, 3_600_000_000)
    _finished(store, row, failure)


@pytest.mark.real_clock(STORE_CLOCK)
def test_a_takeover_answers_the_stored_row_with_its_watchers(
    make_store: MakeStore, url: str
) -> None:
    store = make_store(url)
    key = f"watched-{uuid.uuid4().hex}"
    first = _request(key, lease_us=100_000, watch=json.dumps({"id": "w1", "target": {"a": 1}}))
    row = _granted(store, first)
    assert row.watchers != "{}"
    time.sleep(0.2)  # its lease runs out
    taken = _granted(store, _request(key, trace="00-" + "c3" * 16 + "-" + "d4" * 8 + "-00"))
    assert (taken.fence, taken.watchers, taken.created_at) == (2, row.watchers, row.created_at)
    _finished(store, taken, _success('"done"'))  # the watch becomes a notice
    assert json.loads(_stored(store, taken.job_id).notices)
