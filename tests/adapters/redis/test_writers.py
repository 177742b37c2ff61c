"""The versions of the code that may write to a Redis store: recorded with its identity,
raised by a newer version, and a process older than the record refuses the store at open."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import pytest
import redis

from rill_executor import IncompatibleStore
from rill_executor.store import ClaimRequest
from rill_executor_redis._keys import IDENTITY, outbox_keys
from rill_executor_redis._writers import MIN_WRITER, STORE_VERSION
from rill_executor_redis.testing import RedisServer

from .conftest import QUIET, AnyStore, with_query

_CLAIM = ClaimRequest("ab" * 32, "ns", "k", "f" * 64, None, "a1", 30_000_000)


def test_an_identity_of_version_10_becomes_the_versioned_record_keeping_its_id(
    private_redis: RedisServer, make_store: Callable[[str], AnyStore]
) -> None:
    with private_redis.client() as admin:
        admin.set(IDENTITY, "kept-id")  # as version 10 left it: the id alone
        store = make_store(with_query(private_redis.url, QUIET))
        assert store.store_id() == "kept-id"
        record = admin.hgetall(IDENTITY)
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            admin.get(IDENTITY)  # what a process of version 10 reads at open: it fails
    assert record == {
        b"id": b"kept-id",
        b"version": str(STORE_VERSION).encode(),
        b"min_writer": str(MIN_WRITER).encode(),
    }


def test_a_store_that_admits_only_newer_writers_is_refused_and_nothing_is_written(
    private_redis: RedisServer, make_store: Callable[[str], AnyStore]
) -> None:
    url = with_query(private_redis.url, QUIET)
    make_store(url).store_id()
    with private_redis.client() as admin:
        newer = STORE_VERSION + 1
        admin.hset(IDENTITY, mapping={"version": newer, "min_writer": newer})
        before = admin.hgetall(IDENTITY)
        with pytest.raises(IncompatibleStore, match=f"version {newer} or newer"):
            make_store(url).claim(_CLAIM)  # the sync store refuses at open, asyncio at first use
        assert admin.hgetall(IDENTITY) == before
        assert admin.keys("rill:{*") == []  # no job written


def test_a_newer_store_that_still_admits_this_version_opens(
    private_redis: RedisServer, make_store: Callable[[str], AnyStore]
) -> None:
    url = with_query(private_redis.url, QUIET)
    make_store(url).store_id()
    with private_redis.client() as admin:
        admin.hset(IDENTITY, "version", STORE_VERSION + 1)
        store = make_store(url)
        assert store.claim(_CLAIM).ok
        assert admin.hget(IDENTITY, "version") == str(STORE_VERSION + 1).encode()  # not lowered


def test_upgrading_a_store_indexes_the_watched_jobs_version_8_left_out(
    private_redis: RedisServer, make_store: Callable[[str], AnyStore]
) -> None:
    url = with_query(private_redis.url, QUIET)
    watched = replace(_CLAIM, watch=json.dumps({"id": "w", "target": "t"}))
    assert make_store(url).claim(watched).ok
    index, _ = outbox_keys("ns")
    with private_redis.client() as admin:
        # As version 8 left it: its owner gone, out of the index; the identity a string.
        admin.hset(f"rill:{{{_CLAIM.job_id}}}:job", "lease_until", 1)
        admin.zrem(index, _CLAIM.job_id)
        admin.delete(IDENTITY)
        admin.set(IDENTITY, "kept-id")
        store = make_store(url)
        assert store.store_id() == "kept-id"
        assert admin.zscore(index, _CLAIM.job_id) == 1.0
    (lapse,) = store.lease_notices("ns", "d", 30_000_000, 10).notices
    assert json.loads(lapse.notice)["state"] == "processing"
