"""A partition mid-commit on real servers: the proxy forwards a decorated call's write, then
forwards nothing and closes nothing (a black hole). The server keeps the cut-off session and
whatever it holds (on MariaDB, the transaction's row lock).

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
from rill_executor.testing import LedgerDriver
from rill_executor.testing.drill import FaultProxy

from .waits import ends_within

_BOUNDS = (
    "connect_timeout=2&read_timeout=2&lock_timeout=1&statement_timeout=1"
    "&idle_in_transaction_timeout=4"
)
_LEASE = 5
_ENDS_WITHIN = 20.0  # the bounds add up to about 4 s; without them the call never ends


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


def _when_free(call: Callable[[], Any], deadline: float) -> Any:
    """``call()`` again until it returns: the cut-off session's lock lasts until the server
    ends that session, the cut-off attempt's lease a little longer."""
    last: Any = None
    while time.monotonic() < deadline:
        ended, last = ends_within(_ENDS_WITHIN, call)
        assert ended, f"a fresh client's call still waits after {_ENDS_WITHIN:g} s"
        if not isinstance(last, Exception):
            return last
        time.sleep(0.5)
    raise AssertionError(f"the key is still blocked: the last call raised {last!r}")
