"""A TCP fault proxy: pass-through, connection resets, black holes, added latency, lost replies.

The drill puts one in front of each executor's store link; the adapter tests use it to lose
one chosen reply. ``reset()`` cuts every open connection (the peers see a reset);
``blackhole(True)`` keeps every socket open and forwards nothing, old connections and new
ones alike, until ``blackhole(False)`` (then the silenced connections are reset, as a
stateful firewall forgets them); ``latency(seconds)`` delays every chunk each way.

It can also be pointed at another upstream (``retarget``), or at none: then it refuses every
connection, like a peer that cannot be reached.

Armed with a marker (bytes the request carries, e.g. the job id), it forwards the first
request on any connection that carries the marker, then closes that connection when the
server starts to answer it. With ``then`` (e.g. ``b"COMMIT"``), the cut waits for a later
request carrying ``then`` on the same connection: a transaction is applied by its COMMIT.
With ``partition``, that request is forwarded and then the connection goes silent instead:
nothing more passes either way and neither socket is closed (a black hole: the server never
sees its client go, and keeps what the client's transaction holds).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

__all__ = ["FaultProxy"]


@dataclass
class _Rule:
    marker: bytes
    then: bytes | None
    partition: bool = False
    fired: threading.Event = field(default_factory=threading.Event)


class _Link:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client, self.server = client, server
        self.seen_marker = False
        self.doomed: _Rule | None = None  # the rule whose request this link carried
        self.silent = False  # partitioned: forwards nothing, closes nothing
        self.holed = False  # inside a black hole: forwards nothing, closes nothing
        self.resetting = False  # closed with a reset: no FIN may go out first

    @property
    def partitioned(self) -> bool:
        return self.holed or (self.doomed is not None and self.doomed.partition)

    def close(self) -> None:
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                # Wakes the threads blocked in recv; after a reset, without sending a FIN.
                sock.shutdown(socket.SHUT_RD if self.resetting else socket.SHUT_RDWR)
            sock.close()

    def reset(self) -> None:
        """Close both sockets with a TCP reset (linger 0), not a graceful FIN."""
        self.resetting = True
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close()


class FaultProxy:
    """A TCP proxy on ``127.0.0.1:port`` (a free port) to ``upstream_host:upstream_port``,
    passing everything through until told otherwise: ``reset()``, ``blackhole(on)``,
    ``latency(seconds)``, ``arm(marker)`` to lose one chosen reply, ``retarget(port)``."""

    def __init__(self, upstream_host: str, upstream_port: int | None) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._rule: _Rule | None = None
        self._links: list[_Link] = []
        self._closed = False
        self._holed = False
        self._delay = 0.0
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(
        self, marker: str | bytes, then: bytes | None = None, *, partition: bool = False
    ) -> threading.Event:
        """Lose the reply to the next request carrying ``marker`` (or, with ``then``, to
        the next request carrying ``then`` after it); the event is set once it is lost.
        ``partition``: forward that request, then nothing more on its connection."""
        raw = marker.encode() if isinstance(marker, str) else marker
        rule = _Rule(raw, then, partition)
        with self._lock:
            self._rule = rule
        return rule.fired

    def retarget(self, upstream_port: int | None) -> None:
        """Forward new connections to ``upstream_port`` from now on; None refuses them (a
        peer that cannot be reached)."""
        self._upstream = (self._upstream[0], upstream_port)

    def reset(self) -> int:
        """Reset every open connection; new ones pass. Returns how many were cut."""
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.reset()
        return len(links)

    def blackhole(self, on: bool) -> None:
        """``True``: from now on nothing passes either way on any connection, open or new,
        and no socket is closed. ``False``: the silenced connections are reset and new
        ones pass again."""
        with self._lock:
            self._holed = on
            links = list(self._links)
            for link in links:
                link.holed = on or link.holed
        if not on:
            for link in links:
                if link.holed:
                    self._drop(link)
                    link.reset()

    def latency(self, seconds: float) -> None:
        """Delay every chunk forwarded, either way, by ``seconds`` (0: none)."""
        self._delay = max(0.0, seconds)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            host, port = self._upstream
            try:
                if port is None:
                    raise ConnectionRefusedError
                server = socket.create_connection((host, port))
            except OSError:
                client.close()
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(client, server)
            with self._lock:
                link.holed = self._holed
                self._links.append(link)
            threading.Thread(target=self._requests, args=(link,), daemon=True).start()
            threading.Thread(target=self._replies, args=(link,), daemon=True).start()

    def _requests(self, link: _Link) -> None:
        while True:
            try:
                chunk = link.client.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                if not link.partitioned:
                    link.close()
                return
            self._watch(link, chunk)
            if link.silent or link.holed:
                continue
            self._wait()
            try:
                link.server.sendall(chunk)
            except OSError:
                link.close()
                return
            if link.doomed is not None and link.doomed.partition:
                link.silent = True  # the armed request went through: nothing more will
                link.doomed.fired.set()

    def _watch(self, link: _Link, chunk: bytes) -> None:
        with self._lock:
            rule = self._rule
            if rule is None or link.doomed:
                return
            if rule.marker in chunk:
                link.seen_marker = True
            if link.seen_marker and (rule.then is None or rule.then in chunk):
                link.doomed = rule  # set before the request is forwarded: its reply is lost
                self._rule = None

    def _replies(self, link: _Link) -> None:
        while True:
            try:
                chunk = link.server.recv(65536)
            except OSError:
                chunk = b""
            if link.partitioned:
                if not chunk:
                    return
                continue  # the black hole swallows the reply
            if not chunk or link.doomed:
                if link.doomed:
                    link.doomed.fired.set()  # before the close the client will see
                link.close()
                return
            self._wait()
            try:
                link.client.sendall(chunk)
            except OSError:
                link.close()
                return

    def _wait(self) -> None:
        delay = self._delay
        if delay > 0:
            time.sleep(delay)

    def _drop(self, link: _Link) -> None:
        with self._lock:
            if link in self._links:
                self._links.remove(link)
