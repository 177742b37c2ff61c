"""The store's operations of more than one call, each one I/O-free flow.

A flow is a generator: it yields plain actions (``Eval`` a script through the store, ``Call``
a client method, send a ``Pipeline``) and receives what came of each, or has the call's
exception raised at its ``yield``. ``RedisStore`` and ``AsyncRedisStore`` drive the same
flows, with ``drive`` and ``drive_async``: only the I/O differs, so every decision (what to
scan, when to load a script, what the outbox index needs on a Cluster) is written once.

redis-py's sync and asyncio clients share their method names, so a ``Call`` or a
``Pipeline`` sends itself: it answers the reply, or on an asyncio client an awaitable of it.
An operation of one script (heartbeat, finish, status…) is no flow: it is a plain call of
the store, and a claim is one only when it first writes the outbox index.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

from redis.exceptions import NoScriptError

from rill_executor.store import (
    ClaimRequest,
    JobPage,
    JobQuery,
    NoticeBatch,
    NoticeSettlement,
    PurgePage,
    PurgeRequest,
    StatusPage,
    StoreAnswer,
    StoreUnavailable,
)

from ._keys import job_id_of, job_keys, outbox_keys
from ._listing import MATCH, STEP, Scan, scan_reply, time_reply
from ._outbox import ClusterPass, new_token, settled_update
from ._purge import Purge, purge_args
from ._rows import FIELD_NAMES, claimed_from, job_notices_from, leased_from, settled_from
from ._scripts import Op, Script, claim_args, lease_args, pack, script, settle_args

__all__ = [
    "Action",
    "Call",
    "Eval",
    "Flow",
    "Nodes",
    "Pipeline",
    "evalsha",
    "lease_notices",
    "list_jobs",
    "list_statuses",
    "purge",
    "reindex",
    "settle_notice",
    "watched_claim",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Eval:
    """Run ``op``'s script on ``keys`` through the store (its own connections where it has
    them, a ``NOSCRIPT`` answered, errors translated for ``job_id``); answer the reply."""

    op: Op
    keys: tuple[str, ...]
    args: tuple[bytes, ...]
    job_id: str = ""


@dataclass(frozen=True, slots=True)
class Call:
    """Call the client's ``method``; answer its reply."""

    method: str
    args: tuple[Any, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)

    def send(self, client: Any) -> Any:
        return getattr(client, self.method)(*self.args, **self.options)


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Send ``calls`` (method, args) in one pipeline, no transaction; answer the replies.
    An error among them is raised (the first), or with ``raise_on_error`` False answered
    in its place."""

    calls: tuple[tuple[str, tuple[Any, ...]], ...]
    raise_on_error: bool = True

    def send(self, client: Any) -> Any:
        pipe = client.pipeline(transaction=False)
        for method, args in self.calls:
            getattr(pipe, method)(*args)
        return pipe.execute(raise_on_error=self.raise_on_error)


Action: TypeAlias = Eval | Call | Pipeline
Flow: TypeAlias = Generator[Action, Any, T]


@dataclass(frozen=True, slots=True)
class Nodes:
    """Where a scan goes: a Cluster's primaries in a stable order (a cursor names one by
    its place), or none: a standalone server, the client's one node."""

    primaries: tuple[Any, ...] = ()

    @property
    def cluster(self) -> bool:
        return bool(self.primaries)

    @property
    def count(self) -> int:
        return len(self.primaries) or 1

    def target(self, index: int) -> dict[str, Any]:
        """The options of a call sent to node ``index``."""
        return {"target_nodes": self.primaries[index]} if self.primaries else {}


def evalsha(lua: Script, keys: tuple[str, ...], args: tuple[bytes, ...]) -> Flow[Any]:
    """``EVALSHA`` through the client; a script the server does not know (flushed,
    restarted, failed over) is loaded and sent once more."""
    command = (lua.sha, len(keys), *keys, *args)
    try:
        return (yield Call("evalsha", command))
    except NoScriptError:
        yield Call("script_load", (lua.source,))
        return (yield Call("evalsha", command))


def _job_eval(op: Op, job_id: str, *args: bytes) -> Eval:
    """``op``'s script on the keys of ``job_id``."""
    return Eval(op, job_keys(job_id), args, job_id)


def watched_claim(request: ClaimRequest) -> Flow[StoreAnswer]:
    """A claim with a watch on a Cluster: the job first goes into the outbox index, under
    a fresh token the claim writes into the job too (see ``_outbox``)."""
    job_id, token = request.job_id, new_token()
    yield Eval(Op.OUTBOX_WATCH, outbox_keys(request.namespace), (pack(job_id, token),), job_id)
    reply = yield _job_eval(Op.CLAIM, job_id, *claim_args(request, token, indexed=False))
    return claimed_from(request, reply)


def lease_notices(
    namespace: str, owner: str, lease_us: int, limit: int, *, indexed: bool
) -> Flow[NoticeBatch]:
    """One script on a standalone server's exact index; on a Cluster, passes over the
    index (``ClusterPass``) until the batch is full or nothing more is due."""
    keys = outbox_keys(namespace)
    if indexed:
        reply = yield Eval(Op.LEASE, keys[:1], (lease_args(owner, lease_us, limit),))
        return leased_from(namespace, reply)
    run = ClusterPass(owner, lease_us, limit)
    while True:
        for job_id, score in run.candidates((yield Eval(Op.OUTBOX_DUE, keys, (run.due_args(),)))):
            if run.full:
                break
            reply = yield _job_eval(Op.LEASE_JOB, job_id, run.job_args())
            run.add(job_id, score, job_notices_from(job_id, reply))
        if (update := run.update_args()) is not None:
            yield Eval(Op.OUTBOX_UPDATE, keys, (update,))
        if run.done or run.full:
            return run.batch()


def settle_notice(job_id: str, settlement: NoticeSettlement, *, indexed: bool) -> Flow[bool]:
    """The settle script; on a Cluster, then the job's entry in its outbox index."""
    args = settle_args(settlement, indexed=indexed)
    namespace, job = settled_from(job_id, (yield _job_eval(Op.SETTLE, job_id, args)))
    if namespace is not None and not indexed:
        update = settled_update(job_id, job)
        yield Eval(Op.OUTBOX_UPDATE, outbox_keys(namespace), (update,), job_id)
    return namespace is not None


def list_jobs(query: JobQuery, nodes: Nodes) -> Flow[JobPage]:
    """Scans (see ``_listing``): per step one ``SCAN`` and one pipelined ``HMGET`` of what
    it found, with the node's ``TIME`` (in the pipeline where it reaches the one node)."""
    scan = Scan(query, nodes.count)
    while (step := scan.step()) is not None:
        target = nodes.target(step[0])
        cursor, keys = yield from _scanned(target, step[1], STEP)
        reads = tuple(("hmget", (key, FIELD_NAMES)) for key in keys)
        if nodes.cluster:
            replies = yield Pipeline(reads)
            now = yield Call("time", (), target)
        else:
            now, *replies = yield Pipeline((("time", ()), *reads))
        scan.add(cursor, keys, replies, time_reply(now))
    return scan.page()


def list_statuses(query: JobQuery, nodes: Nodes, where: str) -> Flow[StatusPage]:
    """Scans as ``list_jobs``; per step one ``SCAN`` and one pipeline of ``status.lua``
    (a Cluster client pipelines no script: there, one ``status.lua`` a job)."""
    scan = Scan(query, nodes.count)
    while (step := scan.step()) is not None:
        target = nodes.target(step[0])
        cursor, keys = yield from _scanned(target, step[1], STEP)
        if nodes.cluster:
            replies = []
            for key in keys:
                replies.append((yield _job_eval(Op.STATUS, job_id_of(key))))
            now = yield Call("time", (), target)
        else:
            now, *replies = yield from _statuses(keys, query.namespace, where)
        scan.add_whole(cursor, keys, replies, time_reply(now))
    return scan.status_page()


def _scanned(target: dict[str, Any], cursor: int, count: int) -> Flow[tuple[int, list[Any]]]:
    """One ``SCAN`` step over job keys: the next cursor and the keys it found."""
    return scan_reply((yield Call("scan", (cursor,), {"match": MATCH, "count": count, **target})))


def _statuses(keys: list[Any], namespace: str, where: str) -> Flow[list[Any]]:
    """``TIME``, then ``status.lua`` on each job key, answering only ``namespace``'s
    jobs whole: one pipelined round trip."""
    lua = script(Op.STATUS)
    reads = (("evalsha", (lua.sha, 2, *job_keys(job_id_of(key)), namespace)) for key in keys)
    calls = (("time", ()), *reads)
    for _ in range(2):
        try:
            replies: list[Any] = yield Pipeline(calls)
            return replies
        except NoScriptError:  # flushed, restarted, failed over: load it, send again
            yield Call("script_load", (lua.source,))
    raise StoreUnavailable(f"{where}: the status script could not be loaded")


def purge(request: PurgeRequest, nodes: Nodes) -> Flow[PurgePage]:
    """Scans (see ``_purge``): per step one ``SCAN``, then ``purge.lua`` on what it found;
    on a Cluster, the outbox index entries of the jobs it deleted go after them."""
    indexed = not nodes.cluster  # see _outbox
    args = purge_args(request, indexed=indexed)
    run = Purge(request, nodes.count)
    while True:
        if batch := run.batch():
            run.add(batch, (yield from _purged(batch, args, indexed=indexed)))
            if (update := run.outbox_update()) is not None:
                yield Eval(Op.OUTBOX_UPDATE, outbox_keys(request.namespace), (update,))
        elif (step := run.step()) is not None:
            run.scanned(*(yield from _scanned(nodes.target(step[0]), step[1], step[2])))
        elif run.now:
            return run.page(0)
        else:  # nothing went to purge.lua: the page's time is the server's
            return run.page(time_reply((yield Call("time"))))


def reindex() -> Flow[int]:
    """Every job of a standalone server put where the outbox index says it belongs
    (``reindex.lua``, one call per ``SCAN`` step): run once, by the process that upgrades
    a store from version 10 or older (``_writers``). Answers how many jobs are indexed."""
    lua, cursor, indexed = script(Op.REINDEX), 0, 0
    while True:
        cursor, keys = yield from _scanned({}, cursor, STEP)
        if keys:
            indexed += int((yield from evalsha(lua, tuple(keys), ())))
        if cursor == 0:
            return indexed


def _purged(job_ids: list[str], args: bytes, *, indexed: bool) -> Flow[list[Any]]:
    """``purge.lua`` on ``job_ids``: one call on a standalone server, one per job
    (pipelined) on a Cluster; a script the server does not know is loaded and sent again
    (a purge checks everything again, so a second run changes nothing twice)."""
    lua = script(Op.PURGE)
    if indexed:
        keys = tuple(key for job_id in job_ids for key in job_keys(job_id))
        return [(yield from evalsha(lua, keys, (args,)))]
    replies: list[Any] = [None] * len(job_ids)
    todo = list(range(len(job_ids)))
    for _ in range(2):
        # redis-py refuses pipe.evalsha on a Cluster; the command routes by its keys
        calls = tuple(
            ("execute_command", ("EVALSHA", lua.sha, 2, *job_keys(job_ids[i]), args)) for i in todo
        )
        for i, reply in zip(todo, (yield Pipeline(calls, raise_on_error=False)), strict=True):
            replies[i] = reply
        todo = [i for i in todo if isinstance(replies[i], NoScriptError)]
        if not todo:
            break
        yield Call("script_load", (lua.source,))
    return _raised(replies)


def _raised(replies: list[Any]) -> list[Any]:
    """A pipeline's replies, or the first error among them raised."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies
