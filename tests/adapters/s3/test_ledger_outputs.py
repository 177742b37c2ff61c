"""Outputs through the ledger, on real job stores and the moto S3 server, crashes included.

The job stores are SQLite, PostgreSQL, MariaDB and Redis. Each crash test runs a first
attempt in a child process that writes an output and is killed (SIGKILL) or paused
(SIGSTOP) midway; a second attempt takes the job over and commits. Whatever the window, the
job ends with exactly one committed set of outputs, the first attempt's object is listed by
the audit as an orphan and removed by collection, and no committed object is ever deleted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rill_executor import ChecksumMismatch, Claim, Ledger, StaleAttempt
from rill_executor.outputs import OutputRef
from rill_executor.reports import ObjectState
from rill_executor_s3 import S3OutputStore
from tests.clocks import SIGNALS, STORE_CLOCK

from .conftest import PREFIX, REGION, MotoServer

REPO = Path(__file__).resolve().parents[3]
LEASE = 1.0


@pytest.fixture(params=["sqlite", "postgres", "mariadb", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
def outputs_url(moto: MotoServer, bucket: str) -> str:
    return f"s3://{bucket}/{PREFIX}?endpoint_url={moto.endpoint}&region={REGION}"


@pytest.fixture
def ledger(store_url: str, outputs_url: str) -> Iterator[Ledger]:
    with Ledger(
        store_url, namespace=f"o{uuid.uuid4().hex[:12]}", lease=30, outputs=outputs_url
    ) as opened:
        yield opened
        assert opened.outputs is not None
        opened.outputs.close()


def _commit_second_attempt(ledger: Ledger, key: str) -> OutputRef:
    claim = ledger.claim(key)
    assert isinstance(claim, Claim), claim
    ref = claim.outputs.put("segment.mp4", b"segment bytes from the second attempt")
    claim.commit({"video": ref.uri})
    return ref


def _assert_one_committed_set(
    ledger: Ledger, key: str, winner: OutputRef, orphan_exists: bool
) -> None:
    status = ledger.status(key)
    assert status is not None and status.outputs == (winner,)
    audit = ledger.audit(key)
    states = sorted((e.state, e.exists) for e in audit.entries)
    assert states == sorted([(ObjectState.COMMITTED, True), (ObjectState.ORPHAN, orphan_exists)])
    report = ledger.collect_orphans(grace=0)
    assert [e.state for e in report.deleted] == ([ObjectState.ORPHAN] if orphan_exists else [])
    assert ledger.collect_orphans(grace=0).deleted == ()
    ledger.verify(winner)  # the committed object survived, byte for byte
    assert [e.state for e in ledger.audit(key).entries if e.exists] == [ObjectState.COMMITTED]


def _child(
    store_url: str, outputs_url: str, ledger: Ledger, key: str, mode: str
) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tests.adapters.s3._output_worker", store_url, outputs_url,
               ledger.namespace, key, str(LEASE), mode]  # fmt: skip
    return subprocess.Popen(
        command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def _next(child: subprocess.Popen[str]) -> dict[str, object]:
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line, "the child process ended early"
    return json.loads(line)  # type: ignore[no-any-return]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "orphan_exists"), [("kill-before-upload", False), ("kill-before-commit", True)]
)
@pytest.mark.real_clock(SIGNALS)
def test_an_attempt_killed_midway_leaves_only_an_orphan(
    store_url: str, outputs_url: str, ledger: Ledger, mode: str, orphan_exists: bool
) -> None:
    key = f"video-{mode}"
    with _child(store_url, outputs_url, ledger, key, mode) as child:
        first = _next(child)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    time.sleep(LEASE * 1.3)
    winner = _commit_second_attempt(ledger, key)
    status = ledger.status(key)
    assert status is not None
    assert [(a.attempt_id, a.outcome.value) for a in status.attempts] == [
        (first["attempt_id"], "expired"),
        (status.attempts[1].attempt_id, "succeeded"),
    ]
    _assert_one_committed_set(ledger, key, winner, orphan_exists)


@pytest.mark.real_clock(SIGNALS)
@pytest.mark.slow
def test_a_zombie_that_uploads_after_being_fenced_cannot_commit(
    store_url: str, outputs_url: str, ledger: Ledger
) -> None:
    key = "video-zombie"
    with _child(store_url, outputs_url, ledger, key, "zombie") as child:
        assert child.stdin is not None
        try:
            _next(child)  # registered; now inside its upload
            os.kill(child.pid, signal.SIGSTOP)
            time.sleep(LEASE * 1.3)
            winner = _commit_second_attempt(ledger, key)
            os.kill(child.pid, signal.SIGCONT)
            child.stdin.write("go\n")
            child.stdin.flush()
            done = _next(child)
        finally:
            os.kill(child.pid, signal.SIGCONT)
            child.wait(30)
    assert done["commit"] == "StaleAttempt:superseded"
    assert ledger.outputs is not None and ledger.outputs.head(str(done["key"])) is not None
    _assert_one_committed_set(ledger, key, winner, orphan_exists=True)


def test_a_large_output_round_trip(ledger: Ledger, tmp_path: Path) -> None:
    big = tmp_path / "segment.mp4"
    big.write_bytes(os.urandom(1024 * 1024) * 12)  # multipart with the default 8 MiB threshold
    claim = ledger.claim("video-big")
    assert isinstance(claim, Claim)
    ref = claim.outputs.put("segment.mp4", big)
    claim.commit({"video": ref.uri})
    ledger.verify(ref)
    (published,) = ledger.publish("video-big")
    assert published.sha256 == ref.sha256 and "/published/video-big/" in published.key
    assert ledger.collect_orphans(grace=0).deleted == ()


def test_an_object_changed_behind_the_ledger_fails_verification(
    ledger: Ledger, store: S3OutputStore, bucket: str
) -> None:
    claim = ledger.claim("video-changed")
    assert isinstance(claim, Claim)
    ref = claim.outputs.put("segment.mp4", b"original bytes")
    claim.commit({"video": ref.uri})
    assert ledger.outputs is not None
    ledger.outputs.put(ref.key, b"original")  # truncated by someone else
    with pytest.raises(ChecksumMismatch):
        ledger.verify(ref)


@pytest.mark.real_clock(STORE_CLOCK)
def test_a_stale_attempt_writes_no_object(ledger: Ledger) -> None:
    a = ledger.claim("video-stale", lease=0.2)
    assert isinstance(a, Claim)
    time.sleep(0.3)
    _commit_second_attempt(ledger, "video-stale")
    with pytest.raises(StaleAttempt):
        a.outputs.put("late.mp4", b"never written")
    assert ledger.outputs is not None
    assert all(not o.key.startswith(f"{ledger.namespace}/") or a.attempt_id not in o.key
               for o in ledger.outputs.list(f"{ledger.namespace}/"))  # fmt: skip


def test_the_drill_report_counts_orphan_outputs_and_their_bytes(ledger: Ledger) -> None:
    failed = ledger.claim("failed")
    assert isinstance(failed, Claim), failed
    failed.outputs.put("part.mp4", b"x" * 1000)  # written, then the attempt fails
    failed.fail("encoder crashed", retryable=True)
    _commit_second_attempt(ledger, "done")
    report = ledger.drill()
    assert (report.ok, report.jobs, report.orphan_outputs, report.orphan_bytes) == (
        True,
        2,
        1,
        1000,
    )
    ledger.collect_orphans(grace=0)
    assert (ledger.drill().orphan_outputs, ledger.drill().orphan_bytes) == (0, 0)
