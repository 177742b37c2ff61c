"""What purging adds on SQL: statements on the wire, locks skipped, fences kept and swept."""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from typing import Any

import pytest
from sqlalchemy import event, select, text

from rill_executor._keys import job_id
from rill_executor.store import (
    AttemptRef,
    ClaimRequest,
    Completion,
    JobState,
    PurgeRequest,
)
from rill_executor_sql import SqlStore
from rill_executor_sql._schema import fences
from tests.clocks import STORE_CLOCK

from .test_sql_store import _raw_statements, _statements

FAMILIES = ["sqlite", "postgres", "mariadb"]
SERVERS = ["postgres", "mariadb"]


@pytest.fixture(params=FAMILIES)
def url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


def _namespace() -> str:
    return f"pg{uuid.uuid4().hex[:12]}"


def _claim(namespace: str, key: str, attempt: str, lease_us: int = 30_000_000) -> ClaimRequest:
    return ClaimRequest(
        job_id=job_id(namespace, key),
        namespace=namespace,
        key=key,
        fingerprint="f" * 64,
        result_version=None,
        attempt_id=attempt,
        lease_us=lease_us,
    )


def _done(retention_us: int) -> Completion:
    return Completion(JobState.SUCCEEDED, '"done"', None, None, retention_us)


def _expired(store: SqlStore, namespace: str, keys: list[str]) -> None:
    """Records of ``keys`` whose retention is already over (1 µs): claim, commit."""
    for key in keys:
        answer = store.claim(_claim(namespace, key, f"a-{key}"))
        assert answer.ok and answer.job is not None
        ref = AttemptRef(answer.job.job_id, f"a-{key}", answer.job.fence)
        assert store.finish(ref, _done(1)).ok
    time.sleep(0.01)  # SQLite's clock ticks in milliseconds


def _purge(namespace: str, **options: Any) -> PurgeRequest:
    dangling = options.pop("dangling", 0)
    return PurgeRequest(namespace=namespace, dangling_after_us=dangling, **options)


@pytest.mark.real_clock(STORE_CLOCK)
def test_postgres_purges_a_batch_in_one_statement(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, namespace = SqlStore(postgres_url), _namespace()
    _expired(store, namespace, [f"k{n}" for n in range(5)])
    seen = _raw_statements(store, monkeypatch)
    first = store.purge(_purge(namespace, limit=3))
    last = store.purge(_purge(namespace, limit=3, after=first.cursor))
    store.close()
    assert (first.purged, last.purged, last.cursor) == (3, 2, None)
    assert len(seen) == 2, seen  # one statement a batch


@pytest.mark.real_clock(STORE_CLOCK)
@pytest.mark.parametrize("family", ["sqlite", "mariadb"])
def test_client_decided_stores_purge_a_batch_in_one_short_transaction(
    family: str, request: pytest.FixtureRequest
) -> None:
    store, namespace = SqlStore(request.getfixturevalue(f"{family}_url")), _namespace()
    _expired(store, namespace, ["a", "b"])
    seen = _statements(store)
    assert store.purge(_purge(namespace, dry_run=True)).purged == 2
    dry = list(seen)
    assert store.purge(_purge(namespace)).purged == 2
    store.close()
    begin = ["BEGIN"] if family == "sqlite" else []
    assert dry == ["SELECT", "SELECT"], dry  # clock, then the batch: reads only
    # clock, the batch locked, fences kept long enough; the jobs, their fences
    assert seen[len(dry) :] == [*begin, "SELECT", "SELECT", "SELECT", "DELETE", "INSERT"]


def _lock_row(url: str, jid: str) -> tuple[Any, Any]:
    """A claim's lock on a job row, held by another connection until released."""
    holder = SqlStore(url)
    conn = holder.engine.connect()
    conn.execution_options(isolation_level="READ COMMITTED")  # Postgres stores autocommit
    tx = conn.begin()
    conn.execute(text("SELECT fence FROM rill_jobs WHERE job_id = :j FOR UPDATE"), {"j": jid})
    return conn, tx


def _fail_fast_on_locks(store: SqlStore, family: str) -> None:
    """A purge that waited on a row lock would fail after a second instead of hanging."""
    setting = (
        "SET lock_timeout = '1s'" if family == "postgres" else "SET innodb_lock_wait_timeout = 1"
    )

    @event.listens_for(store.engine, "checkout")
    def limit_waits(dbapi_connection, record, proxy):  # type: ignore[no-untyped-def]
        cursor = dbapi_connection.cursor()
        cursor.execute(setting)
        cursor.close()

    store.engine.dispose()  # every connection from now on is checked out afresh


@pytest.mark.real_clock(STORE_CLOCK)
@pytest.mark.parametrize("family", SERVERS)
def test_a_purge_skips_a_row_a_claim_holds_and_never_waits(
    family: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(f"{family}_url")
    store, namespace = SqlStore(url), _namespace()
    _fail_fast_on_locks(store, family)
    _expired(store, namespace, ["held", "free-1", "free-2"])
    conn, tx = _lock_row(url, job_id(namespace, "held"))
    try:
        page = store.purge(_purge(namespace))
        assert page.purged == 2  # the locked row is left for the next run
        assert store.status(job_id(namespace, "held")) is not None
    finally:
        tx.rollback()
        conn.close()
        conn.engine.dispose()
    assert store.purge(_purge(namespace)).purged == 1
    assert store.status(job_id(namespace, "held")) is None
    store.close()


@pytest.mark.real_clock(STORE_CLOCK)
def test_a_kept_fence_is_swept_one_retention_after_its_record(url: str) -> None:
    store, namespace = SqlStore(url), _namespace()
    _expired(store, namespace, ["k"])
    gone = store.purge(_purge(namespace, dangling=400_000))
    assert gone.purged == 1
    with store.engine.connect() as conn:
        (keep_until,) = conn.execute(
            select(fences.c.keep_until).where(fences.c.namespace == namespace)
        ).one()
    assert keep_until == pytest.approx(gone.now + 400_000, abs=50_000)  # dangling_after: longer
    assert store.purge(_purge(namespace)).purged == 0  # not yet kept that long: still there
    with store.engine.connect() as conn:
        assert conn.execute(select(fences.c.job_id).where(fences.c.namespace == namespace)).all()
    with store.engine.begin() as conn:  # let its keep run out
        conn.execute(fences.update().where(fences.c.namespace == namespace).values(keep_until=0))
    store.purge(_purge(namespace))
    with store.engine.connect() as conn:
        left = conn.execute(select(fences.c.job_id).where(fences.c.namespace == namespace)).all()
    assert left == []
    store.close()


@pytest.mark.real_clock(STORE_CLOCK)
@pytest.mark.parametrize("family", SERVERS)
def test_claims_racing_purges_never_repeat_a_fence(
    family: str, request: pytest.FixtureRequest
) -> None:
    """Claimers take keys over as each record's retention (0.2 s) runs out, while a purger
    deletes the records past it: each key's claims must still hand out distinct fences."""
    store, namespace = SqlStore(request.getfixturevalue(f"{family}_url")), _namespace()
    keys = [f"k{n}" for n in range(3)]
    granted: dict[str, list[int]] = defaultdict(list)
    lock, stop, purged = threading.Lock(), threading.Event(), [0]
    errors: list[BaseException] = []

    def claimer(worker: int) -> None:
        try:
            for round_ in range(150):
                key = keys[(worker + round_) % len(keys)]
                attempt = f"w{worker}-{round_}"
                answer = store.claim(_claim(namespace, key, attempt))
                if answer.ok and answer.job is not None:
                    with lock:
                        granted[key].append(answer.job.fence)
                    ref = AttemptRef(answer.job.job_id, attempt, answer.job.fence)
                    store.finish(ref, _done(200_000))
                time.sleep(0.01)
        except BaseException as exc:  # reported below, with the fences seen
            errors.append(exc)

    def purger() -> None:
        try:
            while not stop.is_set():
                # a purged record's fence is kept one retention or the dangling window,
                # whichever is longer: an hour, so a claimer a loaded machine holds back
                # past the 0.2-s retention still finds the key's last fence
                request = _purge(namespace, limit=2, dangling=3_600_000_000)
                purged[0] += store.purge(request).purged
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(w,)) for w in range(3)]
    cleaner = threading.Thread(target=purger)
    cleaner.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    cleaner.join()
    store.close()
    assert not errors, errors
    assert purged[0] >= len(keys), "the purger deleted too little: the race was not exercised"
    for key, fences_of_key in granted.items():
        assert len(fences_of_key) == len(set(fences_of_key)), (key, sorted(fences_of_key))
        assert len(fences_of_key) > 2, (key, fences_of_key)  # claimed again after purges
