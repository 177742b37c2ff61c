"""``rill-executor resolve``, run as the installed command in a subprocess against SQLite,
PostgreSQL and Redis, with a zombie worker process paused (SIGSTOP) while an operator
resolves its job."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest

from rill_executor import Claim, JobState, Ledger, Replay
from tests.clocks import SIGNALS, STORE_CLOCK

from .cli import run

ZOMBIE = textwrap.dedent(
    """
    import sys, time
    from rill_executor import Ledger, StaleAttempt
    with Ledger(sys.argv[1], namespace=sys.argv[2], lease=30) as ledger:
        claim = ledger.claim("render:7")
        print("claimed", claim.fence, flush=True)
        time.sleep(1.0)  # paused here by the test
        try:
            claim.commit({"uri": "s3://frames/zombie.exr"})
            print("committed", flush=True)
        except StaleAttempt as exc:
            print("stale", exc.reason, flush=True)
    """
)


@pytest.fixture
def namespace() -> str:
    return f"resolve-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def ledger(store_url: str, namespace: str) -> Iterator[Ledger]:
    with Ledger(store_url, namespace=namespace, lease=timedelta(seconds=30)) as found:
        yield found


@pytest.mark.real_clock(SIGNALS)
def test_a_redo_while_a_zombie_is_paused_fences_it_and_the_next_claim_runs(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    zombie = subprocess.Popen(
        [sys.executable, "-c", ZOMBIE, store_url, namespace], stdout=subprocess.PIPE, text=True
    )
    try:
        assert zombie.stdout is not None
        assert zombie.stdout.readline().split() == ["claimed", "1"]
        zombie.send_signal(signal.SIGSTOP)
        where = ("--store", store_url, "--namespace", namespace)
        refused = run("resolve", "render:7", "--redo", "--reason", "host frozen", *where)
        assert refused.returncode == 5 and "live lease" in refused.stderr, refused.stderr
        assert ledger.status("render:7").fence == 1  # type: ignore[union-attr]
        done = run(
            "resolve", "render:7", "--redo", "--force", "--reason", "host frozen",
            "--actor", "alice", *where, "-o", "json",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        after = json.loads(done.stdout)
        assert (after["resolved"], after["fence_before"], after["fence"]) == ("redo", 1, 2)
        (event,) = after["events"]
        assert (event["actor"], event["reason"], event["data"]["force"]) == (
            "alice",
            "host frozen",
            True,
        )
        zombie.send_signal(signal.SIGCONT)
        assert zombie.stdout.readline().split() == ["stale", "superseded"]
    finally:
        zombie.send_signal(signal.SIGCONT)
        zombie.wait(30)
        if zombie.stdout is not None:
            zombie.stdout.close()
    status = ledger.status("render:7")
    assert status is not None and status.result is None
    assert [a.outcome.value for a in status.attempts] == ["fenced"]
    again = ledger.claim("render:7")
    assert isinstance(again, Claim) and again.fence == 3
    again.commit({"uri": "s3://frames/7.exr"})


@pytest.mark.real_clock(STORE_CLOCK)
def test_reuse_and_terminate_from_the_command_line(
    store_url: str, namespace: str, ledger: Ledger
) -> None:
    where = ("--store", store_url, "--namespace", namespace)
    ledger.claim("a", lease=timedelta(milliseconds=100))
    ledger.claim("b", lease=timedelta(milliseconds=100))
    time.sleep(0.3)  # the leases run out
    no_result = run("resolve", "a", "--reuse", "--reason", "done by hand", *where)
    assert no_result.returncode == 5 and "no committed result" in no_result.stderr
    kept = run(
        "resolve", "a", "--reuse", "--result", '{"uri": "s3://by-hand"}',
        "--reason", "done by hand", *where,
    )  # fmt: skip
    assert kept.returncode == 0, kept.stderr
    assert "reuse: fence 1 -> 2" in kept.stdout and "done by hand" in kept.stdout
    replay = ledger.claim("a")
    assert isinstance(replay, Replay) and replay.result() == {"uri": "s3://by-hand"}
    ended = run("resolve", "b", "--terminate", "--reason", "codec unsupported", *where)
    assert ended.returncode == 0, ended.stderr
    status = ledger.status("b")
    assert status is not None and status.state is JobState.FAILED
    assert status.error is not None and "codec unsupported" in status.error.message
    shown = run("status", "b", *where)
    assert "resolved" in shown.stdout and "codec unsupported" in shown.stdout


def test_bad_resolutions_change_nothing(store_url: str, namespace: str, ledger: Ledger) -> None:
    where = ("--store", store_url, "--namespace", namespace)
    ledger.claim("k", lease=timedelta(milliseconds=100))
    before = ledger.status("k")
    cases = [
        (("resolve", "k", "--redo", *where), 2, "--reason"),
        (("resolve", "k", "--reason", "r", *where), 2, "--reuse, --redo or --terminate"),
        (("resolve", "k", "--redo", "--reason", " ", *where), 2, "reason"),
        (("resolve", "k", "--redo", "--reason", "r", "--result", "{", *where), 2, "not JSON"),
        (("resolve", "absent", "--redo", "--reason", "r", *where), 3, "no job"),
        (("resolve", "k", "--redo", "--reason", "r", "--store", "bogus://x", "-n", "x"), 2, ""),
    ]
    for args, code, said in cases:
        answer = run(*args)
        assert answer.returncode == code, (args, answer.stderr)
        assert said in answer.stderr and answer.stderr.startswith("error: "), answer.stderr
    after = ledger.status("k")
    assert after is not None and before is not None
    assert (after.fence, after.state, after.events) == (before.fence, before.state, ())
