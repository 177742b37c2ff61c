"""One handler has one identity however its process was started (invariant 15).

A script defines a decorated handler and calls it; a worker started with multiprocessing's
``spawn`` re-imports the script as ``__mp_main__`` and calls it with the same key; then the
script is imported under its own name (as ``uvicorn worker:app`` does) and called again. The
handler must run once. The naming is the core's, the same on every store: SQLite and the
server stores of the command-line tests (PostgreSQL, Redis) are run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from rill_executor import Ledger

WORKER = """
import asyncio
import multiprocessing
import sys

from rill_executor import AsyncLedger, Ledger

URL, NAMESPACE, MODE, RUNS = sys.argv[1:5]


def record(seg: str) -> str:
    with open(RUNS, "a") as runs:
        runs.write(seg + "\\n")
    return f"{seg}.mp4"


if MODE == "sync":
    ledger = Ledger(URL, namespace=NAMESPACE)

    @ledger.idempotent(key=lambda seg: seg)
    def transcode(seg: str) -> str:
        return record(seg)

    def call(seg: str) -> str:
        try:
            return transcode(seg)
        finally:
            ledger.close()

else:
    aledger = AsyncLedger(URL, namespace=NAMESPACE)

    @aledger.idempotent(key=lambda seg: seg)
    async def transcode(seg: str) -> str:
        return record(seg)

    def call(seg: str) -> str:
        async def run() -> str:
            try:
                return await transcode(seg)
            finally:
                await aledger.close()

        return asyncio.run(run())


def spawned() -> None:
    print("spawned", call("seg-1"), __name__, flush=True)


if __name__ == "__main__":
    print("script", call("seg-1"), __name__, flush=True)
    worker = multiprocessing.get_context("spawn").Process(target=spawned)
    worker.start()
    worker.join()
    sys.exit(worker.exitcode)
"""


def _run(args: list[str], cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, *args], check=False, cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_handler_runs_once_whichever_way_its_process_started(
    store_url: str, mode: str, tmp_path: Path
) -> None:
    namespace, runs = f"t{uuid.uuid4().hex[:16]}", tmp_path / "runs.txt"
    (tmp_path / "transcode_worker.py").write_text(textwrap.dedent(WORKER))
    argv = [store_url, namespace, mode, str(runs)]
    out = _run(["transcode_worker.py", *argv], tmp_path)
    assert out.splitlines() == ["script seg-1.mp4 __main__", "spawned seg-1.mp4 __mp_main__"]
    imported = "import transcode_worker as w; print(w.__name__, w.call('seg-1'))"
    assert _run(["-c", imported, *argv], tmp_path) == "transcode_worker seg-1.mp4\n"
    assert runs.read_text() == "seg-1\n"  # one run, then two replays
    with Ledger(store_url, namespace=namespace) as ledger:
        (job,) = ledger.jobs().jobs
        assert job.key == "transcode/seg-1"
        status = ledger.status("seg-1", handler="transcode")
        assert status is not None and status.result == "seg-1.mp4"
        assert len(status.attempts) == 1
