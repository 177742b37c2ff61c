"""The example executor (examples/rillflow_executor) as a real service: uvicorn with two
worker processes in a process group of its own, started, killed and restarted by tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

from rill_executor.testing.drill._run import fitted_to_lease

from ..adapters.s3.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
STATUS_TOKEN = "status-token-for-the-tests"
TOKEN_SECRET = "completion-token-secret-for-the-tests"


def source_path(root: Path) -> dict[str, str]:
    """The environment that imports rill-executor and its adapters from the checkout at
    ``root`` (another version's, e.g.) ahead of the installed ones."""
    paths = [root, *(root / "adapters" / name for name in ("sql", "redis", "s3"))]
    return {"PYTHONPATH": os.pathsep.join(str(path) for path in paths)}


class ExecutorService:
    def __init__(
        self,
        store_url: str,
        workdir: Path,
        *,
        lease: float = 3.0,
        workers: int = 2,
        root: Path = ROOT,
    ) -> None:
        """``root``: the checkout whose example app and library the service runs."""
        self.store_url = store_url
        self.root = root
        self.namespace = os.environ.get("RILL_NAMESPACE", "segments")  # the app's, from its env
        self.workdir = workdir
        self.lease = lease
        self.workers = workers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.run_log = workdir / "runs.log"
        self.run_log.touch()
        self.handoff_log = workdir / "handoffs.log"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> ExecutorService:
        env = {
            **os.environ,
            "RILL_STORE": fitted_to_lease(self.store_url, self.lease),
            "RILL_RUN_LOG": str(self.run_log),
            "RILL_STATUS_TOKEN": STATUS_TOKEN,
            "RILL_LEASE": str(self.lease),
            # the simulator, on this host, unless the test names its engines itself
            "RILL_ENGINES": os.environ.get("RILL_ENGINES", "127.0.0.1"),
            "RILL_TOKEN_SECRET": TOKEN_SECRET,
            "RILL_HANDOFF_LOG": str(self.handoff_log),
            **(source_path(self.root) if self.root != ROOT else {}),
        }
        command = [
            sys.executable,
            "-m",
            "uvicorn",
            "examples.rillflow_executor.app:app",
            "--workers",
            str(self.workers),
            "--port",
            str(self.port),
            "--log-level",
            "warning",
        ]
        with (self.workdir / "uvicorn.log").open("ab") as log:
            self._process = subprocess.Popen(
                command, cwd=self.root, env=env, stdout=log, stderr=log, start_new_session=True
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"the executor exited: {self.log()}")
            try:
                if httpx.get(f"{self.url}/openapi.json", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"the executor did not start: {self.log()}")

    def log(self) -> str:
        return (self.workdir / "uvicorn.log").read_text(errors="replace")[-3000:]

    def signal(self, sig: signal.Signals) -> None:
        assert self._process is not None
        os.killpg(self._process.pid, sig)

    def kill(self) -> None:
        """SIGKILL the whole service, workers included: nothing runs its shutdown."""
        if self._process is None:
            return
        self.signal(signal.SIGKILL)
        self._process.wait(10)
        self._process = None

    def stop(self) -> None:
        if self._process is None:
            return
        self.signal(signal.SIGTERM)
        try:
            self._process.wait(15)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self._process.wait(10)
        self._process = None

    def runs(self) -> Counter[str]:
        """How often each business key's handler started."""
        return Counter(line.split()[0] for line in self.run_log.read_text().splitlines())

    def handoffs(self) -> list[tuple[str, str]]:
        """(business key, completion token) of each run handed to the external encoder."""
        if not self.handoff_log.exists():
            return []
        lines = self.handoff_log.read_text().splitlines()
        return [(key, token) for key, token in (line.split() for line in lines)]

    def complete(self, token: str, report: object) -> httpx.Response:
        """Report as the external encoder: ``POST /rill/complete`` with the token."""
        headers = {"Authorization": f"Bearer {token}"}
        return httpx.post(f"{self.url}/rill/complete", json=report, headers=headers, timeout=5)

    def status(self, key: str) -> httpx.Response:
        return httpx.get(
            f"{self.url}/rill/jobs/{self.namespace}/{key}?handler=segment",
            headers={"Authorization": f"Bearer {STATUS_TOKEN}"},
            timeout=5,
        )
