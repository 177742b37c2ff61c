"""Serving an ASGI app with uvicorn on a 127.0.0.1 port (a free one by default), in a
background thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import uvicorn

from rill_executor import ConfigError

__all__ = ["serve_app"]


@contextmanager
def serve_app(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    startup_timeout: float = 10.0,
    lifespan: Literal["auto", "on", "off"] = "off",
) -> Iterator[str]:
    """Serve ``app`` (any ASGI app, e.g. FastAPI) until the block ends; yields its base URL.

    ``lifespan="on"`` runs the app's lifespan (startup and shutdown) as uvicorn would.

    ``port`` 0 (the default) has the OS choose a free one, so parallel test runs do not
    collide. Raises ``ConfigError`` when the port is taken or invalid, or the server does
    not start within ``startup_timeout`` seconds.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"port must be a number from 0 to 65535 (0: a free one), not {port!r}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror}): stop what uses the port,"
            " or choose another (port=0: a free one)"
        ) from exc
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", lifespan=lifespan, ws="none", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{port}", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(f"the server for {app!r} did not start on {host}:{port}")
            time.sleep(0.01)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()
