"""The store's own path for its scripts on a standalone server: the ``EVALSHA`` framed
once, sent on a connection the store keeps for its scripts.

redis-py's ``execute_command`` spends more of the client's time on a script call than the
store does on its arguments and reply (cProfile, ``docs/benchmarks-log.md``): each call takes
a connection from the pool and gives it back, with a poll of the socket that sets its
timeout twice and four observability counters; runs the retry wrapper (no resends here,
see ``_client``) and the per-command duration recorder; and frames every argument through
the encoder. ``Wire`` keeps the connections itself (made by the client's pool, with its
connection class and settings: TLS, credentials, database, protocol) and does only what a
script call needs:

- a connection idle since its last call is checked with a zero-timeout ``select``: if the
  server closed it (a restart, a client timeout) or left anything to read, it is closed and
  opened afresh before the call is sent, as the pool's check does;
- the command goes out as one buffer (``command``), the reply is read with the
  connection's parser; a reply that is a Redis error leaves the connection clean, anything
  else (a timeout, a lost connection, an interrupt) closes it, so a late reply is never read
  as the answer to the next call;
- connections are taken and given back with ``list.pop`` / ``append`` (atomic in CPython):
  each thread's call has one to itself; a forked child starts with none of its parent's.

``AsyncWire`` is the same for ``redis.asyncio``, where the saving is larger: redis-py sends
each command under ``asyncio.wait_for`` (a task per command on Python 3.11) and takes the
pool's lock twice, and each command of each connection is a ``send`` of its own. Instead,
the calls of one event loop share one connection (``_Pipe``), checked as ``Wire`` checks an
idle one before a call (the server's close may be on its socket before the reader task has
had a turn to see it); the commands made in one turn
of the loop go out in one write, and a reader task hands each reply to the oldest call still
waiting (RESP answers in order). With 64 calls in flight that is one ``send`` for up to 64
commands, where a ``send`` on loopback costs more than a script's arguments and reply (the
kernel's delivery to the server runs in it). The socket timeout bounds the oldest call's
wait as one timer that aborts the connection's transport; a lost connection, a timeout or a
reply that is not one fails every call waiting on the pipe, as it would have failed each on
a connection of its own, and the next call opens a new one.

Used only for a plain ``redis.Redis`` (``redis.asyncio.Redis``) on a plain
``ConnectionPool`` without client-side caching or maintenance notifications, whose
connections have the redis-py internals read here (``wire_for``, ``async_wire_for``). Those
internals (``SYNC_PARTS``, ``ASYNC_PARTS``) are checked on redis-py's own connection classes
at import (``SYNC_MISSING``, ``ASYNC_MISSING``): a redis-py that renamed or removed one runs
the scripts through its own path, as for any other client, never into an ``AttributeError``.
Every other client, and every command other than the scripts, goes through redis-py as
before. redis-py's own per-command metrics do not count these calls; the ledger's
telemetry does.
"""

from __future__ import annotations

import asyncio
import collections
import math
import os
import select
import weakref
from collections.abc import Sequence
from typing import Any

import redis
import redis.asyncio
from redis.exceptions import InvalidResponse, NoScriptError, ResponseError

__all__ = [
    "ASYNC_MISSING",
    "ASYNC_PARTS",
    "SYNC_MISSING",
    "SYNC_PARTS",
    "AsyncWire",
    "Wire",
    "async_wire_for",
    "command",
    "load",
    "missing_parts",
    "wire_for",
]

# The parts of a redis-py connection the wire uses; those with an underscore are internals.
SYNC_PARTS = ("_sock", "_parser", "send_packed_command", "disconnect", "can_read")
ASYNC_PARTS = ("_reader", "_writer", "_close", "_parser", "connect", "disconnect", "socket_timeout")


def missing_parts(
    connection_class: type, parts: tuple[str, ...], kwargs: dict[str, Any] | None = None
) -> list[str]:
    """The parts a connection of ``connection_class`` (made with ``kwargs``, not connected)
    lacks of ``parts``, and of its parser the error mapping ``_reply`` calls."""
    try:
        probe = connection_class(**(kwargs or {}))
    except Exception as exc:  # whatever the reason, redis-py's path still works
        return [f"{connection_class.__name__}(): {type(exc).__name__}"]
    missing = [part for part in parts if not hasattr(probe, part)]
    if not hasattr(getattr(probe, "_parser", None), "parse_error"):
        missing.append("_parser.parse_error")
    return missing


# Checked once, at import: empty where the installed redis-py has every part.
SYNC_MISSING = missing_parts(redis.Connection, SYNC_PARTS)
ASYNC_MISSING = missing_parts(redis.asyncio.Connection, ASYNC_PARTS)


def load(source: str) -> bytes:
    """``SCRIPT LOAD source`` in RESP: after a ``NOSCRIPT``, sent on the same connections."""
    text = source.encode()
    return b"*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$%d\r\n%s\r\n" % (len(text), text)


def command(sha: bytes, keys: Sequence[str], args: Sequence[bytes]) -> bytes:
    """``EVALSHA sha len(keys) keys... args...`` in RESP, as one buffer."""
    parts = [b"*%d\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n" % (3 + len(keys) + len(args), sha)]
    count = b"%d" % len(keys)
    parts.append(b"$%d\r\n%s\r\n" % (len(count), count))
    for key in keys:
        name = key.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(name), name))
    for arg in args:
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


def _reply(connection: Any, kind: bytes, rest: bytes) -> Any:
    """A reply other than a bulk string: an integer, a status, or an error (raised)."""
    if kind == b":":
        return int(rest)
    if kind == b"+":
        return rest
    if kind == b"-":  # redis-py's parser's mapping: NoScriptError, OutOfMemoryError, ...
        raise connection._parser.parse_error(rest.decode("utf-8", "replace"))
    raise InvalidResponse(f"unexpected reply to a script: {kind + rest!r:.100}")


_CHUNK = 65536


def _read(connection: Any) -> Any:
    """One reply from the connection's socket (its timeout bounds each read), as
    ``_read_async``. The reply must be all there is: the scripts' calls are never pipelined."""
    sock = connection._sock
    data = sock.recv(_CHUNK)
    while (end := data.find(b"\r\n")) < 0:
        data += _more(sock)
    kind, rest = data[:1], data[1:end]
    if kind != b"$":
        if len(data) != end + 2:
            raise InvalidResponse(f"more than one reply to a script: {data!r:.100}")
        return _reply(connection, kind, rest)
    size = int(rest)
    if size < 0:
        return None
    need = end + 2 + size + 2
    if len(data) < need:
        buffer = bytearray(data)
        while len(buffer) < need:
            buffer += _more(sock)
        data = bytes(buffer)
    if len(data) != need:
        raise InvalidResponse(f"more than one reply to a script: {data!r:.100}")
    return data[end + 2 : need - 2]


def _more(sock: Any) -> bytes:
    data: bytes = sock.recv(_CHUNK)
    if not data:
        raise redis.ConnectionError("Connection closed by server.")
    return data


async def _read_async(connection: Any) -> Any:
    """One reply from the connection's stream. The scripts answer a bulk string, an
    integer or an error; anything else is refused (and the connection closed)."""
    reader = connection._reader
    line = await reader.readuntil(b"\r\n")
    kind, rest = line[:1], line[1:-2]
    if kind == b"$":
        size = int(rest)
        if size < 0:
            return None
        return (await reader.readexactly(size + 2))[:-2]
    return _reply(connection, kind, rest)


def _where(connection: Any) -> str:
    return f"{getattr(connection, 'host', '?')}:{getattr(connection, 'port', '?')}"


def _dirty(connection: Any) -> bool:
    """Whether an idle connection has something to read: data, or the server's close."""
    sock = connection._sock
    if sock is None:
        return False  # closed: sending opens it again
    try:
        return bool(select.select((sock,), (), (), 0)[0])
    except ValueError:  # a descriptor past select's limit: the parser's own check
        try:
            return bool(connection.can_read())
        except (redis.ConnectionError, OSError):
            return True


class Wire:
    """Connections of one standalone client, for the store's ``EVALSHA`` calls."""

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self._pool = pool
        self._idle: list[Any] = []
        self._pid = os.getpid()

    def script(self, buffer: bytes, source: str) -> Any:
        """Send the ``EVALSHA`` in ``buffer``; after a ``NOSCRIPT`` (flushed, restarted,
        failed over), load ``source`` on the same connections and send it once more."""
        try:
            return self.call(buffer)
        except NoScriptError:
            self.call(load(source))
            return self.call(buffer)

    def call(self, buffer: bytes) -> Any:
        """Send ``buffer`` (one framed command), return its reply; a Redis error raises."""
        if self._pid != os.getpid():  # forked: the parent's sockets are not this process's
            self._idle, self._pid = [], os.getpid()
        try:
            connection = self._idle.pop()
        except IndexError:
            connection = self._pool.make_connection()  # connects on its first send
        else:
            if _dirty(connection):
                connection.disconnect()
        try:
            connection.send_packed_command((buffer,))
            reply = _read(connection)
        except ResponseError:  # the whole error reply was read: the connection is clean
            self._idle.append(connection)
            raise
        except BaseException as exc:
            connection.disconnect()  # a reply may still be on its way: never read it later
            self._idle.append(connection)
            if isinstance(exc, TimeoutError):  # the socket's timeout
                raise redis.TimeoutError(f"Timeout reading from {_where(connection)}") from exc
            if isinstance(exc, OSError):
                raise redis.ConnectionError(f"Error reading from {_where(connection)}") from exc
            raise
        self._idle.append(connection)
        return reply

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.disconnect()


def wire_for(client: object) -> Wire | None:
    """A ``Wire`` for ``client`` if it is a plain standalone client, else None."""
    if type(client) is not redis.Redis or client.connection is not None:
        return None  # a subclass may override execute_command; a single-connection client
    pool = client.connection_pool
    if type(pool) is not redis.ConnectionPool or getattr(pool, "cache", None) is not None:
        return None
    if not _quiet(pool) or "EVALSHA" in client.response_callbacks:
        return None
    if SYNC_MISSING or not _has(pool, SYNC_PARTS):
        return None
    return Wire(pool)


def _has(pool: Any, parts: tuple[str, ...]) -> bool:
    """Whether the pool's connections (of its own class and settings) have ``parts``."""
    return not missing_parts(pool.connection_class, parts, pool.connection_kwargs)


def _quiet(pool: Any) -> bool:
    """Whether the server never speaks unasked on the pool's connections: no maintenance
    notifications (RESP3 push messages; redis-py's default "auto" tries them on RESP3)."""
    notifications = getattr(pool, "maint_notifications_enabled", lambda: False)()
    resp3 = pool.connection_kwargs.get("protocol") in (3, "3")
    return not (notifications is True or (notifications and resp3))


class AsyncWire:
    """``Wire`` for a ``redis.asyncio`` standalone client: one connection per event loop
    that every concurrent call shares (a ``_Pipe``)."""

    def __init__(self, pool: redis.asyncio.ConnectionPool) -> None:
        self._pool: Any = pool  # make_connection is untyped
        self._pipes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pipe] = (
            weakref.WeakKeyDictionary()
        )

    async def script(self, buffer: bytes, source: str) -> Any:
        """As ``Wire.script``."""
        try:
            return await self.call(buffer)
        except NoScriptError:
            await self.call(load(source))
            return await self.call(buffer)

    async def call(self, buffer: bytes) -> Any:
        """Send ``buffer`` (one framed command), return its reply; a Redis error raises."""
        loop = asyncio.get_running_loop()
        pipe = self._pipes.get(loop)
        if pipe is not None and not pipe.broken and pipe.stale():
            await pipe.close()  # the server closed it while idle: open afresh, as ``Wire``
        if pipe is None or pipe.broken:
            pipe = self._pipes[loop] = _Pipe(self._pool.make_connection(), loop)
        return await pipe.call(buffer)

    async def close(self) -> None:
        pipes, self._pipes = list(self._pipes.values()), weakref.WeakKeyDictionary()
        for pipe in pipes:
            await pipe.close()


class _Pipe:
    """One connection shared by the calls of one event loop. RESP answers in the order
    asked, so commands are written together (every call made in one turn of the loop goes
    out in one write) and each reply is the answer of the oldest call still waiting.

    A reply that is a Redis error fails its own call only. Anything else (the connection
    lost, a reply that is not one, the socket timeout) breaks the pipe: every call waiting
    on it fails as the one call of ``Wire`` would (a timeout or a lost connection, its
    command perhaps applied), the connection is closed, so no late reply is ever read as
    another call's answer, and the next call opens a new pipe. The socket timeout bounds the
    wait of the oldest call: one timer, moved on as replies come.
    """

    def __init__(self, connection: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.connection = connection
        self.loop = loop
        self.broken = False
        self._opened: asyncio.Task[None] | None = None
        self._outgoing: list[bytes] = []
        self._waiting: collections.deque[tuple[float, asyncio.Future[Any]]] = collections.deque()
        self._reader: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timeout: float | None = connection.socket_timeout
        self._expired = False

    async def call(self, buffer: bytes) -> Any:
        if self._reader is None:  # not open yet: the streams exist before the handshake ends
            if self._opened is None:
                self._opened = self.loop.create_task(self._open())
            await asyncio.shield(self._opened)  # every caller waits for the one connect
        if self.broken:  # broke while this call waited for the connect
            raise redis.ConnectionError(f"Error reading from {_where(self.connection)}")
        future = self.loop.create_future()
        deadline = math.inf if self._timeout is None else self.loop.time() + self._timeout
        self._waiting.append((deadline, future))
        if not self._outgoing:
            self.loop.call_soon(self._flush)
        self._outgoing.append(buffer)
        if self._timer is None and self._timeout is not None:
            self._timer = self.loop.call_at(deadline, self._check)
        return await future

    def stale(self) -> bool:
        """Whether the pipe is idle (open, no call waiting) yet has something to read: the
        server's close (a restart, a client timeout, ``CLIENT KILL``) that the reader task
        has not been given a turn to see, or anything else said unasked."""
        if self._reader is None or self._waiting or self._outgoing:
            return False
        stream = self.connection._reader
        if stream is None or stream.at_eof() or self._reader.done():
            return True
        sock = self.connection._writer.transport.get_extra_info("socket")
        if sock is None:
            return False  # a transport without a socket: the reader task notices alone
        try:
            return bool(select.select((sock,), (), (), 0)[0])
        except (ValueError, OSError):  # past select's limit, or closed under us
            return False

    async def _open(self) -> None:
        try:
            await self.connection.connect()
        except BaseException:
            self.broken = True
            raise
        self._reader = self.loop.create_task(self._read())

    def _flush(self) -> None:
        outgoing, self._outgoing = self._outgoing, []
        if not self.broken:
            self.connection._writer.write(b"".join(outgoing))

    async def _read(self) -> None:
        try:
            while True:
                try:
                    reply: Any = await _read_async(self.connection)
                except ResponseError as exc:  # the whole error reply was read
                    reply = exc
                _, future = self._waiting.popleft()
                if future.done():  # its caller was cancelled
                    continue
                if isinstance(reply, ResponseError):
                    future.set_exception(reply)
                else:
                    future.set_result(reply)
        except BaseException as exc:
            self._break(exc)

    def _check(self) -> None:
        """The socket timeout: the oldest call has waited it out, or the timer moves on."""
        self._timer = None
        if not self._waiting or self.broken:
            return
        deadline = self._waiting[0][0]
        if deadline <= self.loop.time():
            self._expired = True
            self.connection._writer.transport.abort()  # the read ends: _break
        else:
            self._timer = self.loop.call_at(deadline, self._check)

    def _break(self, cause: BaseException) -> None:
        self.broken = True
        if self._timer is not None:
            self._timer.cancel()
        where = _where(self.connection)
        if self._expired:
            error: Exception = redis.TimeoutError(f"Timeout reading from {where}")
        else:
            error = redis.ConnectionError(f"Error reading from {where}")
        error.__cause__ = cause
        waiting, self._waiting = self._waiting, collections.deque()
        for _, future in waiting:
            if not future.done():
                future.set_exception(error)
        if (writer := self.connection._writer) is not None:
            writer.transport.abort()  # unsent commands are dropped, not sent late
        self.connection._close()

    async def close(self) -> None:
        if self._opened is not None and not self._opened.done():
            self._opened.cancel()  # a connect under way opens nothing more
        if self._reader is not None:
            self._reader.cancel()
            await self._reader  # it ends the pipe (``_break``) and returns
        self._break(asyncio.CancelledError())
        await self.connection.disconnect(nowait=True)


_ASYNC_CONNECTIONS = (
    redis.asyncio.Connection,
    redis.asyncio.SSLConnection,
    redis.asyncio.UnixDomainSocketConnection,
)


def async_wire_for(client: object) -> AsyncWire | None:
    """An ``AsyncWire`` for ``client`` if it is a plain standalone asyncio client, else None."""
    if type(client) is not redis.asyncio.Redis or client.single_connection_client:
        return None
    pool = client.connection_pool
    if type(pool) is not redis.asyncio.ConnectionPool:
        return None
    if pool.connection_class not in _ASYNC_CONNECTIONS:
        return None  # the stream it writes to is these classes' own
    if not _quiet(pool) or "EVALSHA" in client.response_callbacks:
        return None
    if ASYNC_MISSING or not _has(pool, ASYNC_PARTS):
        return None
    return AsyncWire(pool)
