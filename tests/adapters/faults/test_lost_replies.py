"""Lost replies on real servers: a TCP proxy in front of PostgreSQL, MariaDB and Redis lets a
claim, heartbeat or finish through and cuts the connection before its reply (invariant 13).

The call was applied; the ledger sees a broken connection, sends it once more, and must
recognise its own applied call: the claim is returned, the commit answers as committed,
the history holds one attempt.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from rill_executor import AttemptOutcome, JobState
from rill_executor._keys import job_id
from rill_executor.store import Watch
from rill_executor.testing import LedgerDriver, is_claim
from rill_executor.testing.drill import FaultProxy

# Which fixture gives each server's URL, and what applies a write there: PostgreSQL and
# Redis apply the request itself; MariaDB applies the transaction's COMMIT.
_SERVERS = {
    "postgresql": ("postgres_url", None),
    "mariadb": ("mariadb_url", b"COMMIT"),
    "redis": ("redis_url", None),
}


class Cut:
    def __init__(self, url: str, then: bytes | None) -> None:
        parts = urlsplit(url)
        assert parts.hostname and parts.port, url
        self.proxy = FaultProxy(parts.hostname, parts.port)
        self.url = url.replace(f"{parts.hostname}:{parts.port}", f"127.0.0.1:{self.proxy.port}")
        self.then = then

    def next_reply_of(self, namespace: str, key: str) -> object:
        """Lose the reply to the next write of (namespace, key)'s job."""
        return self.proxy.arm(job_id(namespace, key), self.then)


@pytest.fixture(params=sorted(_SERVERS))
def cut(request: pytest.FixtureRequest) -> Iterator[Cut]:
    fixture, then = _SERVERS[request.param]
    cut = Cut(request.getfixturevalue(fixture), then)
    yield cut
    cut.proxy.close()


@pytest.fixture(params=["sync", "async"])
def driver(request: pytest.FixtureRequest, cut: Cut) -> Iterator[LedgerDriver]:
    driver = LedgerDriver(cut.url, request.param)
    yield driver
    driver.close()


@pytest.fixture
def namespace() -> str:
    return f"t{uuid.uuid4().hex[:16]}"


@pytest.mark.parametrize("operation", ["claim", "watched claim", "heartbeat", "finish"])
def test_an_applied_call_whose_reply_was_lost_is_recognised(
    driver: LedgerDriver, cut: Cut, namespace: str, operation: str
) -> None:
    ledger = driver.ledger(namespace, lease=30)
    cuts = {}
    if operation in ("claim", "watched claim"):
        cuts[operation] = cut.next_reply_of(namespace, "k")
    watch = Watch("task-1", "u1") if operation == "watched claim" else None
    claim = ledger.claim("k", watch=watch)
    assert is_claim(claim) and claim.fence == 1, claim
    if operation == "heartbeat":
        cuts["heartbeat"] = cut.next_reply_of(namespace, "k")
    claim.heartbeat()
    if operation == "finish":
        cuts["finish"] = cut.next_reply_of(namespace, "k")
    claim.commit("done")
    assert cuts[operation].is_set(), "the proxy never cut the reply"  # type: ignore[attr-defined]
    status = ledger.status("k")
    assert status is not None and status.state is JobState.SUCCEEDED
    assert status.result == "done" and status.fence == 1
    assert [(a.fence, a.outcome) for a in status.attempts] == [(1, AttemptOutcome.SUCCEEDED)]
    if watch is not None:  # the resent claim kept the one watch: one notice at the finish
        assert [n.watch for n in status.notices] == ["task-1"]


def test_a_decorated_call_whose_claim_reply_was_lost_runs_at_once(
    driver: LedgerDriver, cut: Cut, namespace: str
) -> None:
    """Not after the lease: the resent claim finds its own attempt owning the job."""
    ledger = driver.ledger(namespace, lease=600)
    runs: list[str] = []

    @ledger.idempotent(key=lambda k: k, name="h")
    def handler(k: str) -> str:
        runs.append(k)
        return f"done {k}"

    lost = cut.next_reply_of(namespace, "h/k")
    assert handler("k") == "done k" and runs == ["k"]
    assert lost.is_set()  # type: ignore[attr-defined]
    status = ledger.status("k", handler="h")
    assert status is not None and [a.outcome for a in status.attempts] == [AttemptOutcome.SUCCEEDED]
