"""The store's own path for its scripts (``_wire``): replies of every size and kind, clients
it does not take, and connections the server closed while they were idle."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pytest
import redis
import redis.asyncio

from rill_executor import AsyncClaim, AsyncLedger, Claim, InProgress, Ledger, Replay
from rill_executor._keys import job_id
from rill_executor.store import StoreUnavailable
from rill_executor.testing.conformance import ClaimsAndFencing, History, Outbox, Replays
from rill_executor_redis import AsyncRedisStore, RedisStore, _wire
from rill_executor_redis._wire import async_wire_for, wire_for
from rill_executor_redis.testing import RedisServer
from tests.clocks import SERVER_TIMER

from .conftest import QUIET, AnyStore, with_query

MakeStore = Callable[[str], AnyStore]


def _ledger(store: AnyStore) -> Ledger:
    return Ledger(store, namespace=f"w{uuid.uuid4().hex[:12]}", lease=30)


def test_a_result_of_many_socket_reads_round_trips(make_store: MakeStore, redis_url: str) -> None:
    ledger = _ledger(make_store(redis_url))
    big = "é" * 400_000 + "\r\n$5\r\n" + "x" * 100_000  # ~900 KB, RESP-looking text inside
    claim = ledger.claim("big")
    assert isinstance(claim, Claim)
    claim.commit(big)
    replay = ledger.claim("big")
    assert isinstance(replay, Replay) and replay.result() == big
    status = ledger.status("big")
    assert status is not None and status.result == big
    assert isinstance(ledger.claim("small"), Claim)  # the next reply is its own


def test_integer_replies(make_store: MakeStore, redis_url: str) -> None:
    ledger = _ledger(make_store(redis_url))
    ledger.claim("k")
    assert ledger.record_event("k", "note", reason="by hand") is True  # event.lua answers 1
    assert ledger.record_event("other", "note") is False  # and 0 for a job it does not know
    status = ledger.status("k")
    assert status is not None and [e.kind for e in status.events] == ["note"]


def test_a_client_that_decodes_replies(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url.split("?", maxsplit=1)[0], decode_responses=True)
    store = RedisStore(client, durability="ignore")
    try:
        ledger = _ledger(store)
        claim = ledger.claim("k")
        assert isinstance(claim, Claim)
        claim.commit({"ok": 1})
        replay = ledger.claim("k")
        assert isinstance(replay, Replay) and replay.result() == {"ok": 1}
    finally:
        store.close()


class _Counting(redis.Redis):
    """A client subclass: the store leaves its commands to it."""

    calls = 0

    def execute_command(self, *args: object, **options: object) -> object:
        type(self).calls += 1
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


def test_a_client_subclass_keeps_every_command(redis_url: str) -> None:
    client = _Counting.from_url(redis_url.split("?", maxsplit=1)[0])
    store = RedisStore(client, durability="ignore")
    try:
        ledger = _ledger(store)
        before = _Counting.calls
        claim = ledger.claim("k")
        assert isinstance(claim, Claim)
        claim.commit("done")
        assert _Counting.calls - before >= 2  # the claim's and the commit's EVALSHA
    finally:
        store.close()


@pytest.mark.real_clock(SERVER_TIMER)
def test_idle_connections_closed_by_the_server_are_opened_again(
    make_store: MakeStore, private_redis: RedisServer
) -> None:
    # The store itself, not a ledger: a ledger would resend a failed claim and hide it.
    name = f"rill-{uuid.uuid4().hex[:8]}"
    store = make_store(with_query(private_redis.url, f"{QUIET}&client_name={name}"))
    missing = job_id("w", "never claimed")
    assert store.status(missing) is None  # a connection is open, and idle after this
    with private_redis.client() as admin:
        admin.config_set("timeout", 1)  # the server closes connections idle for a second
        deadline = time.monotonic() + 20
        while any(c["name"] == name for c in admin.client_list()):
            assert time.monotonic() < deadline, "the server kept the idle connections"
            time.sleep(0.1)
        admin.config_set("timeout", 0)
    assert store.status(missing) is None  # opened again, not an error


class _Renamed(redis.Connection):
    """A connection as a later redis-py might make it: its socket under another name."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]
        self._socket = self.__dict__.pop("_sock")


def test_the_store_takes_its_own_path_only_where_redis_py_has_the_parts_it_reads(
    redis_url: str,
) -> None:
    url = redis_url.split("?", maxsplit=1)[0]
    plain = redis.Redis.from_url(url)
    assert wire_for(plain) is not None
    assert async_wire_for(redis.asyncio.Redis.from_url(url)) is not None
    renamed = redis.Redis(
        connection_pool=redis.ConnectionPool.from_url(url, connection_class=_Renamed)
    )
    assert wire_for(renamed) is None  # redis-py's own path, rather than an AttributeError
    plain.close()
    renamed.close()


# -- a redis-py without the internals the wire reads: its own path for the scripts ----------

GONE = "_renamed_by_a_later_redis_py"


@pytest.fixture
def redis_py_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The import-time check as it would find a redis-py whose connections lost a part the
    wire reads: the same detection, asked for one part more."""
    monkeypatch.setattr(
        _wire, "SYNC_MISSING", _wire.missing_parts(redis.Connection, (*_wire.SYNC_PARTS, GONE))
    )
    monkeypatch.setattr(
        _wire,
        "ASYNC_MISSING",
        _wire.missing_parts(redis.asyncio.Connection, (*_wire.ASYNC_PARTS, GONE)),
    )


def test_the_installed_redis_py_has_every_part_the_wire_reads() -> None:
    assert _wire.SYNC_MISSING == [] and _wire.ASYNC_MISSING == []
    assert _wire.missing_parts(redis.Connection, (*_wire.SYNC_PARTS, GONE)) == [GONE]
    assert _wire.missing_parts(_Renamed, _wire.SYNC_PARTS) == ["_sock"]


@pytest.mark.usefixtures("redis_py_changed")
def test_without_the_parts_it_reads_the_store_runs_its_scripts_through_redis_py(
    make_store: MakeStore, redis_url: str
) -> None:
    store = make_store(redis_url)
    inner = getattr(store, "store", store)  # the async twin behind its blocking face
    assert inner._wire is None  # type: ignore[union-attr]
    ledger = _ledger(store)
    claim = ledger.claim("k")
    assert isinstance(claim, Claim)
    claim.heartbeat()
    claim.commit({"ok": 1})
    replay = ledger.claim("k")
    assert isinstance(replay, Replay) and replay.result() == {"ok": 1}
    assert ledger.record_event("k", "note") is True
    status = ledger.status("k")
    assert status is not None and status.result == {"ok": 1} and len(status.attempts) == 1


@pytest.mark.usefixtures("redis_py_changed")
class TestRedisWithoutTheWire(ClaimsAndFencing, Replays, History, Outbox):
    """The store contract's claims, replays, history and outbox through redis-py's own path
    (redis-py sends every script alike; test_conformance.py runs every group with the wire)."""

    exact_listing = False
    expires_records = True
    multiprocess = False  # a child process imports the wire afresh

    @pytest.fixture
    def store_url(self, redis_url: str) -> str:
        return redis_url


# -- the asyncio pipe: one connection per event loop, shared by concurrent calls ------------


def _names(admin: redis.Redis, name: str) -> set[str]:
    return {client["id"] for client in admin.client_list() if client["name"] == name}


def test_concurrent_async_calls_share_one_connection_each_with_its_own_answer(
    private_redis: RedisServer,
) -> None:
    name = f"rill-{uuid.uuid4().hex[:8]}"
    url = with_query(private_redis.url, f"{QUIET}&client_name={name}")

    async def run() -> tuple[list[object], set[str], set[str]]:
        ledger = AsyncLedger(AsyncRedisStore.from_url(url), namespace="pipe", lease=30)
        try:
            await _committed(ledger, [f"k{i}" for i in range(0, 64, 2)])
            with private_redis.client() as admin:
                before = _names(admin, name)
                claims = await asyncio.gather(*(ledger.claim(f"k{i}") for i in range(64)))
                after = _names(admin, name)
            return list(claims), before, after
        finally:
            await ledger.close()

    claims, before, after = asyncio.run(run())
    for i, answer in enumerate(claims):  # a replay's result comes from its own reply
        if i % 2:
            assert isinstance(answer, AsyncClaim) and answer.key == f"k{i}"
        else:
            assert isinstance(answer, Replay) and answer.result() == f"result of k{i}"
    assert after == before  # 64 calls in flight, no connection more


def test_calls_made_while_the_async_connection_opens_wait_for_its_handshake(
    private_redis: RedisServer,
) -> None:
    """The connection's handshake (``CLIENT SETNAME``, ``CLIENT SETINFO``: an error on a
    server before 7.2, read by redis-py) is on the socket while it opens; a call made then
    is sent after it, so its reply is its own, not the handshake's."""
    url = with_query(private_redis.url, f"{QUIET}&client_name=rill-handshake")
    keys = [f"k{i}" for i in range(60)]

    async def run() -> list[object]:
        writer = AsyncLedger(AsyncRedisStore.from_url(url), namespace="opening", lease=30)
        try:
            await _committed(writer, keys)
        finally:
            await writer.close()
        ledger = AsyncLedger(AsyncRedisStore.from_url(url), namespace="opening", lease=30)
        try:  # a fresh store: its pipe opens while the calls arrive, one each turn
            tasks = []
            for key in keys:
                tasks.append(asyncio.create_task(ledger.claim(key)))
                await asyncio.sleep(0)
            # a reply read by the wrong reader leaves a call waiting: fail, not hang
            together = asyncio.gather(*tasks, return_exceptions=True)
            return list(await asyncio.wait_for(together, 30))
        finally:
            await ledger.close()

    answers = asyncio.run(run())
    assert [a.result() if isinstance(a, Replay) else a for a in answers] == [
        f"result of {key}" for key in keys
    ]


async def _committed(ledger: AsyncLedger, keys: list[str]) -> None:
    """Commit each key with the result ``result of {key}``, one after another."""
    for key in keys:
        claim = await ledger.claim(key)
        assert isinstance(claim, AsyncClaim)
        await claim.commit(f"result of {key}")


def test_a_cancelled_async_call_leaves_every_other_answer_in_its_place(
    private_redis: RedisServer,
) -> None:
    url = with_query(private_redis.url, QUIET)

    async def run() -> None:
        ledger = AsyncLedger(AsyncRedisStore.from_url(url), namespace="cancel", lease=30)
        try:
            keys = [f"k{i}" for i in range(40)]
            await _committed(ledger, keys)
            tasks = [asyncio.create_task(ledger.claim(key)) for key in keys]
            await asyncio.sleep(0)  # every claim is on its way; none is answered yet
            for task in tasks[::2]:
                task.cancel()
            answers = await asyncio.gather(*tasks[1::2])
            assert [a.result() for a in answers if isinstance(a, Replay)] == [
                f"result of {key}" for key in keys[1::2]
            ]
            answers = await asyncio.gather(*(ledger.claim(key) for key in keys))
            assert [a.result() for a in answers if isinstance(a, Replay)] == [
                f"result of {key}" for key in keys
            ]
        finally:
            await ledger.close()

    asyncio.run(run())


def test_a_timeout_fails_every_waiting_async_call_and_the_next_gets_its_own_answer(
    private_redis: RedisServer,
) -> None:
    # CLIENT PAUSE WRITE holds every script until CLIENT UNPAUSE; the pipe times out first.
    url = with_query(private_redis.url, f"{QUIET}&socket_timeout=0.5")

    async def run() -> None:
        ledger = AsyncLedger(AsyncRedisStore.from_url(url), namespace="pause", lease=30)
        try:
            await ledger.claim("warm")
            with private_redis.client() as admin:
                admin.client_pause(30_000, all=False)
                try:
                    answers = await asyncio.gather(
                        *(ledger.claim(f"k{i}") for i in range(10)), return_exceptions=True
                    )
                finally:
                    admin.client_unpause()  # the late replies go nowhere
            assert all(isinstance(a, StoreUnavailable) for a in answers), answers
            claim = await ledger.claim("after")
            assert isinstance(claim, AsyncClaim) and claim.key == "after"
            again = await ledger.claim("after")
            assert isinstance(again, InProgress) and again.key == "after"
        finally:
            await ledger.close()

    asyncio.run(run())


def test_an_idle_async_connection_killed_before_its_reader_sees_it_is_opened_again(
    private_redis: RedisServer,
) -> None:
    """The server closes the pipe's connection, and a call follows in the same turn of the
    loop, before the reader task sees the close: the call goes out on a new connection."""
    name = f"rill-{uuid.uuid4().hex[:8]}"
    url = with_query(private_redis.url, f"{QUIET}&client_name={name}")
    missing = job_id("w", "never claimed")

    async def run() -> None:
        store = AsyncRedisStore.from_url(url)
        try:
            assert await store.status(missing) is None  # the pipe is open, and idle
            with private_redis.client() as admin:  # blocks the loop: no turn for the reader
                killed = _names(admin, name)
                admin.client_kill_filter(_type="normal", skipme=True)
            assert await store.status(missing) is None  # not StoreUnavailable
            with private_redis.client() as admin:
                assert _names(admin, name) and not killed & _names(admin, name)
        finally:
            await store.close()

    asyncio.run(run())
