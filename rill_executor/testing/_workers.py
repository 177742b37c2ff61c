"""Child processes for the conformance kit's race and zombie tests.

    python -m rill_executor.testing._workers race URL NAMESPACE MODE THREADS START_AT LOG KEY...
    python -m rill_executor.testing._workers zombie URL NAMESPACE MODE KEY LEASE

Each prints one JSON line per report on stdout.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import threading
import time
from collections import Counter
from typing import Any

from .. import AsyncLedger, JobInProgress, Ledger, StaleAttempt, current_async_claim, current_claim


def _side_effect(log_fd: int, key: str) -> dict[str, Any]:
    os.write(log_fd, f"{key}\n".encode())  # O_APPEND: one atomic line per execution
    time.sleep(random.uniform(0, 0.004))
    return {"key": key, "pid": os.getpid(), "thread": threading.get_ident()}


def _tally(
    report: Counter[str], results: dict[str, Any], errors: list[str], key: str, call: Any
) -> None:
    try:
        value = call()
    except JobInProgress:
        with _TALLY:
            report["in_progress"] += 1
        return
    except Exception as exc:  # anything else is a finding: report it, keep the thread alive
        errors.append(f"{type(exc).__name__}: {exc}")
        return
    if not isinstance(value, dict) or value.get("key") != key:
        errors.append(f"wrong result for {key}: {value!r}")
        return
    with _TALLY:
        report["answered"] += 1
        seen = results.setdefault(key, value)
    if seen != value:
        errors.append(f"two results for {key}: {seen!r} and {value!r}")


# The racing threads count into one report: ``+= 1`` on a Counter is a read and a write, and a
# thread switch between them loses a count.
_TALLY = threading.Lock()


def race(
    url: Any, namespace: str, mode: str, threads: int, start_at: float, log: str, keys: list[str]
) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    report: Counter[str] = Counter()
    results: dict[str, Any] = {}
    errors: list[str] = []

    def order() -> list[str]:
        return random.sample(keys, len(keys)) * 2

    if mode == "sync":
        ledger = Ledger(url, namespace=namespace, lease=30)

        @ledger.idempotent(key=lambda key: key, heartbeat=False, name="race")
        def handle(key: str) -> dict[str, Any]:
            return _side_effect(fd, key)

        def worker() -> None:
            time.sleep(max(0.0, start_at - time.time()))
            for key in order():
                _tally(report, results, errors, key, lambda key=key: handle(key))

        pool = [threading.Thread(target=worker) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        ledger.close()
    else:

        async def main() -> None:
            ledger = AsyncLedger(url, namespace=namespace, lease=30)

            @ledger.idempotent(key=lambda key: key, heartbeat=False, name="race")
            async def handle(key: str) -> dict[str, Any]:
                return await asyncio.to_thread(_side_effect, fd, key)

            async def worker() -> None:
                await asyncio.sleep(max(0.0, start_at - time.time()))
                for key in order():
                    try:
                        value: Any = await handle(key)
                    except BaseException as exc:  # tallied below
                        value = exc
                    _tally(report, results, errors, key, lambda v=value: _unwrap(v))

            await asyncio.gather(*(worker() for _ in range(threads)))
            await ledger.close()

        asyncio.run(main())
    os.close(fd)
    print(json.dumps({"report": report, "results": results, "errors": errors}), flush=True)


def _unwrap(value: Any) -> Any:
    if isinstance(value, BaseException):
        raise value
    return value


def zombie(url: str, namespace: str, mode: str, key: str, lease: float) -> None:
    """Claim, announce, block until told to go on (the parent SIGSTOPs us meanwhile), then
    let the automatic heartbeat and the commit find out whether we still own the job."""
    report: dict[str, Any] = {}

    def announce(attempt_id: str, fence: int) -> None:
        print(json.dumps({"attempt_id": attempt_id, "fence": fence}), flush=True)
        sys.stdin.readline()

    if mode == "sync":
        ledger = Ledger(url, namespace=namespace, lease=lease)

        @ledger.idempotent(key=lambda k: k, heartbeat=lease / 4, name="zombie")
        def handle(k: str) -> str:
            claim = current_claim()
            announce(claim.attempt_id, claim.fence)
            time.sleep(lease / 2)  # let the heartbeat thread tick after we resume
            report["lost_seen_by_handler"] = claim.lost
            return "zombie"

        try:
            handle(key)
            report["commit"] = "committed"
        except StaleAttempt as exc:
            report["commit"] = f"StaleAttempt:{exc.reason}"
        ledger.close()
    else:

        async def main() -> None:
            ledger = AsyncLedger(url, namespace=namespace, lease=lease)

            @ledger.idempotent(key=lambda k: k, heartbeat=lease / 4, name="zombie")
            async def handle(k: str) -> str:
                claim = current_async_claim()
                await asyncio.to_thread(announce, claim.attempt_id, claim.fence)
                await asyncio.sleep(lease / 2)
                report["lost_seen_by_handler"] = claim.lost
                return "zombie"

            try:
                await handle(key)
                report["commit"] = "committed"
            except StaleAttempt as exc:
                report["commit"] = f"StaleAttempt:{exc.reason}"
            await ledger.close()

        asyncio.run(main())
    print(json.dumps(report), flush=True)


def main(argv: list[str]) -> None:
    command, url, namespace, mode, *rest = argv
    if command == "race":
        threads, start_at, log, *keys = rest
        race(url, namespace, mode, int(threads), float(start_at), log, keys)
    elif command == "zombie":
        key, lease = rest
        zombie(url, namespace, mode, key, float(lease))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
