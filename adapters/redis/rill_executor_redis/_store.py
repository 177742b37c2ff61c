"""``RedisStore`` and ``AsyncRedisStore``: the store port over redis-py, standalone or Cluster.

Every operation is one ``EVALSHA`` of its Lua script: one round trip, atomic on the server,
judged on the server's clock. After a ``NOSCRIPT`` (a ``SCRIPT FLUSH``, a restart, a
failover to a node that never saw it) the store loads the script (on every primary of a
Cluster) and sends the ``EVALSHA`` once more. The twins share the arguments they send
(``_scripts``) and the reply decoding (``_rows``); only the I/O differs.

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
import uuid
from typing import Any

import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import NoScriptError

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
    Resolution,
    StatusPage,
    StoreAnswer,
    StoreStatus,
)

from ._client import AsyncClient, SyncClient, async_client, sync_client
from ._deployment import Deployment, Durability, aprobe, enforce, probe
from ._errors import REDIS_ERRORS, translate, wrap_errors
from ._keys import IDENTITY, PREFIX, job_keys, outbox_keys
from ._listing import MATCH, STEP, Scan, scan_reply, time_reply
from ._outbox import ClusterPass, new_token, settled_update
from ._purge import Purge, purge_args
from ._rows import (
    FIELD_NAMES,
    answer_from,
    claimed_from,
    finished_from,
    job_notices_from,
    leased_from,
    settled_from,
    status_from,
)
from ._scripts import (
    Op,
    claim_args,
    event_args,
    finish_args,
    heartbeat_args,
    lease_args,
    pack,
    register_output_args,
    resolve_args,
    script,
    settle_args,
)
from ._url import parse_url
from ._wire import async_wire_for, command, wire_for

__all__ = [
    "AsyncRedisStore",
    "RedisStore",
    "open_async_redis_store",
    "open_redis_store",
]


def _scan_nodes(client: object) -> list[Any]:
    """What a scan goes through: a Cluster's primaries in a stable order (a cursor names
    one by its place), or one ``None`` for a standalone server."""
    if isinstance(client, redis.cluster.RedisCluster | redis.asyncio.cluster.RedisCluster):
        primaries: list[Any] = client.get_primaries()
        return sorted(primaries, key=lambda n: n.name)
    return [None]


def _job_id(key: Any) -> str:
    """The job id of a job key a SCAN found: ``rill:{<job_id>}:job``."""
    record = key.decode() if isinstance(key, bytes) else str(key)
    return record[len(PREFIX) + 2 : -len("}:job")]


def _whole_keys(key: Any) -> tuple[str, str]:
    """The (record, history) keys of a job key a SCAN found."""
    return job_keys(_job_id(key))


class RedisStore:
    """The store port on a ``redis.Redis`` or ``redis.cluster.RedisCluster`` client.

    ``durability`` decides what happens when the deployment can lose acknowledged writes
    (see ``Deployment``): ``warn`` (a ``DurabilityWarning``), ``require`` (raise
    ``UnsafeDeployment``) or ``ignore`` (no check). The check costs a few round trips here,
    once. A client passed in keeps its own retry policy; ``from_url`` builds one with the
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
        if policy is not Durability.IGNORE:
            enforce(self.deployment(), policy, self.where)
        with wrap_errors("store identity", self.where):  # read once, at open
            client.set(IDENTITY, uuid.uuid4().hex, nx=True)
            self._store_id = _text(client.get(IDENTITY))

    def store_id(self) -> str:
        """The store's identity (key ``rill:store-id``), read when the store opened."""
        return self._store_id

    @classmethod
    def from_url(cls, url: str) -> RedisStore:
        parsed = parse_url(url)
        with wrap_errors("connection", parsed.where):  # a Cluster client connects here
            client = sync_client(parsed)
        try:
            return cls(client, durability=parsed.durability, where=parsed.where)
        except BaseException:  # the check at open failed: do not leak the connections
            client.close()
            raise

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

    def claim(self, request: ClaimRequest) -> StoreAnswer:
        job_id, token = request.job_id, ""
        if request.watch is not None and not self._indexed:  # see _outbox
            token = new_token()
            keys = outbox_keys(request.namespace)
            self._eval(Op.OUTBOX_WATCH, keys, pack(job_id, token), job_id)
        args = claim_args(request, token, indexed=self._indexed)
        return claimed_from(request, self._run(Op.CLAIM, job_id, *args))

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
        keys = outbox_keys(namespace)
        if self._indexed:
            reply = self._eval(Op.LEASE, keys[:1], lease_args(owner, lease_us, limit))
            return leased_from(namespace, reply)
        run = ClusterPass(owner, lease_us, limit)
        while True:
            for job_id, score in run.candidates(self._eval(Op.OUTBOX_DUE, keys, run.due_args())):
                if run.full:
                    break
                reply = self._run(Op.LEASE_JOB, job_id, run.job_args())
                run.add(job_id, score, job_notices_from(job_id, reply))
            if (update := run.update_args()) is not None:
                self._eval(Op.OUTBOX_UPDATE, keys, update)
            if run.done or run.full:
                return run.batch()

    def settle_notice(self, job_id: str, settlement: NoticeSettlement) -> bool:
        args = settle_args(settlement, indexed=self._indexed)
        namespace, job = settled_from(job_id, self._run(Op.SETTLE, job_id, args))
        if namespace is not None and not self._indexed:  # see _outbox
            keys = outbox_keys(namespace)
            self._eval(Op.OUTBOX_UPDATE, keys, settled_update(job_id, job), job_id)
        return namespace is not None

    def list_jobs(self, query: JobQuery) -> JobPage:
        """Scans (see ``_listing``): per step one ``SCAN`` and one pipelined read."""
        client = self.client
        cluster = isinstance(client, redis.cluster.RedisCluster)
        with wrap_errors("list jobs", self.where):
            nodes = _scan_nodes(client)
            scan = Scan(query, len(nodes))
            while (step := scan.step()) is not None:
                node = {"target_nodes": nodes[step[0]]} if cluster else {}
                cursor, keys = scan_reply(
                    self.client.scan(step[1], match=MATCH, count=STEP, **node)
                )
                pipe = self.client.pipeline(transaction=False)
                if not cluster:
                    pipe.time()
                for key in keys:
                    pipe.hmget(key, FIELD_NAMES)
                replies = pipe.execute()
                now = self.client.time(**node) if cluster else replies.pop(0)
                scan.add(cursor, keys, replies, time_reply(now))
        return scan.page()

    def list_statuses(self, query: JobQuery) -> StatusPage:
        """Scans as ``list_jobs``; per step one ``SCAN`` and one pipeline of ``status.lua``
        (a Cluster client pipelines no script: there, one ``status.lua`` a job)."""
        client = self.client
        cluster = isinstance(client, redis.cluster.RedisCluster)
        with wrap_errors("list statuses", self.where):
            nodes = _scan_nodes(client)
            scan = Scan(query, len(nodes))
            while (step := scan.step()) is not None:
                node = {"target_nodes": nodes[step[0]]} if cluster else {}
                cursor, keys = scan_reply(client.scan(step[1], match=MATCH, count=STEP, **node))
                if cluster:
                    replies = [self._run(Op.STATUS, _job_id(key)) for key in keys]
                    now = client.time(**node)
                else:
                    now, *replies = self._statuses(keys, query.namespace)
                scan.add_whole(cursor, keys, replies, time_reply(now))
        return scan.status_page()

    def _statuses(self, keys: list[Any], namespace: str) -> list[Any]:
        """``TIME``, then ``status.lua`` on each job key, answering only ``namespace``'s
        jobs whole: one pipelined round trip."""
        lua = script(Op.STATUS)
        for _ in range(2):
            pipe = self.client.pipeline(transaction=False)
            pipe.time()
            for key in keys:
                pipe.evalsha(lua.sha, 2, *_whole_keys(key), namespace)
            try:
                return pipe.execute()
            except NoScriptError:  # flushed, restarted, failed over: load it, send again
                self.client.script_load(lua.source)
        raise StoreUnavailable(f"{self.where}: the status script could not be loaded")

    def purge(self, request: PurgeRequest) -> PurgePage:
        """Scans (see ``_purge``): per step one ``SCAN``, then ``purge.lua`` on what it found."""
        client = self.client
        cluster = isinstance(client, redis.cluster.RedisCluster)
        args = purge_args(request, indexed=self._indexed)
        index = outbox_keys(request.namespace)
        with wrap_errors("purge", self.where):
            nodes = _scan_nodes(client)
            run = Purge(request, len(nodes))
            while True:
                if batch := run.batch():
                    run.add(batch, self._purge(batch, args))
                    if (update := run.outbox_update()) is not None:
                        self._eval(Op.OUTBOX_UPDATE, index, update)
                elif (step := run.step()) is not None:
                    node = {"target_nodes": nodes[step[0]]} if cluster else {}
                    reply = client.scan(step[1], match=MATCH, count=step[2], **node)
                    run.scanned(*scan_reply(reply))
                else:
                    return run.page(0 if run.now else time_reply(client.time()))

    def _purge(self, job_ids: list[str], args: bytes) -> list[Any]:
        """``purge.lua`` on ``job_ids``: one call on a standalone server, one per job
        (pipelined) on a Cluster; a script the server does not know is loaded and sent again
        (a purge checks everything again, so a second run changes nothing twice)."""
        lua = script(Op.PURGE)
        if self._indexed:
            keys = [key for job_id in job_ids for key in job_keys(job_id)]
            try:
                return [self.client.evalsha(lua.sha, len(keys), *keys, args)]
            except NoScriptError:
                self.client.script_load(lua.source)
                return [self.client.evalsha(lua.sha, len(keys), *keys, args)]
        replies: list[Any] = [None] * len(job_ids)
        todo = list(range(len(job_ids)))
        for _ in range(2):
            pipe = self.client.pipeline(transaction=False)
            for i in todo:
                # redis-py refuses pipe.evalsha on a Cluster; the command routes by its keys
                pipe.execute_command("EVALSHA", lua.sha, 2, *job_keys(job_ids[i]), args)
            for i, reply in zip(todo, pipe.execute(raise_on_error=False), strict=True):
                replies[i] = reply
            todo = [i for i in todo if isinstance(replies[i], NoScriptError)]
            if not todo:
                break
            self.client.script_load(lua.source)
        return _raised(replies)

    def close(self) -> None:
        if self._wire is not None:
            self._wire.close()
        self.client.close()

    def _run(self, op: Op, job_id: str, *args: bytes) -> Any:
        """One ``EVALSHA`` of ``op``'s script on the job's keys; its errors translated."""
        lua = script(op)
        keys = job_keys(job_id)
        try:
            if (wire := self._wire) is not None:
                return wire.script(command(lua.sha_bytes, keys, args), lua.source)
            try:
                return self.client.evalsha(lua.sha, 2, *keys, *args)
            except NoScriptError:  # flushed, restarted, failed over: load it, send again
                self.client.script_load(lua.source)
                return self.client.evalsha(lua.sha, 2, *keys, *args)
        except REDIS_ERRORS as exc:  # wrap_errors, inlined: the hot path of every call
            raise translate(exc, op.value, self.where, job_id) from exc

    def _eval(self, op: Op, keys: tuple[str, ...], args: bytes, job_id: str = "") -> Any:
        """As ``_run``, on other keys (a namespace's outbox index)."""
        lua = script(op)
        with wrap_errors(op.value, self.where, job_id):
            if (wire := self._wire) is not None:
                return wire.script(command(lua.sha_bytes, keys, (args,)), lua.source)
            try:
                return self.client.evalsha(lua.sha, len(keys), *keys, args)
            except NoScriptError:
                self.client.script_load(lua.source)
                return self.client.evalsha(lua.sha, len(keys), *keys, args)

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
        policy = Durability(deferred)
        self._unchecked = None if policy is Durability.IGNORE else policy

    @classmethod
    def from_url(
        cls, url: str, *, deferred: Durability | str = Durability.IGNORE
    ) -> AsyncRedisStore:
        """The store for ``url``; no I/O and no durability check (see the class docs)."""
        parsed = parse_url(url)
        return cls(async_client(parsed), where=parsed.where, deferred=deferred)

    async def _check_deferred(self) -> None:
        """The durability check left for the first operation: once it passed (or warned);
        a refusal (``require``) refuses every operation until the deployment is fixed."""
        policy = self._unchecked
        if policy is not None:
            await self.check_durability(policy)
            self._unchecked = None

    async def store_id(self) -> str:
        """As ``RedisStore.store_id``; read once, by the first call that needs it."""
        if self._store_id is None:
            if not self._mapped:
                await self._map_slots()
            with wrap_errors("store identity", self.where):
                await self.client.set(IDENTITY, uuid.uuid4().hex, nx=True)
                self._store_id = _text(await self.client.get(IDENTITY))
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
        """Warn about (or with ``require``, refuse) a deployment that can lose writes."""
        policy = Durability(durability)
        if policy is not Durability.IGNORE:
            enforce(await self.deployment(), policy, self.where)

    async def claim(self, request: ClaimRequest) -> StoreAnswer:
        job_id, token = request.job_id, ""
        if request.watch is not None and not self._indexed:  # see _outbox
            token = new_token()
            keys = outbox_keys(request.namespace)
            await self._eval(Op.OUTBOX_WATCH, keys, pack(job_id, token), job_id)
        args = claim_args(request, token, indexed=self._indexed)
        return claimed_from(request, await self._run(Op.CLAIM, job_id, *args))

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
        keys = outbox_keys(namespace)
        if self._indexed:
            reply = await self._eval(Op.LEASE, keys[:1], lease_args(owner, lease_us, limit))
            return leased_from(namespace, reply)
        run = ClusterPass(owner, lease_us, limit)
        while True:
            due = await self._eval(Op.OUTBOX_DUE, keys, run.due_args())
            for job_id, score in run.candidates(due):
                if run.full:
                    break
                reply = await self._run(Op.LEASE_JOB, job_id, run.job_args())
                run.add(job_id, score, job_notices_from(job_id, reply))
            if (update := run.update_args()) is not None:
                await self._eval(Op.OUTBOX_UPDATE, keys, update)
            if run.done or run.full:
                return run.batch()

    async def settle_notice(self, job_id: str, settlement: NoticeSettlement) -> bool:
        args = settle_args(settlement, indexed=self._indexed)
        namespace, job = settled_from(job_id, await self._run(Op.SETTLE, job_id, args))
        if namespace is not None and not self._indexed:  # see _outbox
            keys = outbox_keys(namespace)
            await self._eval(Op.OUTBOX_UPDATE, keys, settled_update(job_id, job), job_id)
        return namespace is not None

    async def list_jobs(self, query: JobQuery) -> JobPage:
        if not self._mapped:
            await self._map_slots()
        client = self.client
        cluster = isinstance(client, redis.asyncio.cluster.RedisCluster)
        with wrap_errors("list jobs", self.where):
            nodes = _scan_nodes(client)
            scan = Scan(query, len(nodes))
            while (step := scan.step()) is not None:
                node = {"target_nodes": nodes[step[0]]} if cluster else {}
                reply = await client.scan(step[1], match=MATCH, count=STEP, **node)
                cursor, keys = scan_reply(reply)
                pipe = client.pipeline(transaction=False)
                if not cluster:
                    pipe.time()
                for key in keys:
                    pipe.hmget(key, FIELD_NAMES)
                replies = await pipe.execute()
                now = await client.time(**node) if cluster else replies.pop(0)
                scan.add(cursor, keys, replies, time_reply(now))
        return scan.page()

    async def list_statuses(self, query: JobQuery) -> StatusPage:
        """As ``RedisStore.list_statuses``."""
        if not self._mapped:
            await self._map_slots()
        client = self.client
        cluster = isinstance(client, redis.asyncio.cluster.RedisCluster)
        with wrap_errors("list statuses", self.where):
            nodes = _scan_nodes(client)
            scan = Scan(query, len(nodes))
            while (step := scan.step()) is not None:
                node = {"target_nodes": nodes[step[0]]} if cluster else {}
                reply = await client.scan(step[1], match=MATCH, count=STEP, **node)
                cursor, keys = scan_reply(reply)
                if cluster:
                    replies = [await self._run(Op.STATUS, _job_id(key)) for key in keys]
                    now = await client.time(**node)
                else:
                    now, *replies = await self._statuses(keys, query.namespace)
                scan.add_whole(cursor, keys, replies, time_reply(now))
        return scan.status_page()

    async def _statuses(self, keys: list[Any], namespace: str) -> list[Any]:
        lua = script(Op.STATUS)
        for _ in range(2):
            pipe = self.client.pipeline(transaction=False)
            pipe.time()
            for key in keys:
                pipe.evalsha(lua.sha, 2, *_whole_keys(key), namespace)
            try:
                return await pipe.execute()
            except NoScriptError:  # flushed, restarted, failed over: load it, send again
                await self.client.script_load(lua.source)
        raise StoreUnavailable(f"{self.where}: the status script could not be loaded")

    async def purge(self, request: PurgeRequest) -> PurgePage:
        """As ``RedisStore.purge``."""
        if not self._mapped:
            await self._map_slots()
        client = self.client
        cluster = isinstance(client, redis.asyncio.cluster.RedisCluster)
        args = purge_args(request, indexed=self._indexed)
        index = outbox_keys(request.namespace)
        with wrap_errors("purge", self.where):
            nodes = _scan_nodes(client)
            run = Purge(request, len(nodes))
            while True:
                if batch := run.batch():
                    run.add(batch, await self._purge(batch, args))
                    if (update := run.outbox_update()) is not None:
                        await self._eval(Op.OUTBOX_UPDATE, index, update)
                elif (step := run.step()) is not None:
                    node = {"target_nodes": nodes[step[0]]} if cluster else {}
                    reply = await client.scan(step[1], match=MATCH, count=step[2], **node)
                    run.scanned(*scan_reply(reply))
                else:
                    return run.page(0 if run.now else time_reply(await client.time()))

    async def _purge(self, job_ids: list[str], args: bytes) -> list[Any]:
        """As ``RedisStore._purge``."""
        lua = script(Op.PURGE)
        if self._indexed:
            keys = [key for job_id in job_ids for key in job_keys(job_id)]
            try:
                return [await self.client.evalsha(lua.sha, len(keys), *keys, args)]
            except NoScriptError:
                await self.client.script_load(lua.source)
                return [await self.client.evalsha(lua.sha, len(keys), *keys, args)]
        replies: list[Any] = [None] * len(job_ids)
        todo = list(range(len(job_ids)))
        for _ in range(2):
            pipe = self.client.pipeline(transaction=False)
            for i in todo:
                # redis-py refuses pipe.evalsha on a Cluster; the command routes by its keys
                pipe.execute_command("EVALSHA", lua.sha, 2, *job_keys(job_ids[i]), args)
            for i, reply in zip(todo, await pipe.execute(raise_on_error=False), strict=True):
                replies[i] = reply
            todo = [i for i in todo if isinstance(replies[i], NoScriptError)]
            if not todo:
                break
            await self.client.script_load(lua.source)
        return _raised(replies)

    async def close(self) -> None:
        if self._wire is not None:
            await self._wire.close()
        await self.client.aclose()

    async def _run(self, op: Op, job_id: str, *args: bytes) -> Any:
        """One ``EVALSHA`` of ``op``'s script on the job's keys; its errors translated."""
        if self._unchecked is not None:
            await self._check_deferred()
        if not self._mapped:
            await self._map_slots()
        lua = script(op)
        keys = job_keys(job_id)
        try:
            if (wire := self._wire) is not None:
                return await wire.script(command(lua.sha_bytes, keys, args), lua.source)
            try:
                return await self.client.evalsha(lua.sha, 2, *keys, *args)
            except NoScriptError:  # flushed, restarted, failed over: load it, send again
                await self.client.script_load(lua.source)
                return await self.client.evalsha(lua.sha, 2, *keys, *args)
        except _ASYNC_ERRORS as exc:  # wrap_errors, inlined: the hot path of every call
            raise translate(exc, op.value, self.where, job_id) from exc

    async def _eval(self, op: Op, keys: tuple[str, ...], args: bytes, job_id: str = "") -> Any:
        """As ``_run``, on other keys (a namespace's outbox index)."""
        if self._unchecked is not None:
            await self._check_deferred()
        if not self._mapped:
            await self._map_slots()
        lua = script(op)
        try:
            if (wire := self._wire) is not None:
                return await wire.script(command(lua.sha_bytes, keys, (args,)), lua.source)
            try:
                return await self.client.evalsha(lua.sha, len(keys), *keys, args)
            except NoScriptError:
                await self.client.script_load(lua.source)
                return await self.client.evalsha(lua.sha, len(keys), *keys, args)
        except _ASYNC_ERRORS as exc:
            raise translate(exc, op.value, self.where, job_id) from exc

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


def open_async_redis_store(url: str) -> AsyncRedisStore:
    """Entry point for asyncio; checks durability once, synchronously, unless ignored. With
    Redis unreachable the check is left for the store's first operation: an app that opens
    its store at import starts, and answers ``StoreUnavailable`` until Redis is back."""
    parsed = parse_url(url)
    if parsed.durability is Durability.IGNORE:
        return AsyncRedisStore.from_url(url)
    try:
        RedisStore.from_url(url).close()  # the sync store runs the check and warns
    except StoreUnavailable:
        return AsyncRedisStore.from_url(url, deferred=parsed.durability)
    return AsyncRedisStore.from_url(url)


def _raised(replies: list[Any]) -> list[Any]:
    """A pipeline's replies, or the first error among them raised."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


def _text(reply: bytes | str | None) -> str:
    return reply.decode() if isinstance(reply, bytes) else str(reply)


def _describe(client: SyncClient | AsyncClient) -> str:
    """host:port of a client passed in, for messages (never its credentials)."""
    if isinstance(client, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)):
        return "Redis Cluster"
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return str(kwargs["path"])
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
