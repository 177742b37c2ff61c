"""Faults on a Redis server the test owns: restarts, SCRIPT FLUSH, killed connections.

The server runs with ``appendonly yes`` / ``appendfsync always``: what it acknowledged
survives a SIGKILL, which is the deployment these guarantees are stated for.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable

import pytest
import redis
import redis.cluster

from rill_executor import AttemptOutcome, Claim, InProgress, Ledger, Replay, StaleAttempt
from rill_executor._keys import job_id
from rill_executor.store import ClaimRequest, JobQuery, StoreUnavailable
from rill_executor.testing.drill import FaultProxy
from rill_executor_redis._scripts import Op, source
from rill_executor_redis.testing import RedisServer
from tests.clocks import STORE_CLOCK

from .conftest import QUIET, AnyStore, with_query

MakeStore = Callable[[str], AnyStore]


def _ledger(store: AnyStore, lease: float = 30) -> Ledger:
    return Ledger(store, namespace=f"f{uuid.uuid4().hex[:12]}", lease=lease)


def _claims(ledger: Ledger, keys: list[str]) -> list[Claim]:
    claims = [ledger.claim(key) for key in keys]
    assert all(isinstance(c, Claim) for c in claims), claims
    return claims  # type: ignore[return-value]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_restart_between_claim_and_commit(
    make_store: MakeStore, private_redis: RedisServer, sig: signal.Signals
) -> None:
    ledger = _ledger(make_store(with_query(private_redis.url, QUIET)))
    claims = _claims(ledger, [f"seg-{i}" for i in range(8)])
    for claim in claims[:4]:
        claim.commit({"by": claim.attempt_id})

    private_redis.stop(sig)
    for claim in claims[4:]:
        with pytest.raises(StoreUnavailable) as err:
            claim.commit({"by": claim.attempt_id})
        message = str(err.value)
        assert f"127.0.0.1:{private_redis.port}" in message and "is not reachable" in message
        assert "nothing was sent" in message  # the server is down: it refuses the connection
    with pytest.raises(StoreUnavailable):
        ledger.claim("seg-0")
    private_redis.start()

    # The claims survived the restart: their owners can still commit, exactly once.
    for claim in claims[4:]:
        assert isinstance(ledger.claim(claim.key), InProgress)
        claim.commit({"by": claim.attempt_id})
    for claim in claims:
        with pytest.raises(StaleAttempt):
            claim.commit({"by": "a second commit"})
        replay = ledger.claim(claim.key)
        assert isinstance(replay, Replay) and replay.result() == {"by": claim.attempt_id}
        status = ledger.status(claim.key)
        assert status is not None
        assert [(a.attempt_id, a.outcome) for a in status.attempts] == [
            (claim.attempt_id, AttemptOutcome.SUCCEEDED)
        ]


@pytest.mark.real_clock(STORE_CLOCK)
def test_restart_mid_run_with_racing_attempts_commits_each_key_once(
    make_store: MakeStore, private_redis: RedisServer
) -> None:
    """Attempts whose lease ran out while Redis was down are fenced after it is back."""
    url = with_query(private_redis.url, QUIET)
    ledger = _ledger(make_store(url), lease=0.3)
    keys = [f"seg-{i}" for i in range(6)]
    first = _claims(ledger, keys)
    private_redis.stop()
    for claim in first:
        with pytest.raises(StoreUnavailable):
            claim.heartbeat()
    private_redis.start()
    _wait_leases_expire(ledger, keys)

    second = _claims(ledger, keys)  # takeovers: the first attempts lost their leases
    committed: dict[str, list[str]] = {key: [] for key in keys}
    for old, new in zip(first, second, strict=True):
        for claim in (old, new):
            try:
                claim.commit({"by": claim.attempt_id})
                committed[claim.key].append(claim.attempt_id)
            except StaleAttempt:
                pass
    assert committed == {new.key: [new.attempt_id] for new in second}
    for new in second:
        status = ledger.status(new.key)
        assert status is not None and status.result == {"by": new.attempt_id}
        assert [a.outcome for a in status.attempts] == [
            AttemptOutcome.EXPIRED,
            AttemptOutcome.SUCCEEDED,
        ]


def _wait_leases_expire(ledger: Ledger, keys: list[str]) -> None:
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        statuses = [ledger.status(key) for key in keys]
        if all(
            s is not None and s.owner and s.owner.lease_left.total_seconds() < 0 for s in statuses
        ):
            return
        time.sleep(0.05)
    raise AssertionError("leases did not expire")


def test_script_flush_mid_run(make_store: MakeStore, private_redis: RedisServer) -> None:
    ledger = _ledger(make_store(with_query(private_redis.url, QUIET)))
    sha = {op: redis.Redis().register_script(source(op)).sha for op in Op}  # no I/O: sha only
    claim = _claims(ledger, ["k"])[0]
    with private_redis.client() as admin:

        def flushed_then(op: Op, call: Callable[[], object]) -> object:
            admin.script_flush()
            assert admin.script_exists(sha[op]) == [False]
            result = call()
            assert admin.script_exists(sha[op]) == [True]  # reloaded by the store
            return result

        flushed_then(Op.HEARTBEAT, claim.heartbeat)
        flushed_then(Op.FINISH, lambda: claim.commit("done"))
        assert isinstance(flushed_then(Op.CLAIM, lambda: ledger.claim("k")), Replay)
        status = flushed_then(Op.STATUS, lambda: ledger.status("k"))
        assert getattr(status, "result", None) == "done"


def test_script_flush_on_the_cluster(
    make_store: MakeStore, cluster_url: str, cluster_admin: redis.cluster.RedisCluster
) -> None:
    ledger = _ledger(make_store(cluster_url))
    keys = [f"seg-{i}" for i in range(12)]  # spread over the three masters
    claims = _claims(ledger, keys)
    cluster_admin.script_flush()
    for claim in claims:
        claim.commit(claim.key)
    cluster_admin.script_flush()
    for key in keys:
        replay = ledger.claim(key)
        assert isinstance(replay, Replay) and replay.result() == key


def test_a_listing_of_whole_jobs_after_script_flush_loads_its_script(
    make_store: MakeStore, flushable: tuple[str, redis.Redis | redis.cluster.RedisCluster]
) -> None:
    """``list_statuses`` reads jobs with status.lua, pipelined on a standalone server, one
    call a job on a Cluster: after a SCRIPT FLUSH, either way, it loads the script again."""
    url, admin = flushable
    store = make_store(url)
    ledger = _ledger(store)
    keys = [f"seg-{i}" for i in range(12)]  # spread over the three masters
    for claim in _claims(ledger, keys):
        claim.commit(claim.key)
    admin.script_flush()
    found: dict[str, str | None] = {}  # SCAN may return a key twice
    after = None
    for _ in range(100):  # a page a SCAN step: a few on a Cluster's three nodes
        page = store.list_statuses(JobQuery(namespace=ledger.namespace, after=after))
        found |= {status.job.key: status.job.result for status in page.statuses}
        if (after := page.cursor) is None:
            break
    assert found == {key: f'"{key}"' for key in keys}


def test_killed_connection_recovers_on_the_next_operation(
    make_store: MakeStore, private_redis: RedisServer
) -> None:
    name = f"rill-{uuid.uuid4().hex[:8]}"
    ledger = _ledger(make_store(with_query(private_redis.url, f"{QUIET}&client_name={name}")))
    claim = _claims(ledger, ["k"])[0]
    with private_redis.client() as admin:
        before = _client_ids(admin, name)
        assert before
        for client_id in before:
            admin.client_kill_filter(_id=client_id)
        assert _client_ids(admin, name) == []
        claim.commit("after the kill")
        after = _client_ids(admin, name)
        assert after and not set(after) & set(before)
    replay = ledger.claim("k")
    assert isinstance(replay, Replay) and replay.result() == "after the kill"


def _client_ids(admin: redis.Redis, name: str) -> list[str]:
    return [client["id"] for client in admin.client_list() if client["name"] == name]


def test_a_full_redis_refuses_loudly_and_forgets_nothing(
    make_store: MakeStore, private_redis: RedisServer
) -> None:
    ledger = _ledger(make_store(with_query(private_redis.url, QUIET)))
    claim = _claims(ledger, ["k"])[0]
    with private_redis.client() as admin:
        admin.config_set("maxmemory", 1)  # noeviction: every write is refused, none evicted
        with pytest.raises(StoreUnavailable, match="at maxmemory"):
            claim.commit("too late?")
        with pytest.raises(StoreUnavailable, match="at maxmemory"):
            ledger.claim("other")
        status = ledger.status("k")  # reads still work; the refused writes left no trace
        assert status is not None and status.state.value == "processing"
        assert [a.outcome for a in status.attempts] == [AttemptOutcome.RUNNING]
        assert ledger.status("other") is None
        admin.config_set("maxmemory", 0)
    claim.commit("after")
    replay = ledger.claim("k")
    assert isinstance(replay, Replay) and replay.result() == "after"


# redis-py does not resend a script: a lost reply reaches the ledger at once, which resends
# knowing it does (see _client). A resend inside redis-py would run the script twice.


def _claim_request(key: str) -> ClaimRequest:
    namespace = f"f{uuid.uuid4().hex[:12]}"
    attempt = uuid.uuid4().hex[:24]
    return ClaimRequest(job_id(namespace, key), namespace, key, "fp", "v1", attempt, 30_000_000)


def _evalsha_calls(server: RedisServer) -> int:
    with server.client() as admin:
        calls: int = admin.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
        return calls


def test_a_lost_reply_is_unavailable_at_once_and_sent_once(
    make_store: MakeStore, private_redis: RedisServer
) -> None:
    proxy = FaultProxy("127.0.0.1", private_redis.port)
    try:
        store = make_store(with_query(f"redis://127.0.0.1:{proxy.port}/0", QUIET))
        request = _claim_request("k")
        store.status(request.job_id)  # loads the scripts: the claim below is one EVALSHA
        lost = proxy.arm(request.job_id)
        before = _evalsha_calls(private_redis)
        with pytest.raises(StoreUnavailable, match="may or may not have been applied"):
            store.claim(request)
        assert lost.is_set()
        assert _evalsha_calls(private_redis) - before == 1
    finally:
        proxy.close()


def test_a_reply_after_a_timeout_is_never_read_as_the_next_answer(
    make_store: MakeStore, private_redis: RedisServer
) -> None:
    # CLIENT PAUSE WRITE holds every script until CLIENT UNPAUSE; the store times out first.
    store = make_store(with_query(private_redis.url, f"{QUIET}&socket_timeout=0.5"))
    first, second = _claim_request("first"), _claim_request("second")
    store.status(first.job_id)  # loads the scripts; the store's connection is open
    with private_redis.client() as admin:
        admin.client_pause(30_000, all=False)
        try:
            with pytest.raises(StoreUnavailable, match="may or may not have been applied"):
                store.claim(first)
        finally:
            admin.client_unpause()  # the first claim's late reply, if it runs, goes nowhere
    answer = store.claim(second)
    assert answer.ok and answer.job is not None and answer.job.key == "second"
    again = store.claim(second)
    assert not again.ok and again.job is not None and again.job.key == "second"
