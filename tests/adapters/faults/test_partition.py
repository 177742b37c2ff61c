"""A partition mid-write on real servers: the proxy forwards a decorated call's commit, or a
deliverer's lease of notices, then forwards nothing and closes nothing (a black hole). The
server keeps the cut-off session and whatever it holds (on MariaDB, the transaction's row
lock).

Every wait of the SQL store is bounded: the call ends (with its result where the write was
applied alone, as on PostgreSQL; else with ``StoreUnavailable``), and once the server's own
bound has ended the cut-off session, a fresh client claims the key again. The bounds are
shortened through the URL to keep the test to seconds.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from rill_executor import StoreUnavailable
from rill_executor._keys import job_id
from rill_executor.store import Watch
from rill_executor.testing import LedgerDriver
from rill_executor.testing.drill import FaultProxy
from tests.clocks import SERVER_TIMER

from .waits import ends_within

_BOUNDS = (
    "connect_timeout=2&read_timeout=2&lock_timeout=1&statement_timeout=1"
    "&idle_in_transaction_timeout=4"
)
_LEASE = 5
_ENDS_WITHIN = 20.0  # the bounds add up to about 4 s; without them the call never ends
_NOTICE_LEASE = 3


def _bounded(url: str) -> str:
    return url + ("&" if "?" in url else "?") + _BOUNDS


class _Partitioned:
    def __init__(self, direct: str) -> None:
        parts = urlsplit(direct)
        assert parts.hostname and parts.port, direct
        self.direct = direct
        self.proxy = FaultProxy(parts.hostname, parts.port)
        self.url = direct.replace(f"{parts.hostname}:{parts.port}", f"127.0.0.1:{self.proxy.port}")


@pytest.fixture(params=["postgres", "mariadb"])
def link(request: pytest.FixtureRequest) -> Iterator[_Partitioned]:
    link = _Partitioned(_bounded(request.getfixturevalue(f"{request.param}_url")))
    yield link
    link.proxy.close()  # the server sees the cut-off session go, whatever the test left


@pytest.mark.real_clock(SERVER_TIMER)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_commit_cut_off_by_a_partition_ends_and_leaves_its_key_usable(
    link: _Partitioned, mode: str
) -> None:
    namespace = f"t{uuid.uuid4().hex[:16]}"
    cut: list[threading.Event] = []
    driver = LedgerDriver(link.url, mode)
    ledger = driver.ledger(namespace, lease=_LEASE)

    @ledger.idempotent(key=lambda k: k, name="h")
    def handler(k: str) -> str:
        # Claimed: the next write of this job (the commit) is the one cut off.
        cut.append(link.proxy.arm(job_id(namespace, "h/k"), partition=True))
        return f"done {k}"

    started = time.monotonic()
    ended, outcome = ends_within(_ENDS_WITHIN, lambda: handler("k"))
    assert cut and cut[0].is_set(), "the proxy never cut the commit off"
    assert ended, f"the partitioned call still waits after {_ENDS_WITHIN:g} s"
    assert outcome == "done k" or isinstance(outcome, StoreUnavailable), repr(outcome)
    driver.close()

    fresh = LedgerDriver(link.direct, mode)
    try:
        again = fresh.ledger(namespace, lease=_LEASE)

        @again.idempotent(key=lambda k: k, name="h")
        def same_handler(k: str) -> str:
            return f"done {k} again"

        result = _when_free(lambda: same_handler("k"), started + _LEASE + _ENDS_WITHIN)
        assert result in ("done k", "done k again"), result
        status = again.status("k", handler="h")
        assert status is not None and status.result == result, status
    finally:
        fresh.close()


@pytest.mark.real_clock(SERVER_TIMER)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_lease_of_notices_cut_off_by_a_partition_ends_and_the_notice_comes_back(
    link: _Partitioned, mode: str
) -> None:
    """Whether the cut-off lease was applied (PostgreSQL: one autocommitted statement) or
    rolled back with its session (MariaDB), the notice is not lost: once the lost lease runs
    out, or the server ends the session, another deliverer leases it, and only it."""
    namespace = f"t{uuid.uuid4().hex[:16]}"
    fresh = LedgerDriver(link.direct, mode)
    driver = LedgerDriver(link.url, mode)
    try:
        direct = fresh.ledger(namespace, lease=_LEASE)
        direct.claim("k", watch=Watch("task", {"url": "u"})).commit("done")  # a notice due
        deliverer = driver.ledger(namespace, lease=_LEASE)

        owner = f"cut-{uuid.uuid4().hex}"
        cut = link.proxy.arm(owner, partition=True)
        started = time.monotonic()
        ended, outcome = ends_within(
            _ENDS_WITHIN,
            lambda: deliverer.lease_notices(owner=owner, lease=_NOTICE_LEASE),
        )
        assert cut.is_set(), "the proxy never cut the lease off"
        assert ended, f"the partitioned lease still waits after {_ENDS_WITHIN:g} s"
        assert isinstance(outcome, StoreUnavailable), repr(outcome)

        deadline = started + _NOTICE_LEASE + _ENDS_WITHIN
        leased = _when_free(lambda: direct.lease_notices(owner="heir", lease=30) or None, deadline)
        assert [(n.key, n.owner, n.info.watch) for n in leased] == [("k", "heir", "task")]
        assert direct.lease_notices(owner="another", lease=30) == []  # the heir holds it
    finally:
        driver.close()
        fresh.close()


def _when_free(call: Callable[[], Any], deadline: float) -> Any:
    """``call()`` again until it returns something: the cut-off session's lock lasts until the
    server ends that session, the cut-off attempt's (or lease's) a little longer."""
    last: Any = None
    while time.monotonic() < deadline:
        ended, last = ends_within(_ENDS_WITHIN, call)
        assert ended, f"a fresh client's call still waits after {_ENDS_WITHIN:g} s"
        if last is not None and not isinstance(last, Exception):
            return last
        time.sleep(0.5)
    raise AssertionError(f"the key is still blocked: the last call raised {last!r}")
