"""A store server the drill owns, so it may restart it: a Redis server of its own.

``RedisServer`` runs ``redis-server`` on a free port with an append-only file synced on
every write (a restart loses nothing), in a folder of its own: a new temporary one, removed
by ``close()`` (unless ``keep``), or the one given, kept. Each start leads a session of its
own, registered with the drill's ``Reaper`` when given one.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import Protocol

from rill_executor import ConfigError

from ._processes import free_port
from ._reaper import Reaper

__all__ = ["RedisServer", "StoreServer"]


class StoreServer(Protocol):
    @property
    def url(self) -> str: ...

    @property
    def running(self) -> bool: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


class RedisServer:
    def __init__(
        self,
        folder: Path | None = None,
        binary: str = "redis-server",
        *,
        keep: bool = False,
        reaper: Reaper | None = None,
    ) -> None:
        found = shutil.which(binary)
        if found is None:
            raise ConfigError(f"{binary} is not on the PATH: the drill cannot run its own Redis")
        self._binary = found
        self._temporary = folder is None and not keep
        self.folder = folder or Path(tempfile.mkdtemp(prefix="rill-drill-redis-"))
        self._reaper = reaper
        if reaper is not None and self._temporary:
            reaper.remove_at_exit(self.folder)
        self.port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start it (nothing if it runs) and wait until it accepts connections."""
        if self.running:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        argv = [
            self._binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.folder),
            "--appendonly", "yes",
            "--appendfsync", "always",
            "--save", "",
        ]  # fmt: skip
        with nullcontext() if self._reaper is None else self._reaper.starting():
            self._proc = subprocess.Popen(
                argv,
                env=None if self._reaper is None else {**os.environ, **self._reaper.env},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            if self._reaper is not None:
                self._reaper.watch(self._proc.pid)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    raise ConfigError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """SIGKILL: the server dies as in a crash; the append-only file keeps every write.
        Its whole group: a child rewriting the append-only file must not write on."""
        if self._proc is not None and self._proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        if self._proc is not None and self._reaper is not None:
            self._reaper.forget(self._proc.pid)
        self._proc = None

    def close(self) -> None:
        """Stop it, and remove its folder if it is a temporary one."""
        self.stop()
        if self._temporary:
            shutil.rmtree(self.folder, ignore_errors=True)
