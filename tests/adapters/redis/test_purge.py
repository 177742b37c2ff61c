"""Purge on Redis: what a deleted record leaves behind (its fence, no outbox entry), the
re-check on the server between the SCAN and the script, and a Cluster purge that goes
through every primary. The rules themselves are the kit's (rill_executor.testing)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.cluster

from rill_executor import Claim, Ledger, UsageError
from rill_executor.store import Watch
from rill_executor.testing import Portal
from rill_executor_redis import AsyncRedisStore, RedisStore, job_keys
from rill_executor_redis._keys import outbox_keys
from tests.clocks import STORE_CLOCK

from .conftest import AnyStore, BlockingStore

MakeStore = Callable[[str], AnyStore]
Admin = redis.Redis | redis.cluster.RedisCluster


@pytest.fixture(params=["standalone", "cluster"])
def deployment(request: pytest.FixtureRequest, redis_url: str) -> Iterator[tuple[str, Admin, bool]]:
    """(store URL, a plain client for the test's own commands, whether it is a Cluster)."""
    if request.param == "standalone":
        client: Admin = redis.Redis.from_url(redis_url.partition("?")[0])
        yield redis_url, client, False
    else:
        url = request.getfixturevalue("cluster_url")
        client = request.getfixturevalue("cluster_admin")
        yield url, client, True
    client.close()


def _ledger(store: Any, **options: Any) -> Ledger:
    options.setdefault("lease", 30)
    options.setdefault("retention", 3600)
    return Ledger(store, namespace=f"p{uuid.uuid4().hex[:8]}", **options)


def _dangle(admin: Admin, job_id: str, ago_s: float) -> None:
    """The owner died: its lease ran out ``ago_s`` ago (written on the server's clock)."""
    seconds, micros = admin.time()
    now = int(seconds) * 1_000_000 + int(micros)
    admin.hset(job_keys(job_id)[0], "lease_until", str(now - int(ago_s * 1_000_000)))


def _purge_all(ledger: Ledger, **options: Any) -> tuple[int, list[str]]:
    """Purge page by page to the end: (purged, the cursors returned)."""
    purged, cursors, cursor = 0, list[str](), None
    for _ in range(1000):
        report = ledger.purge(after=cursor, **options)
        purged += report.purged
        if (cursor := report.cursor) is None:
            return purged, cursors
        cursors.append(cursor)
    raise AssertionError("the purge never ended")


def test_a_purged_dangling_jobs_fence_goes_on(
    make_store: MakeStore, deployment: tuple[str, Admin, bool]
) -> None:
    url, admin, _ = deployment
    ledger = _ledger(make_store(url))
    first = ledger.claim("k")
    assert isinstance(first, Claim) and first.fence == 1
    _dangle(admin, first.job_id, ago_s=120)
    assert _purge_all(ledger, dangling_after=60)[0] == 1  # a page scans part of the database
    record, history = job_keys(first.job_id)
    assert admin.exists(record) == 0 and ledger.status("k") is None
    assert admin.hget(history, "fence") == b"1"  # the last fence stays behind...
    assert 0 < admin.pttl(history) <= 60_001  # ...for dangling_after (in ms, rounded up)
    again = ledger.claim("k")
    assert isinstance(again, Claim) and again.fence == 2, "a purged key's fence started over"
    assert admin.pttl(history) == -1  # running again: nothing expires


@pytest.mark.real_clock(STORE_CLOCK)
def test_the_outbox_index_no_longer_lists_a_purged_job(
    make_store: MakeStore, deployment: tuple[str, Admin, bool]
) -> None:
    url, admin, cluster = deployment
    ledger = _ledger(make_store(url))
    index, tokens = outbox_keys(ledger.namespace)
    dead = ledger.claim("dead", watch=Watch("task", {"n": 1}))  # waits for a finish
    assert isinstance(dead, Claim)
    assert admin.zscore(index, dead.job_id) is not None
    done = ledger.claim("done", watch=Watch("task", {"n": 2}))
    assert isinstance(done, Claim)
    done.commit("ok")  # its notice is pending: kept, and stays in the index
    record = job_keys(done.job_id)[0]
    admin.persist(record)  # a record past retention that Redis has not expired
    admin.hset(record, "retain_until", "0")
    _dangle(admin, dead.job_id, ago_s=120)
    if not cluster:  # standalone scores a watched job by its lease end: the one rewritten
        admin.zadd(index, {dead.job_id: 0})
    assert _purge_all(ledger, dangling_after=60)[0] == 0  # a dispatch still waits for "dead"
    lapses = [n for n in ledger.lease_notices(owner="d", lease=0.2) if n.key == "dead"]
    assert len(lapses) == 1 and ledger.settle_notice(lapses[0], "delivered", "redriven")
    time.sleep(0.3)  # the lease of "done"'s notice, taken with it, runs out

    assert _purge_all(ledger, dangling_after=60)[0] == 1
    assert ledger.status("done") is not None  # kept: its notice is pending
    assert admin.zscore(index, dead.job_id) is None
    assert admin.hget(tokens, dead.job_id) is None
    assert admin.zscore(index, done.job_id) is not None
    (notice,) = ledger.lease_notices(owner="d", lease=30)  # the kept notice is delivered
    assert notice.key == "done"


def _racing_store(url: str, race: Callable[[], None], portal: Portal | None) -> AnyStore:
    """A store whose client claims the job right after its first SCAN returns."""

    class Racing(redis.Redis):
        def scan(self, *args: Any, **kwargs: Any) -> Any:
            reply = super().scan(*args, **kwargs)
            race()
            return reply

    class AsyncRacing(redis.asyncio.Redis):
        async def scan(self, *args: Any, **kwargs: Any) -> Any:
            reply = await super().scan(*args, **kwargs)
            race()
            return reply

    if portal is None:
        return RedisStore(Racing.from_url(url), durability="ignore")
    return BlockingStore(AsyncRedisStore(AsyncRacing.from_url(url)), portal)


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_a_job_claimed_again_between_the_scan_and_the_script_stays(
    twin: str, make_store: MakeStore, redis_url: str
) -> None:
    admin = redis.Redis.from_url(redis_url.partition("?")[0])
    ledger = _ledger(make_store(redis_url))
    dead = ledger.claim("k")
    assert isinstance(dead, Claim)
    _dangle(admin, dead.job_id, ago_s=120)
    heirs: list[Claim] = []

    def race() -> None:
        if not heirs:  # a duplicate takes the dangling job over: a live lease
            heir = ledger.claim("k")
            assert isinstance(heir, Claim)
            heirs.append(heir)

    portal = Portal() if twin == "async" else None
    store = _racing_store(redis_url.partition("?")[0], race, portal)
    try:
        racing = Ledger(store, namespace=ledger.namespace, lease=30, retention=3600)
        assert _purge_all(racing, dangling_after=60)[0] == 0
    finally:
        store.close()
        if portal is not None:
            portal.close()
        admin.close()
    status = ledger.status("k")
    assert status is not None and status.fence == 2 and status.owner is not None
    assert status.owner.attempt_id == heirs[0].attempt_id
    heirs[0].commit("done")  # the new owner was never disturbed


def test_a_cluster_purge_goes_through_every_primary(
    make_store: MakeStore, cluster_url: str, cluster_admin: redis.cluster.RedisCluster
) -> None:
    ledger = _ledger(make_store(cluster_url))
    claims = [ledger.claim(f"k{n}") for n in range(30)]
    nodes = set()
    for claim in claims:
        assert isinstance(claim, Claim)
        _dangle(cluster_admin, claim.job_id, ago_s=120)
        record = job_keys(claim.job_id)[0]
        nodes.add(cluster_admin.get_node_from_key(record).name)  # type: ignore[no-untyped-call]
    assert len(nodes) == 3  # the jobs live on every primary

    purged, cursors = _purge_all(ledger, dangling_after=60, limit=4)
    assert purged == 30
    assert int(cursors[-1].split(":")[0]) >= 2  # the last page went on from the last primary
    assert all(ledger.status(f"k{n}") is None for n in range(30))


def test_a_page_deletes_no_more_than_its_limit_and_skips_nothing(
    make_store: MakeStore, redis_url: str
) -> None:
    admin = redis.Redis.from_url(redis_url.partition("?")[0])
    ledger = _ledger(make_store(redis_url))
    for n in range(25):
        claim = ledger.claim(f"k{n}")
        assert isinstance(claim, Claim)
        _dangle(admin, claim.job_id, ago_s=120)
    admin.close()
    cursor, purged = None, 0
    for _ in range(100_000):  # a scan of a crowded database takes many short pages
        report = ledger.purge(dangling_after=60, limit=1, after=cursor)
        assert report.purged <= 1
        purged += report.purged
        if (cursor := report.cursor) is None:
            break
    assert purged == 25  # a SCAN step finds more than one: the rest waits in the cursor


def test_a_purge_in_a_crowded_database_reaches_its_job_and_nothing_else(
    make_store: MakeStore, redis_url: str
) -> None:
    """Among 20,000 keys of another application and 1,000 dangling jobs of another namespace
    (what a failed setup leaves), a purge pages through every key, in short pages, deletes
    its namespace's dangling job, and leaves every other key as it was."""
    admin = redis.Redis.from_url(redis_url.partition("?")[0])
    crowd = f"crowd-{uuid.uuid4().hex[:8]}"
    others = _ledger(make_store(redis_url))
    try:
        with admin.pipeline(transaction=False) as pipe:
            for n in range(20_000):
                pipe.set(f"{crowd}:{n}", "x")
            pipe.execute()
        for n in range(1_000):
            other = others.claim(f"left-{n}")
            assert isinstance(other, Claim)
            _dangle(admin, other.job_id, ago_s=120)
        ledger = _ledger(make_store(redis_url))
        mine = ledger.claim("k")
        assert isinstance(mine, Claim)
        _dangle(admin, mine.job_id, ago_s=120)

        purged, cursors = _purge_all(ledger, dangling_after=60, limit=100)
        assert purged == 1 and ledger.status("k") is None
        assert cursors  # more than one page: each takes a bounded number of SCAN steps
        assert sum(admin.exists(f"{crowd}:{n}") for n in range(0, 20_000, 97)) == 207
        assert all(others.status(f"left-{n}") is not None for n in range(0, 1_000, 50))
    finally:  # the crowd goes: the session's later tests scan this database too
        for batch in _batches(admin.scan_iter(match=f"{crowd}:*", count=1000), 1000):
            admin.unlink(*batch)
        _purge_all(others, dangling_after=60)
        admin.close()


def _batches(keys: Iterator[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for key in keys:
        batch.append(key)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


@pytest.mark.parametrize("cursor", ["x", "0", "7:0", "0:-1", "0:12:nothex", "1:0"])
def test_a_cursor_this_store_never_returned_is_refused(
    make_store: MakeStore, redis_url: str, cursor: str
) -> None:
    ledger = _ledger(make_store(redis_url))
    claim = ledger.claim("k")
    assert isinstance(claim, Claim)
    with pytest.raises(UsageError, match="cursor"):
        ledger.purge(after=cursor, dangling_after=0)
    status = ledger.status("k")
    assert (
        status is not None
        and status.owner is not None
        and status.owner.attempt_id == claim.attempt_id
    )


def test_a_purge_after_script_flush_loads_its_script_and_deletes_once(
    make_store: MakeStore, flushable: tuple[str, Admin]
) -> None:
    url, admin = flushable
    ledger = _ledger(make_store(url))
    claims = [ledger.claim(f"k{n}") for n in range(12)]  # on every primary of a Cluster
    for claim in claims:
        assert isinstance(claim, Claim)
        _dangle(admin, claim.job_id, ago_s=120)
    admin.script_flush()  # on every node: the purge script is gone
    assert _purge_all(ledger, dangling_after=60)[0] == 12  # each counted once
    assert all(ledger.status(f"k{n}") is None for n in range(12))
