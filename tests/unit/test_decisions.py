"""The lifecycle rules every client-decided store applies, checked without a store."""

from dataclasses import replace

from rill_executor.store import (
    AttemptRef,
    ClaimAction,
    ClaimRequest,
    Completion,
    JobState,
    WriteRejection,
    check_write,
    claimed_row,
    decide_claim,
    finished_row,
)

NOW = 1_000_000_000
REQUEST = ClaimRequest("j", "ns", "k", "f" * 64, "v1", "attempt-2", 30_000_000)
RUNNING = claimed_row(None, replace(REQUEST, attempt_id="attempt-1"), NOW)


def test_claim_decisions() -> None:
    assert decide_claim(None, REQUEST, NOW) is ClaimAction.INSERT
    assert decide_claim(RUNNING, REQUEST, NOW + 1) is ClaimAction.IN_PROGRESS
    assert decide_claim(RUNNING, REQUEST, RUNNING.lease_until or 0) is ClaimAction.TAKEOVER
    other = replace(REQUEST, fingerprint="e" * 64)
    assert decide_claim(RUNNING, other, NOW + 1) is ClaimAction.CONFLICT
    assert decide_claim(RUNNING, replace(REQUEST, result_version="v2"), NOW) is ClaimAction.CONFLICT
    done = finished_row(RUNNING, Completion(JobState.SUCCEEDED, "1", None, None, 60_000_000), NOW)
    assert decide_claim(done, REQUEST, NOW + 1) is ClaimAction.REPLAY
    assert decide_claim(done, other, NOW + 1) is ClaimAction.CONFLICT
    assert decide_claim(done, other, NOW + 60_000_000) is ClaimAction.TAKEOVER  # retention over
    failed = finished_row(RUNNING, Completion(JobState.FAILED, None, "{}", True, 60_000_000), NOW)
    assert decide_claim(failed, REQUEST, NOW + 1) is ClaimAction.TAKEOVER
    final = replace(failed, retryable=False)
    assert decide_claim(final, REQUEST, NOW + 1) is ClaimAction.REPLAY


def test_takeover_bumps_the_fence_and_keeps_creation_time() -> None:
    taken = claimed_row(RUNNING, REQUEST, NOW + 40_000_000)
    assert taken.fence == RUNNING.fence + 1
    assert taken.owner_attempt == "attempt-2" and taken.created_at == RUNNING.created_at


def test_write_checks() -> None:
    owner = AttemptRef("j", "attempt-1", RUNNING.fence)
    assert check_write(RUNNING, owner, NOW + 1) is None
    assert check_write(None, owner, NOW) is WriteRejection.MISSING
    assert check_write(RUNNING, replace(owner, fence=2), NOW) is WriteRejection.SUPERSEDED
    assert check_write(RUNNING, replace(owner, attempt_id="x"), NOW) is WriteRejection.SUPERSEDED
    expired = RUNNING.lease_until or 0
    assert check_write(RUNNING, owner, expired) is WriteRejection.LEASE_EXPIRED
    done = finished_row(RUNNING, Completion(JobState.SUCCEEDED, "1", None, None, 1), NOW)
    assert check_write(done, owner, NOW) is WriteRejection.FINISHED
