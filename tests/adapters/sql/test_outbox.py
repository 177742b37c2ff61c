"""What the SQL stores add to the kit's outbox tests: the indexed ``notice_due`` column,
PostgreSQL's finish in SQL, and deliverers in separate processes."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

import pytest
from sqlalchemy import select

from rill_executor import Claim, InProgress, Ledger
from rill_executor._keys import job_id
from rill_executor.store import JobState, Watch, finish_notices, outbox_due
from rill_executor_sql import SqlStore
from rill_executor_sql._schema import jobs

from .test_sql_store import _raw_statements


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


def _stored(store: SqlStore, namespace: str, key: str) -> tuple[str, int | None]:
    """The job's notices (JSON text) and its ``notice_due`` column, read straight from it."""
    query = select(jobs.c.notices, jobs.c.notice_due).where(jobs.c.job_id == job_id(namespace, key))
    with store.engine.connect() as conn:
        notices, due = conn.execute(query).one()
    return notices if isinstance(notices, str) else json.dumps(notices), due


def test_notice_due_follows_every_write_of_the_notices(url: str) -> None:
    store = SqlStore(url)
    namespace = f"due{uuid.uuid4().hex[:8]}"
    ledger = Ledger(store, namespace=namespace)

    def due_is_consistent(key: str) -> int | None:
        _, due = _stored(store, namespace, key)
        found = store.status(job_id(namespace, key))
        assert found is not None and due == outbox_due(found.job)
        return due

    owner = ledger.claim("k", watch=Watch("t-1", "u1"))
    assert isinstance(owner, Claim)
    watched = store.status(job_id(namespace, "k"))
    assert watched is not None and watched.job.lease_until is not None
    assert due_is_consistent("k") == watched.job.lease_until  # due when its owner's lease ends
    assert isinstance(ledger.claim("k", watch=Watch("t-2", "u2")), InProgress)
    owner.commit("done")  # two notices, due now
    assert due_is_consistent("k") is not None
    first, second = ledger.lease_notices(owner="d", lease=30)
    leased_until = due_is_consistent("k")
    assert ledger.settle_notice(first, "delivered", "ok")
    assert due_is_consistent("k") == leased_until  # the other one is still leased
    assert ledger.settle_notice(second, "pending", "retry_later", retry_in=60)
    retry_at = due_is_consistent("k")
    assert retry_at is not None and leased_until is not None and retry_at > leased_until
    ledger.claim("k", watch=Watch("t-3", "u3"))  # answered at once from the outcome
    answered_at = due_is_consistent("k")
    assert answered_at is not None and answered_at < retry_at
    (third,) = ledger.lease_notices(owner="d", lease=30)
    assert ledger.settle_notice(third, "dropped", "refused")
    assert due_is_consistent("k") == retry_at
    store.close()


def test_postgres_finish_writes_the_notices_of_finish_notices_in_its_one_statement(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqlStore(postgres_url)
    namespace = f"pgn{uuid.uuid4().hex[:8]}"
    ledger = Ledger(store, namespace=namespace, lease=30)
    the_job = job_id(namespace, "k")
    seen = _raw_statements(store, monkeypatch)

    def finished_like_python(end: Any, state: JobState) -> None:
        before = store.status(the_job)
        assert before is not None and before.job.watchers != "{}"
        del seen[:]
        end()
        assert len(seen) == 1  # the result, history and notices: one statement
        after = store.status(the_job)
        assert after is not None and after.job.finished_at is not None
        expected = finish_notices(
            before.job.notices,
            before.job.watchers,
            before.job.fence,
            state.value,
            after.job.error,
            after.job.finished_at,
        )
        assert json.loads(after.job.notices) == json.loads(expected)
        assert json.loads(after.job.watchers) == {}

    first = ledger.claim("k", watch=Watch("task-1", {"url": "u1"}))
    assert isinstance(first, Claim)
    ledger.claim("k", watch=Watch("task-2", {"url": "u2", "n": [1, None]}))
    finished_like_python(lambda: first.fail("boom", retryable=True), JobState.FAILED)
    second = ledger.claim("k", watch=Watch("task-3", {"url": "u3"}))
    assert isinstance(second, Claim)
    finished_like_python(lambda: second.commit({"ok": True}), JobState.SUCCEEDED)
    status = ledger.status("k")
    assert status is not None
    assert [n.id for n in status.notices] == ["1.1", "1.2", "2.3"]
    store.close()


def test_postgres_first_watched_claim_and_settling_are_one_statement_each(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqlStore(postgres_url)
    namespace = f"pgw{uuid.uuid4().hex[:8]}"
    ledger = Ledger(store, namespace=namespace, lease=30)
    seen = _raw_statements(store, monkeypatch)
    target = {"url": "u1", "n": [1, None], "s": "\u00e9\u2603"}
    owner = ledger.claim("k", watch=Watch("task-1", target))
    assert isinstance(owner, Claim)
    assert len(seen) == 1  # the insert, watched: no transaction
    found = store.status(job_id(namespace, "k"))
    assert found is not None
    assert json.loads(found.job.watchers) == {"task-1": target}
    assert _stored(store, namespace, "k")[1] == outbox_due(found.job) == found.job.lease_until
    # a watch for a job already there: the insert inserts nothing, and the locked
    # transaction adds the watch
    assert isinstance(ledger.claim("k", watch=Watch("task-2", "u2")), InProgress)
    found = store.status(job_id(namespace, "k"))
    assert found is not None and json.loads(found.job.watchers) == {
        "task-1": target,
        "task-2": "u2",
    }
    owner.commit("done")
    first, second = ledger.lease_notices(owner="d", lease=30)
    del seen[:]
    assert ledger.settle_notice(first, "delivered", "ok")
    assert len(seen) == 1  # settling: one statement
    before = store.status(job_id(namespace, "k"))
    assert not ledger.settle_notice(first, "delivered", "ok")  # settled already: not written
    after = store.status(job_id(namespace, "k"))
    assert before is not None and after is not None and after.job == before.job
    assert ledger.settle_notice(second, "pending", "retry_later", retry_in=60)
    status = ledger.status("k")
    assert status is not None
    assert [(n.watch, n.status) for n in status.notices] == [
        ("task-1", "delivered"),
        ("task-2", "pending"),
    ]
    store.close()


_DELIVERER = """
import json, sys
from rill_executor import Ledger
from rill_executor_sql import SqlStore

store = SqlStore(sys.argv[1])
ledger = Ledger(store, namespace=sys.argv[2])
got = []
while batch := ledger.lease_notices(owner=sys.argv[3], lease=60, limit=2):
    got += [(n.key, n.info.id) for n in batch]
print(json.dumps(got))
store.close()
"""


@pytest.mark.parametrize("server", ["postgres", "mariadb"])
def test_deliverers_in_separate_processes_never_lease_one_notice_twice(
    server: str, request: pytest.FixtureRequest
) -> None:
    url = str(request.getfixturevalue(f"{server}_url"))
    namespace = f"mp{uuid.uuid4().hex[:8]}"
    store = SqlStore(url)
    ledger = Ledger(store, namespace=namespace, lease=30)
    for n in range(40):
        claim = ledger.claim(f"k{n}", watch=Watch("t", n))
        assert isinstance(claim, Claim)
        claim.commit(n)
    store.close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _DELIVERER, url, namespace, f"d{i}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    leased = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    got = [tuple(x) for batch in leased for x in batch]
    assert sorted(got) == sorted((f"k{n}", "1.1") for n in range(40))  # each exactly once
