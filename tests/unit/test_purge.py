"""The purge rules every store follows, checked without a store."""

import json
from dataclasses import replace

import pytest

from rill_executor import UsageError
from rill_executor._rules.purge import check_purge
from rill_executor.store import (
    ClaimRequest,
    Completion,
    JobState,
    PurgeRequest,
    PurgeVerdict,
    claimed_row,
    fence_keep_until,
    finished_row,
    past_retention,
    purge_batch,
    purge_verdict,
)

NOW = 1_000_000_000
LEASE, RETENTION, DANGLING = 30_000_000, 60_000_000, 600_000_000
RUNNING = claimed_row(None, ClaimRequest("j", "ns", "k", "f" * 64, None, "a", LEASE), NOW)
DONE = finished_row(
    RUNNING, Completion(JobState.SUCCEEDED, "1", None, None, RETENTION), NOW + 1_000
)


def test_a_finished_record_is_past_retention_from_retain_until_on() -> None:
    until = DONE.retain_until or 0
    assert not past_retention(DONE, DANGLING, until - 1)
    assert past_retention(DONE, DANGLING, until)


def test_a_processing_record_is_past_retention_dangling_after_its_lease() -> None:
    lease_until = RUNNING.lease_until or 0
    assert not past_retention(RUNNING, DANGLING, lease_until + DANGLING - 1)
    assert past_retention(RUNNING, DANGLING, lease_until + DANGLING)
    assert past_retention(RUNNING, 0, lease_until)


def test_a_pending_notice_keeps_a_record_a_settled_one_does_not() -> None:
    until = DONE.retain_until or 0
    notice = {"id": "1.1", "status": "pending", "due": 0, "lease_until": None}
    pending = replace(DONE, notices=json.dumps([notice]))
    settled = replace(DONE, notices=json.dumps([{**notice, "status": "delivered"}]))
    assert purge_verdict(pending, DANGLING, until) is PurgeVerdict.KEEP_NOTICE
    assert purge_verdict(settled, DANGLING, until) is PurgeVerdict.PURGE
    assert purge_verdict(settled, DANGLING, until - 1) is PurgeVerdict.KEEP


def test_a_fence_is_kept_one_retention_and_at_least_dangling_after() -> None:
    assert fence_keep_until(DONE, 0, NOW) == NOW + RETENTION  # the record's own retention
    assert fence_keep_until(DONE, DANGLING, NOW) == NOW + DANGLING  # the longer one
    assert fence_keep_until(RUNNING, DANGLING, NOW) == NOW + DANGLING


def test_a_batch_is_the_first_limit_records_in_job_id_order_after_the_cursor() -> None:
    rows = [replace(DONE, job_id=f"j{n}") for n in (4, 1, 3, 2, 5)]
    rows.append(replace(DONE, job_id="j0", namespace="other"))
    late = (DONE.retain_until or 0) + 1
    request = PurgeRequest("ns", DANGLING, limit=2)
    doomed, kept, cursor = purge_batch(rows, request, late)
    assert ([j.job_id for j in doomed], kept, cursor) == (["j1", "j2"], 0, "j2")
    doomed, kept, cursor = purge_batch(rows, replace(request, after="j4"), late)
    assert ([j.job_id for j in doomed], cursor) == (["j5"], None)  # not full: the last batch


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"limit": 0}, "limit must be an int from 1 to 10000"),
        ({"limit": True}, "limit must be an int"),
        ({"after": ""}, "cursor must be the text a previous purge returned"),
    ],
)
def test_bad_requests_say_what_is_wrong(change: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        check_purge(replace(PurgeRequest("ns", 0), **change))  # type: ignore[arg-type]
