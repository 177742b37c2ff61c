"""Races: herds on one key, many processes, bursts of first calls (invariant 1)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ... import AsyncClaim, AttemptOutcome, InProgress, JobState, fingerprint_of
from .._driver import DrivenLedger, LedgerDriver, is_claim
from ._fixtures import KitBase

__all__ = ["Races"]


class Races(KitBase):
    """Part of ``StoreConformance``: the group ``races``."""

    # -- a simultaneous herd on one key ---------------------------------------------------------

    @pytest.mark.parametrize("path", ["fresh", "retryable", "expired"])
    def test_simultaneous_claims_grant_one_owner(
        self, driver: LedgerDriver, namespace: str, path: str
    ) -> None:
        ledger = driver.ledger(namespace, lease=30)
        threads_per_key = 8
        for round_ in range(40):
            key = f"herd-{round_}"
            if path == "retryable":
                ledger.claim(key).fail("x", retryable=True)
            elif path == "expired":
                ledger.claim(key, lease=0.05)
            if path == "expired":
                time.sleep(0.08)
            outcomes = _herd(ledger, key, threads_per_key)
            winners = [o for o in outcomes if is_claim(o)]
            others = [o for o in outcomes if not is_claim(o)]
            assert len(winners) == 1, (round_, outcomes)
            assert all(isinstance(o, InProgress) for o in others), others

    # -- many processes ----------------------------------------------------------------------

    @pytest.mark.slow
    def test_multi_process_race_runs_each_key_once(
        self, driver: LedgerDriver, namespace: str, tmp_path: Path
    ) -> None:
        keys = [f"seg-{i}" for i in range(24)]
        log = tmp_path / "side-effects.log"
        processes, threads = (8, 4) if self.multiprocess else (1, 32)
        start_at = time.time() + (3.0 if self.multiprocess else 0.2)
        args = [
            "race",
            driver.url,
            namespace,
            driver.mode,
            str(threads),
            str(start_at),
            str(log),
            *keys,
        ]
        if self.multiprocess:
            children = [
                subprocess.Popen(
                    [sys.executable, "-m", "rill_executor.testing._workers", *args],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for _ in range(processes)
            ]
            outs = [child.communicate(timeout=300)[0] for child in children]
            assert all(child.returncode == 0 for child in children), outs
            reports = [json.loads(out.strip().splitlines()[-1]) for out in outs]
        else:
            reports = [_in_process_race(driver.shared_store(), args)]
        effects = Counter(log.read_text().split())
        assert effects == Counter({key: 1 for key in keys}), "a key ran twice or never"
        errors = [e for r in reports for e in r["errors"]]
        assert errors == []
        answered = sum(r["report"].get("answered", 0) for r in reports)
        in_progress = sum(r["report"].get("in_progress", 0) for r in reports)
        assert answered + in_progress == processes * threads * len(keys) * 2
        for key in keys:
            winners = {
                json.dumps(r["results"][key], sort_keys=True)
                for r in reports
                if key in r["results"]
            }
            assert len(winners) == 1, f"{key} answered with different results: {winners}"
        ledger = driver.ledger(namespace, lease=30)
        for key in keys:
            status = ledger.status(key, handler="race")
            assert status is not None and status.state is JobState.SUCCEEDED
            assert [a.outcome for a in status.attempts] == [AttemptOutcome.SUCCEEDED]

    @pytest.mark.slow
    def test_sigstopped_zombie_is_fenced(self, driver: LedgerDriver, namespace: str) -> None:
        lease = 1.0
        command = [
            sys.executable,
            "-m",
            "rill_executor.testing._workers",
            "zombie",
            driver.url,
            namespace,
            driver.mode,
            "zombie-key",
            str(lease),
        ]
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
        with subprocess.Popen(command, **pipes) as child:  # type: ignore[call-overload]
            try:
                a = json.loads(child.stdout.readline())
                os.kill(child.pid, signal.SIGSTOP)
                time.sleep(lease * 1.6)
                ledger = driver.ledger(namespace, lease=30)
                b = ledger.claim(
                    "zombie/zombie-key", fingerprint=fingerprint_of({"k": "zombie-key"})
                )
                assert is_claim(b), b
                assert b.fence == a["fence"] + 1
                b.commit("winner")
                os.kill(child.pid, signal.SIGCONT)
                child.stdin.write("go\n")
                child.stdin.flush()
                report = json.loads(child.stdout.readline())
            finally:
                os.kill(child.pid, signal.SIGCONT)
        assert report == {"lost_seen_by_handler": True, "commit": "StaleAttempt:superseded"}
        status = ledger.status("zombie-key", handler="zombie")
        assert status is not None and status.result == "winner"
        assert [(x.attempt_id, x.outcome) for x in status.attempts] == [
            (a["attempt_id"], AttemptOutcome.EXPIRED),
            (b.attempt_id, AttemptOutcome.SUCCEEDED),
        ]

    # -- a burst of first calls on a fresh store -----------------------------------------------

    def test_a_burst_of_first_calls_on_a_fresh_store_grants_one_owner(
        self, driver: LedgerDriver, namespace: str
    ) -> None:
        """A store's very first calls may race to connect (a Cluster client maps its slots)."""
        outcomes = _cold_burst(driver.url, driver.mode, namespace, size=20)
        winners = [o for o in outcomes if is_claim(o)]
        odd = [o for o in outcomes if not is_claim(o) and not isinstance(o, InProgress)]
        assert len(winners) == 1, outcomes
        assert odd == [], odd


def _cold_burst(url: str, mode: str, namespace: str, size: int) -> list[Any]:
    """``size`` concurrent first claims of one key on a store opened for them alone."""
    import asyncio

    from ... import AsyncLedger, Ledger, open_async_store, open_store
    from .._driver import BlockingClaim, Portal

    if mode == "sync":
        with Ledger(open_store(url), namespace=namespace, lease=30) as ledger:
            return _herd(DrivenLedger(ledger, None), "cold", size)

    async def burst() -> list[Any]:
        async with AsyncLedger(open_async_store(url), namespace=namespace, lease=30) as ledger:
            claims = [ledger.claim("cold") for _ in range(size)]
            outcomes = await asyncio.gather(*claims, return_exceptions=True)
        return [BlockingClaim(portal, o) if isinstance(o, AsyncClaim) else o for o in outcomes]

    portal = Portal()
    try:
        return portal.call(burst())
    finally:
        portal.close()


def _herd(ledger: DrivenLedger, key: str, size: int) -> list[Any]:
    """``size`` threads claim ``key`` at the same instant; their outcomes (or errors)."""
    barrier = threading.Barrier(size)
    outcomes: list[Any] = []

    def claim() -> None:
        barrier.wait()
        try:
            outcomes.append(ledger.claim(key))
        except Exception as exc:  # recorded: the assertion shows it
            outcomes.append(exc)

    pool = [threading.Thread(target=claim) for _ in range(size)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(30)
    return outcomes


def _in_process_race(store: Any, args: list[str]) -> dict[str, Any]:
    """Run the race worker on this process's store (for in-process stores)."""
    import contextlib
    import io

    from .. import _workers

    _, _, namespace, mode, threads, start_at, log, *keys = args
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _workers.race(store, namespace, mode, int(threads), float(start_at), log, keys)
    return json.loads(out.getvalue().strip().splitlines()[-1])  # type: ignore[no-any-return]
