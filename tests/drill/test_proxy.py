"""The drill's TCP fault proxy against a real echo server: it passes bytes through, resets
every connection, swallows everything in a black hole without closing a socket (and resets
the silenced connections when it heals), and still delivers with added latency."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from rill_executor.testing.drill import FaultProxy


@pytest.fixture
def echo() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # the proxy may reset it
            while chunk := conn.recv(65536):
                conn.sendall(chunk)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


@pytest.fixture
def proxy(echo: int) -> Iterator[FaultProxy]:
    found = FaultProxy("127.0.0.1", echo)
    yield found
    found.close()


def _client(proxy: FaultProxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    sock.sendall(b"hello")
    assert sock.recv(100) == b"hello"
    return sock


def test_it_passes_bytes_through(proxy: FaultProxy) -> None:
    with _client(proxy) as sock:
        sock.sendall(b"again")
        assert sock.recv(100) == b"again"


def test_a_reset_cuts_every_open_connection_and_new_ones_pass(proxy: FaultProxy) -> None:
    with _client(proxy) as sock:
        assert proxy.reset() == 1
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            sock.sendall(b"lost")
            sock.recv(100)  # b"" (an orderly close) would be no reset
    with _client(proxy):
        pass


def test_a_black_hole_forwards_nothing_and_closes_nothing_until_it_heals(
    proxy: FaultProxy,
) -> None:
    with _client(proxy) as old:
        proxy.blackhole(True)
        new = socket.create_connection(("127.0.0.1", proxy.port), timeout=0.5)
        for sock in (old, new):
            sock.sendall(b"anyone?")
            with pytest.raises(TimeoutError):  # open, and silent
                sock.recv(100)
        proxy.blackhole(False)
        for sock in (old, new):
            sock.settimeout(5)
            with pytest.raises(ConnectionResetError):
                sock.recv(100)  # b"" (an orderly close) would be no reset
            sock.close()
    with _client(proxy):
        pass


def test_with_added_latency_every_byte_still_arrives(proxy: FaultProxy) -> None:
    proxy.latency(0.05)
    with _client(proxy) as sock:
        sock.sendall(b"slow")
        assert sock.recv(100) == b"slow"
    proxy.latency(0)
