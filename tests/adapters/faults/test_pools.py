"""An outage costs a SQL store one failed operation, however many pools it keeps.

MariaDB keeps two pools (the writers' and an autocommit one); an outage kills the idle
connections of both. The first operation after it meets a
dead connection and fails (its caller is told it may retry); every later one must find live
connections in either pool, as on PostgreSQL's single pool.
"""

from __future__ import annotations

import uuid

import pytest

from rill_executor.testing import LedgerDriver

from .outage import StoreLink


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("server", ["postgres", "mariadb"])
def test_after_an_outage_one_failed_operation_renews_every_pool(
    server: str, mode: str, request: pytest.FixtureRequest
) -> None:
    link = StoreLink(str(request.getfixturevalue(f"{server}_url")))
    driver = LedgerDriver(link.url, mode)
    try:
        ledger = driver.ledger(f"t{uuid.uuid4().hex[:12]}", lease=30)
        claim = ledger.claim("k")  # each pool has a connection now
        claim.heartbeat()
        assert ledger.status("k") is not None
        link.down()  # drops them all
        link.up()
        claim.heartbeat()  # meets a dead connection, then is sent once more: written
        status = ledger.status("k")  # a live connection, in the other pool too
        assert status is not None and status.fence == 1
        claim.commit("done")
        assert ledger.claim("k").result() == "done"
    finally:
        driver.close()
        link.close()
