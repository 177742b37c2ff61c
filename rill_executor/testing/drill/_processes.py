"""The executors under drill: processes started from a command template, each with its own
fault proxy on the link to the store.

``{port}`` in the command is the port the process listens on; the store URL reaches it as
``RILL_STORE`` (and ``{store}`` in the command), rewritten to go through the process's proxy
when the store is a network server. Every process leads a session of its own, so a signal
reaches its whole group (an ASGI server and its workers); given a ``Reaper``, each group is
registered with it, and killed should the drill end without ending it.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rill_executor import ConfigError

from ._proxy import FaultProxy
from ._reaper import Reaper

__all__ = ["ExecutorProcess", "free_port", "through_proxy"]


def free_port() -> int:
    """A TCP port nobody listens on now (the OS's choice)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _server(url: str) -> tuple[str, int] | None:
    """The (host, port) a store URL connects to; None for a local file (SQLite, memory)."""
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    default = {"redis": 6379, "rediss": 6379, "postgresql": 5432, "mysql": 3306}
    port = parts.port or default.get(parts.scheme.split("+")[0])
    if port is None:
        raise ConfigError(f"the store URL {url!r} names no port, and its scheme has no default")
    return parts.hostname, port


def through_proxy(url: str, proxy_port: int) -> str:
    """``url`` with its host and port replaced by the proxy's (credentials kept)."""
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@127.0.0.1:{proxy_port}" if credentials else f"127.0.0.1:{proxy_port}"
    return urlunsplit(parts._replace(netloc=netloc))


class ExecutorProcess:
    """One executor process: started, killed, stopped, continued and restarted on one port."""

    def __init__(
        self,
        index: int,
        command: str,
        store: str,
        env: Mapping[str, str],
        log: Path | None,
        startup_timeout: float = 30.0,
        reaper: Reaper | None = None,
    ) -> None:
        self.index = index
        self.port = free_port()
        server = _server(store)
        self.proxy = None if server is None else FaultProxy(*server)
        self.store = store if self.proxy is None else through_proxy(store, self.proxy.port)
        self._argv = shlex.split(command.format(port=self.port, store=self.store))
        self._env = {**os.environ, **env, "RILL_STORE": self.store}
        if reaper is not None:
            self._env |= reaper.env
        self._log = log
        self._startup_timeout = startup_timeout
        self._reaper = reaper
        self._proc: subprocess.Popen[bytes] | None = None
        self.stopped = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the process and wait until it accepts connections on its port."""
        self.spawn()
        self.wait_listening()

    def spawn(self) -> None:
        """Start the process (``wait_listening`` waits for it to listen). Call it from the
        drill's own thread, which outlives every process it starts."""
        with nullcontext() if self._reaper is None else self._reaper.starting():
            if self._log is None:
                self._proc = self._spawn(subprocess.DEVNULL)
            else:
                with self._log.open("ab") as out:  # the child keeps its own copy
                    self._proc = self._spawn(out)
            if self._reaper is not None:
                self._reaper.watch(self._proc.pid)
        self.stopped = False

    def wait_listening(self) -> None:
        """Wait until the process accepts connections on its port."""
        proc = self._proc
        assert proc is not None, "spawn() first"
        deadline = time.monotonic() + self._startup_timeout
        while True:
            if proc.poll() is not None:
                raise ConfigError(
                    f"executor {self.index} exited with {proc.returncode} on start: "
                    f"{shlex.join(self._argv)}"
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise ConfigError(
                        f"executor {self.index} did not listen on port {self.port} within "
                        f"{self._startup_timeout} s: {shlex.join(self._argv)}"
                    ) from None
                time.sleep(0.05)

    def _spawn(self, out: Any) -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(
                self._argv,
                env=self._env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:  # no such program, or not executable
            raise ConfigError(
                f"executor {self.index} could not be started: {exc.strerror}:"
                f" {shlex.join(self._argv)}. Give the program's full path (e.g."
                " .venv/bin/uvicorn) or run the drill where it is on PATH"
            ) from exc

    def signal(self, signum: signal.Signals) -> None:
        """Send ``signum`` to the process's whole group."""
        if self._proc is None or self._proc.poll() is not None:
            return
        try:
            os.killpg(self._proc.pid, signum)
        except ProcessLookupError:
            return
        if signum is signal.SIGSTOP:
            self.stopped = True
        elif signum is signal.SIGCONT:
            self.stopped = False

    def kill(self) -> None:
        """SIGKILL the group and reap it."""
        if self._proc is None:
            return
        self.signal(signal.SIGKILL)
        self._proc.wait()
        self._reaped()
        self.stopped = False

    def _reaped(self) -> None:
        if self._reaper is not None and self._proc is not None:
            self._reaper.forget(self._proc.pid)

    def close(self) -> None:
        """Continue it if stopped, then ask it to end (SIGTERM), then kill it."""
        if self._proc is not None:
            if self._proc.poll() is None:
                self.signal(signal.SIGCONT)
                self.signal(signal.SIGTERM)
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.kill()
            self._reaped()
        if self.proxy is not None:
            self.proxy.close()
