"""``RedisStore`` and ``AsyncRedisStore``: the store port over redis-py, standalone or Cluster.

Every operation is one ``EVALSHA`` of its Lua script: one round trip, atomic on the server,
judged on the server's clock. After a ``NOSCRIPT`` (a ``SCRIPT FLUSH``, a restart, a
failover to a node that never saw it) the store loads the script (on every primary of a
Cluster) and sends the ``EVALSHA`` once more. The twins share the arguments they send
(``_scripts``), the reply decoding (``_rows``) and the operations of more than one call
(``_flows``: listing, purge, the outbox on a Cluster); only the I/O differs.

On a plain standalone client the ``EVALSHA`` goes out on the store's own connections
(``_wire``: framed once, its reply read straight from the socket). On any other client,
and on a Cluster, it goes through the client's ``evalsha``: redis-py's connection pool,
retry policy and Cluster routing (by the keys of the ``EVALSHA``), without the layers of
its ``Script`` objects.

An asyncio Cluster client loads its slot map on first use, and redis-py lets a burst of
first calls race to do it: some are sent before the map exists, and the re-mapping that
follows closes connections other calls are using. ``AsyncRedisStore`` loads the map
once, under a lock, before its first call goes out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import redis.asyncio.cluster
import redis.cluster

from rill_executor import StoreUnavailable
from rill_executor.store import (
    AttemptRef,
    ClaimRequest,
    Completion,
    JobPage,
    JobQuery,
    NoticeBatch,
    NoticeSettlement,
    PurgePage,
    PurgeRequest,
    Recheck,
    Resolution,
    StatusPage,
    StoreAnswer,
    StoreStatus,
    drive,
    drive_async,
)

from . import _flows
from ._client import AsyncClient, SyncClient, async_client, sync_client
from ._deployment import Deployment, Durability, aprobe, probe, unsafe
from ._errors import REDIS_ERRORS, translate, wrap_errors
from ._keys import IDENTITY, job_keys
from ._rows import answer_from, claimed_from, finished_from, status_from
from ._scripts import (
    Op,
    claim_args,
    event_args,
    finish_args,
    heartbeat_args,
    register_output_args,
    resolve_args,
    script,
)
from ._url import StoreUrl, parse_url
from ._wire import async_wire_for, command, wire_for
from ._writers import open_args, open_script, opened

__all__ = [
    "AsyncRedisStore",
    "RedisStore",
    "open_async_redis_store",
    "open_redis_store",
]

T = TypeVar("T")


def _nodes(client: object) -> _flows.Nodes:
    """What a scan goes through (a Cluster's primaries, by name: a cursor names one by its
    place); on an asyncio Cluster client, once its slot map is loaded."""
    if isinstance(client, redis.cluster.RedisCluster | redis.asyncio.cluster.RedisCluster):
        primaries: list[Any] = client.get_primaries()
        return _flows.Nodes(tuple(sorted(primaries, key=lambda n: n.name)))
    return _flows.Nodes()


class RedisStore:
    """The store port on a ``redis.Redis`` or ``redis.cluster.RedisCluster`` client.

    ``durability`` decides what happens when the deployment can lose acknowledged writes
    (see ``Deployment``): ``warn`` (a ``DurabilityWarning``), ``require`` (raise
    ``UnsafeDeployment``) or ``ignore`` (no check). The check costs a few round trips at
    open, and again before the first claim after a new connection and at most every 30 s
    (``Recheck``): a store found unsafe under ``require`` refuses claims until it is safe
    again. A client passed in keeps its own retry policy; ``from_url`` builds one with the
    adapter's (see ``_client``).
    """

    kind = "redis"  # what telemetry calls the store

    def __init__(
        self,
        client: SyncClient,
        *,
        durability: Durability | str = Durability.WARN,
        where: str | None = None,
    ) -> None:
        self.client = client
        self.where = where or _describe(client)
        self._indexed = not isinstance(client, redis.cluster.RedisCluster)  # see _outbox
        self._wire = wire_for(client)  # the scripts' own path on a plain standalone client
        policy = Durability(durability)
        self._recheck = _recheck(policy, self.where)
        if policy is not Durability.IGNORE:
            self._recheck.checked(self.deployment().risks)
            _on_new_connections(client, self._recheck.connected)
        with wrap_errors("store identity", self.where):  # read once, at open
            reply = client.eval(open_script(), 1, IDENTITY, *open_args())
        self._store_id, upgraded = opened(reply, self.where)
        if upgraded and self._indexed:
            with wrap_errors("reindex", self.where):
                drive(_flows.reindex(), self._perform)

    def store_id(self) -> str:
        """The store's identity (key ``rill:store-id``, see ``_writers``), read when the
        store opened."""
        return self._store_id

    @classmethod
    def from_url(cls, url: str) -> RedisStore:
        return cls._from_parsed(parse_url(url))

    @classmethod
    def _from_parsed(cls, parsed: StoreUrl) -> RedisStore:
        with wrap_errors("connection", parsed.where):  # a Cluster client connects here
            client = sync_client(parsed)
        try:
            return cls(client, durability=parsed.durability, where=parsed.where)
        except BaseException:  # the check at open failed: do not leak the connections
            client.close()
            raise

    def _with_clock_offset(self, offset_us: int, *, frozen: bool = False) -> RedisStore:
        """A view of this store on a clock ``offset_us`` later, or (``frozen``) standing at
        ``offset_us``: the test hook of ``rill_executor.testing.with_clock_offset`` and
        ``with_frozen_clock`` (see ``_clock_offset``)."""
        from ._clock_offset import ShiftedRedisStore

        return ShiftedRedisStore(self, offset_us, frozen)

    def ping(self) -> None:
        """``PING`` on the store's pool; on a Cluster, to one primary (its default node)."""
        with wrap_errors("ping", self.where):
            if isinstance(self.client, redis.cluster.RedisCluster):
                self.client.ping(target_nodes=redis.cluster.RedisCluster.DEFAULT_NODE)
            else:
                self.client.ping()

    def deployment(self) -> Deployment:
        """What each primary promises about acknowledged writes (AOF, fsync, eviction)."""
        with wrap_errors("durability check", self.where):
            return probe(self.client, self.where)

    def _safe_to_claim(self) -> None:
        """The deployment checked again when due (``Recheck``); ``UnsafeDeployment``
        while the last check found it unsafe under ``require``."""
        if self._recheck.due():
            self._recheck.checked(self.deployment().risks)
        self._recheck.refuse()

    def claim(self, request: ClaimRequest) -> StoreAnswer:
        self._safe_to_claim()
        if request.watch is not None and not self._indexed:  # the outbox index first
            return drive(_flows.watched_claim(request), self._perform)
        args = claim_args(request, indexed=self._indexed)
        return claimed_from(request, self._run(Op.CLAIM, request.job_id, *args))

    def heartbeat(self, ref: AttemptRef, lease_us: int) -> StoreAnswer:
        reply = self._run(Op.HEARTBEAT, ref.job_id, heartbeat_args(ref, lease_us))
        return answer_from(ref.job_id, reply)

    def register_output(self, ref: AttemptRef, output: str) -> StoreAnswer:
        reply = self._run(Op.REGISTER_OUTPUT, ref.job_id, register_output_args(ref, output))
        return answer_from(ref.job_id, reply)

    def finish(self, ref: AttemptRef, completion: Completion) -> StoreAnswer:
        args = finish_args(ref, completion, indexed=self._indexed)
        return finished_from(ref, completion, self._run(Op.FINISH, ref.job_id, args))

    def status(self, job_id: str) -> StoreStatus | None:
        return status_from(job_id, self._run(Op.STATUS, job_id))

    def resolve(self, job_id: str, resolution: Resolution) -> StoreAnswer:
        args = resolve_args(resolution, indexed=self._indexed)
        return answer_from(job_id, self._run(Op.RESOLVE, job_id, args))

    def record_event(self, job_id: str, event: str) -> bool:
        return bool(self._run(Op.EVENT, job_id, event_args(event)) == 1)

    def lease_notices(self, namespace: str, owner: str, lease_us: int, limit: int) -> NoticeBatch:
        flow = _flows.lease_notices(namespace, owner, lease_us, limit, indexed=self._indexed)
        return drive(flow, self._perform)

    def settle_notice(self, job_id: str, settlement: NoticeSettlement) -> bool:
        flow = _flows.settle_notice(job_id, settlement, indexed=self._indexed)
        return drive(flow, self._perform)

    def list_jobs(self, query: JobQuery) -> JobPage:
        """Scans (see ``_listing``): per step one ``SCAN`` and one pipelined read."""
        return self._scan("list jobs", lambda nodes: _flows.list_jobs(query, nodes))

    def list_statuses(self, query: JobQuery) -> StatusPage:
        """Scans as ``list_jobs``, each job read whole (``status.lua``)."""
        return self._scan(
            "list statuses", lambda nodes: _flows.list_statuses(query, nodes, self.where)
        )

    def purge(self, request: PurgeRequest) -> PurgePage:
        """Scans (see ``_purge``): per step one ``SCAN``, then ``purge.lua`` on what it found."""
        return self._scan("purge", lambda nodes: _flows.purge(request, nodes))

    def _scan(self, doing: str, flow: Callable[[_flows.Nodes], _flows.Flow[T]]) -> T:
        """A flow that scans the store's nodes, what the client raises translated."""
        with wrap_errors(doing, self.where):
            return drive(flow(_nodes(self.client)), self._perform)

    def close(self) -> None:
        if self._wire is not None:
            self._wire.close()
        self.client.close()

    def _run(self, op: Op, job_id: str, *args: bytes) -> Any:
        """One ``EVALSHA`` of ``op``'s script on the job's keys; its errors translated."""
        return self._eval(op, job_keys(job_id), args, job_id)

    def _eval(self, op: Op, keys: tuple[str, ...], args: tuple[bytes, ...], job_id: str) -> Any:
        """As ``_run``, on any keys (a namespace's outbox index too)."""
        lua = script(op)
        try:
            if (wire := self._wire) is not None:
                return wire.script(command(lua.sha_bytes, keys, args), lua.source)
            return drive(_flows.evalsha(lua, keys, args), self._perform)
        except REDIS_ERRORS as exc:  # wrap_errors, inlined: the hot path of every call
            raise translate(exc, op.value, self.where, job_id) from exc

    def _perform(self, action: _flows.Action) -> Any:
        """One action of a flow: a script through ``_eval``, a call on the client."""
        if isinstance(action, _flows.Eval):
            return self._eval(action.op, action.keys, action.args, action.job_id)
        return action.send(self.client)

    def __repr__(self) -> str:
        return f"<RedisStore {self.where}>"


class AsyncRedisStore:
    """The asyncio twin of ``RedisStore``, on ``redis.asyncio`` clients.

    Its constructor does no I/O, so it checks nothing: ``open_async_redis_store`` checks
    the deployment with a short-lived synchronous client when the store is opened by URL;
    otherwise call ``await store.check_durability()``. ``deferred`` is a check to run before
    the first operation instead (the store was opened while Redis was unreachable): an app
    starts, answers ``StoreUnavailable`` meanwhile, and checks once Redis answers.
    """

    kind = "redis"  # what telemetry calls the store

    def __init__(
        self,
        client: AsyncClient,
        *,
        where: str | None = None,
        deferred: Durability | str = Durability.IGNORE,
    ) -> None:
        self.client = client
        self.where = where or _describe(client)
        self._mapped = not isinstance(client, redis.asyncio.cluster.RedisCluster)
        self._indexed = self._mapped  # standalone (see _outbox)
        self._wire = async_wire_for(client)  # as RedisStore's
        self._mapping = asyncio.Lock()
        self._store_id: str | None = None
        self._opened = False  # see _open
        policy = Durability(deferred)
        self._unchecked = None if policy is Durability.IGNORE else policy
        self._recheck = _recheck(Durability.IGNORE, self.where)  # see check_durability

    @classmethod
    def from_url(
        cls, url: str, *, deferred: Durability | str = Durability.IGNORE
    ) -> AsyncRedisStore:
        """The store for ``url``; no I/O and no durability check (see the class docs)."""
        parsed = parse_url(url, is_async=True)
        return cls(async_client(parsed), where=parsed.where, deferred=deferred)

    async def _open(self) -> None:
        """Before the first operation: the durability check left for it, once it passed (or
        warned; a refusal, ``require``, refuses every operation until the deployment is
        fixed), and the versions that may write to the store (``_writers``)."""
        policy = self._unchecked
        if policy is not None:
            await self.check_durability(policy)
            self._unchecked = None
        await self.store_id()
        self._opened = True

    async def store_id(self) -> str:
        """As ``RedisStore.store_id``; read once, by the first call that needs it."""
        if self._store_id is None:
            if not self._mapped:
                await self._map_slots()
            with wrap_errors("store identity", self.where):
                reply = await self.client.eval(open_script(), 1, IDENTITY, *open_args())
            store_id, upgraded = opened(reply, self.where)
            if upgraded and self._indexed:
                with wrap_errors("reindex", self.where):
                    await drive_async(_flows.reindex(), self._perform)
            self._store_id = store_id
        return self._store_id

    async def ping(self) -> None:
        """As ``RedisStore.ping``."""
        if not self._mapped:
            await self._map_slots()
        with wrap_errors("ping", self.where):
            if isinstance(self.client, redis.asyncio.cluster.RedisCluster):
                await self.client.ping(target_nodes=redis.asyncio.cluster.RedisCluster.DEFAULT_NODE)
            else:
                await self.client.ping()

    async def deployment(self) -> Deployment:
        await self._map_slots()
        with wrap_errors("durability check", self.where):
            return await aprobe(self.client, self.where)

    async def check_durability(self, durability: Durability | str = Durability.WARN) -> None:
        """Warn about (or with ``require``, refuse) a deployment that can lose writes; from
        then on, check again as ``RedisStore`` does (``Recheck``)."""
        policy = Durability(durability)
        if policy is not Durability.IGNORE:
            self.watch_durability(policy)
            self._recheck.checked((await self.deployment()).risks)

    def watch_durability(self, durability: Durability | str) -> None:
        """Check the deployment again while the store is used, under ``durability``: before
        the first claim after a new connection, and at most every 30 s (``Recheck``)."""
        policy = Durability(durability)
        if policy is not Durability.IGNORE and self._recheck.policy != policy:
            self._recheck = _recheck(policy, self.where)
            _on_new_connections(self.client, self._recheck.connected)

    async def _safe_to_claim(self) -> None:
        if self._recheck.due():
            self._recheck.checked((await self.deployment()).risks)
        self._recheck.refuse()

    async def claim(self, request: ClaimRequest) -> StoreAnswer:
        await self._safe_to_claim()
        if request.watch is not None and not self._indexed:  # the outbox index first
            return await drive_async(_flows.watched_claim(request), self._perform)
        args = claim_args(request, indexed=self._indexed)
        return claimed_from(request, await self._run(Op.CLAIM, request.job_id, *args))

    async def heartbeat(self, ref: AttemptRef, lease_us: int) -> StoreAnswer:
        reply = await self._run(Op.HEARTBEAT, ref.job_id, heartbeat_args(ref, lease_us))
        return answer_from(ref.job_id, reply)

    async def register_output(self, ref: AttemptRef, output: str) -> StoreAnswer:
        args = register_output_args(ref, output)
        return answer_from(ref.job_id, await self._run(Op.REGISTER_OUTPUT, ref.job_id, args))

    async def finish(self, ref: AttemptRef, completion: Completion) -> StoreAnswer:
        args = finish_args(ref, completion, indexed=self._indexed)
        reply = await self._run(Op.FINISH, ref.job_id, args)
        return finished_from(ref, completion, reply)

    async def status(self, job_id: str) -> StoreStatus | None:
        return status_from(job_id, await self._run(Op.STATUS, job_id))

    async def resolve(self, job_id: str, resolution: Resolution) -> StoreAnswer:
        args = resolve_args(resolution, indexed=self._indexed)
        return answer_from(job_id, await self._run(Op.RESOLVE, job_id, args))

    async def record_event(self, job_id: str, event: str) -> bool:
        return bool(await self._run(Op.EVENT, job_id, event_args(event)) == 1)

    async def lease_notices(
        self, namespace: str, owner: str, lease_us: int, limit: int
    ) -> NoticeBatch:
        flow = _flows.lease_notices(namespace, owner, lease_us, limit, indexed=self._indexed)
        return await drive_async(flow, self._perform)

    async def settle_notice(self, job_id: str, settlement: NoticeSettlement) -> bool:
        flow = _flows.settle_notice(job_id, settlement, indexed=self._indexed)
        return await drive_async(flow, self._perform)

    async def list_jobs(self, query: JobQuery) -> JobPage:
        """As ``RedisStore.list_jobs``."""
        return await self._scan("list jobs", lambda nodes: _flows.list_jobs(query, nodes))

    async def list_statuses(self, query: JobQuery) -> StatusPage:
        """As ``RedisStore.list_statuses``."""
        return await self._scan(
            "list statuses", lambda nodes: _flows.list_statuses(query, nodes, self.where)
        )

    async def purge(self, request: PurgeRequest) -> PurgePage:
        """As ``RedisStore.purge``."""
        return await self._scan("purge", lambda nodes: _flows.purge(request, nodes))

    async def _scan(self, doing: str, flow: Callable[[_flows.Nodes], _flows.Flow[T]]) -> T:
        """As ``RedisStore._scan``, once the client has its slot map (the nodes come from it)."""
        if not self._mapped:
            await self._map_slots()
        with wrap_errors(doing, self.where):
            return await drive_async(flow(_nodes(self.client)), self._perform)

    async def close(self) -> None:
        if self._wire is not None:
            await self._wire.close()
        await self.client.aclose()

    async def _run(self, op: Op, job_id: str, *args: bytes) -> Any:
        """One ``EVALSHA`` of ``op``'s script on the job's keys; its errors translated."""
        return await self._eval(op, job_keys(job_id), args, job_id)

    async def _eval(
        self, op: Op, keys: tuple[str, ...], args: tuple[bytes, ...], job_id: str
    ) -> Any:
        """As ``_run``, on any keys (a namespace's outbox index too)."""
        if not self._opened:
            await self._open()
        if not self._mapped:
            await self._map_slots()
        lua = script(op)
        try:
            if (wire := self._wire) is not None:
                return await wire.script(command(lua.sha_bytes, keys, args), lua.source)
            return await drive_async(_flows.evalsha(lua, keys, args), self._perform)
        except _ASYNC_ERRORS as exc:  # wrap_errors, inlined: the hot path of every call
            raise translate(exc, op.value, self.where, job_id) from exc

    async def _perform(self, action: _flows.Action) -> Any:
        """As ``RedisStore._perform``, awaited."""
        if isinstance(action, _flows.Eval):
            return await self._eval(action.op, action.keys, action.args, action.job_id)
        return await action.send(self.client)

    async def _map_slots(self) -> None:
        """A Cluster client's first connection and slot map, made by one call alone."""
        async with self._mapping:
            if self._mapped:
                return
            assert isinstance(self.client, redis.asyncio.cluster.RedisCluster)
            with wrap_errors("connection", self.where):
                await self.client.initialize()
            self._mapped = True

    def __repr__(self) -> str:
        return f"<AsyncRedisStore {self.where}>"


# redis-py's asyncio Cluster client can raise AttributeError when a connection is closed
# under a call (see the module docs): a lost connection, not a bug of the caller.
_ASYNC_ERRORS = (*REDIS_ERRORS, AttributeError)


def open_redis_store(url: str) -> RedisStore:
    """Entry point of ``redis://``, ``rediss://`` and ``redis+cluster://`` (sync)."""
    return RedisStore.from_url(url)


def _recheck(policy: Durability, where: str) -> Recheck:
    return Recheck(policy, lambda risks: unsafe(risks, where))


def _on_new_connections(client: SyncClient | AsyncClient, hook: Callable[[], None]) -> None:
    """Call ``hook`` after each new connection of a standalone client's pool, once the
    connection is set up as redis-py sets it up. A Cluster's nodes keep redis-py's own
    hook: there the deployment is checked again on the time gate alone."""
    if isinstance(client, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)):
        return
    kwargs = client.connection_pool.connection_kwargs
    if isinstance(client, redis.asyncio.Redis):

        async def connected_async(connection: Any) -> None:
            await connection.on_connect()
            hook()

        kwargs["redis_connect_func"] = connected_async
    else:

        def connected(connection: Any) -> None:
            connection.on_connect()
            hook()

        kwargs["redis_connect_func"] = connected


def open_async_redis_store(url: str) -> AsyncRedisStore:
    """Entry point for asyncio; checks durability once, synchronously, unless ignored. With
    Redis unreachable the check is left for the store's first operation: an app that opens
    its store at import starts, and answers ``StoreUnavailable`` until Redis is back."""
    parsed = parse_url(url, is_async=True)  # the options the asyncio client takes
    if parsed.durability is Durability.IGNORE:
        return AsyncRedisStore.from_url(url)
    try:
        RedisStore._from_parsed(parsed).close()  # the sync store runs the check and warns
    except StoreUnavailable:
        return AsyncRedisStore.from_url(url, deferred=parsed.durability)
    store = AsyncRedisStore.from_url(url)
    store.watch_durability(parsed.durability)
    return store


def _describe(client: SyncClient | AsyncClient) -> str:
    """host:port of a client passed in, for messages (never its credentials)."""
    if isinstance(client, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)):
        return "Redis Cluster"
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return str(kwargs["path"])
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
