"""Output registration on Redis matches the reference store (MemoryStore) step by step:
registered outputs on the record, ended attempts listing theirs, committed or not."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import fields
from typing import Any

import pytest

from rill_executor import Claim, Ledger
from rill_executor.store import AttemptRef, Completion, JobState, MemoryStore, Store, StoreStatus
from tests.clocks import STORE_CLOCK

from .conftest import AnyStore

MakeStore = Callable[[str], AnyStore]


def _intent(attempt: str, name: str) -> str:
    return json.dumps({"name": name, "key": f"ns/job/{attempt}/{name}", "uri": f"s3://b/{name}é"})


def _scenario(store: Store, namespace: str) -> tuple[list[Any], StoreStatus]:
    """Register, lose the lease, get taken over, register again, commit one of two."""
    ledger = Ledger(store, namespace=namespace, lease=0.2)
    seen: list[Any] = []
    first = ledger.claim("k")
    assert isinstance(first, Claim)
    a = AttemptRef(first.job_id, first.attempt_id, first.fence)
    for name in ("video", "thumb"):
        answer = store.register_output(a, _intent("a", name))
        assert answer.ok and answer.job is not None
        seen.append(json.loads(answer.job.outputs))
    time.sleep(0.3)
    second = ledger.claim("k")
    assert isinstance(second, Claim)
    b = AttemptRef(second.job_id, second.attempt_id, second.fence)
    stale = store.register_output(a, _intent("a", "late"))
    assert not stale.ok
    for name in ("video", "audio"):
        store.register_output(b, _intent("b", name))
    committed = [
        {**json.loads(_intent("b", "video")), "sha256": "0" * 64, "size": 10**13, "etag": None}
    ]
    success = Completion(
        state=JobState.SUCCEEDED,
        result='{"frames":250}',
        error=None,
        retryable=None,
        retention_us=3600 * 10**6,
        outputs=json.dumps(committed),
    )
    answer = store.finish(b, success)
    assert answer.ok and answer.job is not None
    seen.append(json.loads(answer.job.outputs))
    status = store.status(first.job_id)
    assert status is not None
    return seen, status


def _comparable(status: StoreStatus) -> Any:
    attempts = [(a.fence, a.outcome.value, a.error, json.loads(a.outputs)) for a in status.attempts]
    job = {f.name: getattr(status.job, f.name) for f in fields(status.job)}
    for moving in ("owner_attempt", "claimed_at", "created_at", "updated_at", "finished_at",
                   "retain_until", "lease_until"):  # fmt: skip
        job.pop(moving)
    job["outputs"] = json.loads(job["outputs"])
    return json.loads(json.dumps([job, attempts], sort_keys=True))


@pytest.mark.real_clock(STORE_CLOCK)
def test_outputs_match_the_reference_store(make_store: MakeStore, redis_url: str) -> None:
    namespace = f"o{uuid.uuid4().hex[:8]}"
    redis_seen, redis_status = _scenario(make_store(redis_url), namespace)
    memory_seen, memory_status = _scenario(MemoryStore(), namespace)
    assert redis_seen == memory_seen
    assert _comparable(redis_status) == _comparable(memory_status)
    assert [len(json.loads(a.outputs)) for a in redis_status.attempts] == [2, 2]


def test_a_stale_registration_writes_nothing(make_store: MakeStore, redis_url: str) -> None:
    ledger = Ledger(make_store(redis_url), namespace=f"o{uuid.uuid4().hex[:8]}", lease=30)
    claim = ledger.claim("k")
    assert isinstance(claim, Claim)
    claim.commit("done")
    store = ledger.store
    before = store.status(claim.job_id)
    answer = store.register_output(
        AttemptRef(claim.job_id, claim.attempt_id, claim.fence), _intent("a", "late")
    )
    assert not answer.ok
    after = store.status(claim.job_id)
    assert before is not None and after is not None
    assert (after.job, after.attempts) == (before.job, before.attempts)
