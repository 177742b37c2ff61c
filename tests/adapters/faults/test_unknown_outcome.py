"""A commit whose outcome is unknown on real servers: the proxy forwards the commit and then
forwards nothing (the server applies it, the reply never comes back), and the resend meets
a black hole. The error must not say "not recorded": it is ``OutcomeUnknown``, and the
record, read once the link is back, holds the commit, which a claim replays.

The bounds are shortened through the URL to keep the test to seconds. (A commit known not
to be applied, "NOT recorded", is the conformance kit's
``test_a_finish_lost_twice_says_the_outcome_is_not_recorded``, on every store.)
"""

from __future__ import annotations

import threading
import uuid
from urllib.parse import urlsplit

import pytest

from rill_executor import JobState, OutcomeUnknown, Replay
from rill_executor._keys import job_id
from rill_executor.testing import LedgerDriver, is_claim
from rill_executor.testing.drill import FaultProxy

_SQL_BOUNDS = "connect_timeout=2&read_timeout=2&lock_timeout=1&statement_timeout=1"
_SERVERS = {  # fixture, the query of short bounds, what applies a write there
    "postgresql": ("postgres_url", _SQL_BOUNDS, None),
    "mariadb": ("mariadb_url", _SQL_BOUNDS, b"COMMIT"),
    "redis": ("redis_url", "socket_timeout=2&socket_connect_timeout=2", None),
}


class Link:
    def __init__(self, direct: str, bounds: str, then: bytes | None) -> None:
        parts = urlsplit(direct)
        assert parts.hostname and parts.port, direct
        self.direct = direct
        self.proxy = FaultProxy(parts.hostname, parts.port)
        proxied = direct.replace(f"{parts.hostname}:{parts.port}", f"127.0.0.1:{self.proxy.port}")
        self.url = proxied + ("&" if "?" in proxied else "?") + bounds
        self.then = then


# Not MariaDB's asyncio driver: aiomysql leaves the Connection whose handshake the black
# hole cut (its connect cancelled) unclosed, and its ResourceWarning fails a later test.
_CASES = [("postgresql", "sync"), ("postgresql", "async"), ("mariadb", "sync")]
_CASES += [("redis", "sync"), ("redis", "async")]


@pytest.mark.parametrize(("server", "mode"), _CASES)
def test_a_commit_applied_whose_replies_are_lost_is_unknown_not_unrecorded(
    request: pytest.FixtureRequest, server: str, mode: str
) -> None:
    fixture, bounds, then = _SERVERS[server]
    link = Link(request.getfixturevalue(fixture), bounds, then)
    request.addfinalizer(link.proxy.close)
    namespace = f"t{uuid.uuid4().hex[:16]}"
    driver = LedgerDriver(link.url, mode)
    try:
        claim = driver.ledger(namespace, lease=30).claim("k")
        assert is_claim(claim)
        cut = link.proxy.arm(job_id(namespace, "k"), link.then, partition=True)

        def black_hole_once_cut() -> None:  # before the resend, which waits a read bound
            if cut.wait(30):
                link.proxy.blackhole(True)

        holer = threading.Thread(target=black_hole_once_cut, daemon=True)
        holer.start()
        with pytest.raises(OutcomeUnknown) as err:
            claim.commit("done")
        holer.join()
    finally:
        link.proxy.blackhole(False)
        driver.close()
    assert cut.is_set(), "the proxy never cut the commit off"
    message = str(err.value)
    assert err.value.applied is None and "NOT recorded" not in message, message
    assert "UNKNOWN" in message and "rill-executor status k" in message, message
    direct = LedgerDriver(link.direct, mode)
    try:
        ledger = direct.ledger(namespace, lease=30)
        status = ledger.status("k")
        assert status is not None and status.state is JobState.SUCCEEDED, status
        replay = ledger.claim("k")
        assert isinstance(replay, Replay) and replay.result() == "done"
    finally:
        direct.close()
