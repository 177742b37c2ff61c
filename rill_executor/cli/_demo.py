"""``rill-executor demo``: the ledger's answers to the engine's duplicates, on a real store."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from .. import Claim, JobInProgress, JobStatus, Ledger, StaleAttempt

__all__ = ["run_demo"]


class Segment(BaseModel):
    video: str
    segment: int
    profile: str


class Transcoded(BaseModel):
    uri: str
    frames: int


def _key(job: Segment) -> str:
    return f"{job.video}:segment-{job.segment}:{job.profile}"


def _history(status: JobStatus | None, say: Callable[[str], None]) -> None:
    assert status is not None
    say(
        f"   job {status.key!r}: {status.state.value}, fence {status.fence}, result {status.result}"
    )
    say(f"   {'fence':>5}  {'attempt':<24}  {'outcome':<9}  {'started':<12}  ended")
    for a in status.attempts:
        ended = a.ended_at.strftime("%H:%M:%S.%f")[:12] if a.ended_at else "-"
        say(
            f"   {a.fence:>5}  {a.attempt_id:<24}  {a.outcome.value:<9}"
            f"  {a.started_at.strftime('%H:%M:%S.%f')[:12]:<12}  {ended}"
        )


def run_demo(url: str | None, lease: float, say: Callable[[str], None]) -> None:
    folder = None
    if url is None:
        folder = tempfile.TemporaryDirectory(prefix="rill-demo-")
        url = f"sqlite:///{Path(folder.name) / 'jobs.db'}"
    namespace = f"demo-{int(time.time())}"
    say(f"rill-executor demo: store {url}, namespace {namespace!r}, lease {lease:g}s\n")
    with Ledger(url, namespace=namespace, lease=lease) as ledger:
        runs: list[str] = []
        gate = threading.Event()

        def work(job: Segment) -> Transcoded:
            runs.append(_key(job))
            if job.segment == 2:
                gate.wait(10)  # a slow segment, so that a duplicate meets it running
            return Transcoded(
                uri=f"s3://outputs/{job.video}/{job.segment}/{job.profile}.mp4", frames=250
            )

        transcode = ledger.idempotent(
            name="transcode", key=_key, result_version=lambda job: job.profile
        )(work)
        patient = ledger.idempotent(
            name="transcode", key=_key, result_version=lambda job: job.profile, wait=10
        )(work)

        say("1. A fresh dispatch runs the handler and commits its result")
        first = transcode(Segment(video="video-A", segment=1, profile="h264-v2"))
        say(f"   -> handler ran ({len(runs)} run so far): {first.uri}\n")

        say("2. The engine resends the same task: the stored result answers it")
        again = transcode(Segment(video="video-A", segment=1, profile="h264-v2"))
        say(
            f"   -> replayed as {type(again).__name__}, handler not run"
            f" ({len(runs)} run so far): {again.uri}\n"
        )

        say("3. A duplicate arrives while the first attempt is still running")
        slow = Segment(video="video-A", segment=2, profile="h264-v2")
        running = threading.Thread(target=transcode, args=(slow,))
        running.start()
        while len(runs) < 2:
            time.sleep(0.01)
        try:
            transcode(slow)
        except JobInProgress as busy:
            say(
                f"   -> JobInProgress: attempt {busy.owner_attempt_id} (fence {busy.fence})"
                " runs it,"
                f" lease {busy.lease_left.total_seconds():.2f}s left"
            )
        threading.Timer(0.3, gate.set).start()
        joined = patient(slow)
        running.join()
        say(f"   -> with wait=10s the duplicate joined the running attempt: {joined.uri}")
        say(f"      (segment 2: {runs.count(_key(slow))} run for 3 calls)\n")

        say("4. An attempt stalls past its lease; another takes over; the stale commit is fenced")
        key = "video-A:segment-3:h264-v2"
        a = ledger.claim(key)
        assert isinstance(a, Claim)
        say(
            f"   attempt A {a.attempt_id} claims {key!r}: fence {a.fence},"
            f" lease {lease:g}s ... and stalls"
        )
        time.sleep(lease * 1.3)
        b = ledger.claim(key)
        assert isinstance(b, Claim)
        say(
            f"   attempt B {b.attempt_id} claims after the lease expired: takeover, fence {b.fence}"
        )
        b.commit(Transcoded(uri="s3://outputs/video-A/3/h264-v2.mp4", frames=250))
        say("   attempt B commits its result")
        try:
            a.commit(Transcoded(uri="s3://outputs/video-A/3/STALE.mp4", frames=1))
        except StaleAttempt as stale:
            say(f"   attempt A wakes up and commits -> StaleAttempt ({stale.reason}): {stale}")
        say("")

        say("5. What happened to it, with every attempt (ledger.status)")
        _history(ledger.status(key), say)
    if folder is not None:
        folder.cleanup()
