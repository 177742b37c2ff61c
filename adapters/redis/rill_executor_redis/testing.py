"""Redis servers of your own for tests and benchmarks: one ``redis-server``, or a Cluster.

``RedisServer`` runs ``redis-server`` (from the PATH) on a free port of 127.0.0.1 in a folder
you give it, without snapshots; ``restart`` keeps its port and folder, so with
``"--appendonly", "yes"`` a restart keeps every write. ``RedisCluster`` starts ``masters``
of them with ``--cluster-enabled yes``, shares the 16384 slots out among them in equal
ranges and waits until every node answers ``cluster_state:ok``: one primary is a Cluster
too (``redis-cli --cluster create`` wants three or more), so a one-primary and a
three-primary Cluster differ only in their number of primaries. No replicas.

    from rill_executor_redis.testing import RedisCluster

    cluster = RedisCluster(Path(tmp), masters=3)
    ledger = Ledger(cluster.url + "?durability=ignore", namespace="orders")
    ...
    cluster.stop()

The processes are plain children of the caller: stop them (``stop``) when done. Nothing here
is imported by the store itself.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis

__all__ = ["RedisCluster", "RedisServer", "free_port"]

SLOTS = 16384


def free_port() -> int:
    """A free port whose cluster-bus twin (port + 10000) is free too."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port + 10000 < 65536 and _is_free(port + 10000):
            return port
    raise RuntimeError("no free port pair found")


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class RedisServer:
    """One redis-server process the caller owns; ``restart`` keeps its port and data dir.

    ``extra`` arguments go to ``redis-server`` after the defaults (port, 127.0.0.1, the
    folder, ``--save ""``), so they may override them. Its log is ``redis.log`` in the folder.
    """

    def __init__(self, workdir: Path, *extra: str) -> None:
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not on PATH (apt-get install redis-server)")
        self.port = free_port()
        self.dir = workdir
        self.extra = list(extra)
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        with (self.dir / "redis.log").open("ab") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    str(self.dir),
                    "--save",
                    "",
                    "--daemonize",
                    "no",
                    *self.extra,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.wait_ready()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                log = (self.dir / "redis.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"redis-server on {self.port} exited:\n{log}")
            try:
                with redis.Redis(port=self.port, socket_timeout=1) as client:
                    if client.ping():
                        return
            except (redis.ConnectionError, redis.BusyLoadingError, redis.TimeoutError):
                time.sleep(0.02)
        raise RuntimeError(f"redis-server on {self.port} did not become ready")

    def stop(self, sig: signal.Signals = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(20)
        self.process = None

    def restart(self, sig: signal.Signals = signal.SIGKILL) -> None:
        self.stop(sig)
        self.start()

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)


class RedisCluster:
    """``masters`` primaries (no replicas) in folders ``node0``, ``node1``, … of ``root``."""

    def __init__(self, root: Path, masters: int = 3) -> None:
        if masters < 1:
            raise ValueError("a Cluster needs at least one primary")
        self.nodes: list[RedisServer] = []
        try:
            for i in range(masters):
                node_dir = root / f"node{i}"
                node_dir.mkdir()
                self.nodes.append(
                    RedisServer(
                        node_dir,
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--appendonly",
                        "no",
                    )
                )
            self._join()
            self._wait_ok()
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    def _join(self) -> None:
        """Each node its range of slots and a distinct config epoch (as ``redis-cli --cluster
        create`` gives them), then every node introduced to the first."""
        bounds = [SLOTS * i // len(self.nodes) for i in range(len(self.nodes) + 1)]
        for i, node in enumerate(self.nodes):
            with node.client() as client:
                client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
                client.execute_command("CLUSTER", "ADDSLOTS", *range(bounds[i], bounds[i + 1]))
        with self.nodes[0].client() as first:
            for node in self.nodes[1:]:
                first.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)

    def _wait_ok(self) -> None:
        deadline = time.monotonic() + 30
        known = f"cluster_known_nodes:{len(self.nodes)}\r".encode()
        while time.monotonic() < deadline:
            states = []
            for node in self.nodes:
                with node.client() as client:
                    states.append(client.execute_command("CLUSTER", "INFO"))
            if all(b"cluster_state:ok" in state and known in state for state in states):
                return
            time.sleep(0.05)
        raise RuntimeError("the Cluster did not reach cluster_state:ok")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop(signal.SIGTERM)
