"""A Rill Flow executor that transcodes video for real: the seed's video case, split →
transcode each segment → merge, with FFmpeg, output objects on S3 and jobs in any store.

Run it (see README.md; ``python -m examples.transcode.run`` does all of it)::

    RILL_STORE=sqlite:///jobs.db RILL_OUTPUTS='s3://media/transcode?endpoint_url=…' \
      uvicorn examples.transcode.app:from_env --factory --workers 2 --port 8000

Routes (``task_async`` in ``transcode.yaml``; ``task_sync`` works too):

- ``POST /split`` ``{"video", "count", "segment_seconds"}``: make the source video, cut it
  into segments, write each as an output object of the split job; answer the segment list.
- ``POST /transcode`` ``{"video", "segment", "profile", "version"}``: one segment, keyed
  ``{video}:{segment}:{profile}-{version}``; its source is the split job's committed
  output, its result an output object: ``{"uri", "sha256", "frames"}``.
- ``POST /merge`` ``{"video", "segments", "profile", "version"}``: concatenate the segments'
  committed outputs, as the ledger records them; refused while one has none.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Annotated

from fastapi import FastAPI
from pydantic import BaseModel, Field, StringConstraints

from rill_executor import AsyncLedger, ConfigError, TerminalError, current_async_claim
from rill_executor.outputs import ChecksumMismatch, OutputStore
from rill_executor.rillflow import Engines, RillFlowExecutor

from . import media

__all__ = [
    "MergeJob",
    "Merged",
    "NotCommitted",
    "SegmentJob",
    "SegmentResult",
    "SplitJob",
    "SplitResult",
    "create_app",
    "from_env",
    "mount",
    "segment_key",
]

NAMESPACE = "transcode"
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
Word = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]{1,16}$")]


class SplitJob(BaseModel):
    video: Name
    count: int = Field(3, ge=1, le=20)  # how many segments
    segment_seconds: int = Field(2, ge=1, le=10)


class SplitResult(BaseModel):
    video: str
    segments: list[int]  # the foreach's collection: one transcode per segment
    frames: int


class SegmentJob(BaseModel):
    video: Name
    segment: int = Field(ge=1)
    profile: Word  # "h264"
    version: Word  # "v2": the version of the profile's settings


class SegmentResult(BaseModel):
    uri: str
    sha256: str
    frames: int


class MergeJob(BaseModel):
    video: Name
    segments: list[int] = Field(min_length=1)
    profile: Word
    version: Word


class Merged(BaseModel):
    uri: str
    sha256: str
    frames: int
    segments: list[str]  # the SHA-256 of each segment merged, in order


class NotCommitted(Exception):
    """A segment has no committed output (yet): a retryable failure, so the engine's retry
    merges once it has."""


def segment_key(video: str, segment: int, profile: str, version: str) -> str:
    """The business key of one transcoded segment: ``video-A:1:h264-v2``."""
    return f"{video}:{segment}:{profile}-{version}"


def profile_of(job: SegmentJob | MergeJob) -> str:
    """The profile's settings a result is made with, its result version: ``h264-v2``."""
    return f"{job.profile}-{job.version}"


def _download(store: OutputStore, key: str, sha256: str, path: Path) -> Path:
    """Copy output object ``key`` to ``path``, checking it is the object the ledger recorded."""
    digest = hashlib.sha256()
    with path.open("wb") as out:
        for chunk in store.read(key):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != sha256:
        raise ChecksumMismatch(f"{key}: SHA-256 {digest.hexdigest()}, recorded {sha256}")
    return path


def mount(executor: RillFlowExecutor) -> None:
    """The three task routes of the video workflow, on ``executor``."""
    ledger = executor.ledger

    def output_store() -> OutputStore:
        if ledger.outputs is None:
            raise ConfigError("no output store: set RILL_OUTPUTS (e.g. s3://bucket/prefix)")
        return ledger.outputs

    @executor.task("/split", key=lambda job: job.video, name="split")
    async def split(job: SplitJob) -> SplitResult:
        claim = current_async_claim()
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            seconds = job.count * job.segment_seconds
            source = await asyncio.to_thread(media.generate, folder / "source.mp4", seconds)
            parts = await asyncio.to_thread(media.split, source, folder, job.segment_seconds)
            for number, part in enumerate(parts, start=1):
                await claim.outputs.put(f"segment-{number}.mp4", part)
            frames = await asyncio.to_thread(media.frames, source)
        return SplitResult(video=job.video, segments=list(range(1, len(parts) + 1)), frames=frames)

    @executor.task(
        "/transcode",
        key=lambda job: segment_key(job.video, job.segment, job.profile, job.version),
        result_version=profile_of,
        name="transcode",
    )
    async def transcode(job: SegmentJob) -> SegmentResult:
        profile = profile_of(job)
        if profile not in media.PROFILES:
            raise TerminalError(f"unknown profile {profile!r}; known: {sorted(media.PROFILES)}")
        split = await ledger.status(job.video, handler="split")  # where the source segment is
        if split is None or not split.outputs:
            raise NotCommitted(f"{job.video} has no committed split yet")
        source = next((o for o in split.outputs if o.name == f"segment-{job.segment}.mp4"), None)
        if source is None:
            raise TerminalError(f"{job.video} has no segment {job.segment}")
        claim = current_async_claim()
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            local = folder / "source.mp4"
            await asyncio.to_thread(_download, output_store(), source.key, source.sha256, local)
            encoded = await asyncio.to_thread(
                media.transcode, local, folder / "segment.mp4", profile
            )
            frames = await asyncio.to_thread(media.frames, encoded)
            ref = await claim.outputs.put("segment.mp4", encoded)
        return SegmentResult(uri=ref.uri, sha256=ref.sha256, frames=frames)

    @executor.task(
        "/merge",
        key=lambda job: f"{job.video}:{job.profile}-{job.version}",
        result_version=profile_of,
        name="merge",
    )
    async def merge(job: MergeJob) -> Merged:
        # Which result may be merged is the ledger's answer, not the engine context's: the
        # output committed for each segment's key, whichever attempt committed it.
        refs, missing = [], []
        for segment in job.segments:
            key = segment_key(job.video, segment, job.profile, job.version)
            status = await ledger.status(key, handler="transcode")
            committed = status.outputs if status is not None else ()
            if committed:
                refs.append(committed[0])
            else:
                missing.append(key)
        if missing:
            raise NotCommitted(f"not merging {job.video}: no committed output for {missing}")
        claim = current_async_claim()
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            parts = [
                await asyncio.to_thread(
                    _download, output_store(), ref.key, ref.sha256, folder / f"{n}.mp4"
                )
                for n, ref in enumerate(refs)
            ]
            merged = await asyncio.to_thread(media.concat, parts, folder / "merged.mp4")
            frames = await asyncio.to_thread(media.frames, merged)
            ref = await claim.outputs.put("merged.mp4", merged)
        return Merged(
            uri=ref.uri, sha256=ref.sha256, frames=frames, segments=[r.sha256 for r in refs]
        )


def create_app(
    store: str,
    outputs: str | None,
    *,
    namespace: str = NAMESPACE,
    lease: float = 10.0,
    engines: Engines | list[str] | None = None,
) -> FastAPI:
    """The executor service on job store ``store`` and output store ``outputs`` (URLs)."""
    ledger = AsyncLedger(store, namespace=namespace, outputs=outputs, lease=lease)
    executor = RillFlowExecutor(ledger, lease=timedelta(seconds=lease), engines=engines)
    mount(executor)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if outputs is None:  # refused as the server starts: it stops, rather than restart
            raise ConfigError("set RILL_OUTPUTS (s3://bucket/prefix?…): the files go there")
        async with executor.lifespan(app):
            yield

    app = FastAPI(lifespan=lifespan)
    app.include_router(executor.router)
    return app


def from_env() -> FastAPI:
    """``create_app`` from ``RILL_STORE`` (default ``sqlite:///jobs.db``), ``RILL_OUTPUTS``
    (an ``s3://`` URL), ``RILL_LEASE`` (seconds) and ``RILL_ENGINES`` (comma-separated)."""
    return create_app(
        os.environ.get("RILL_STORE", "sqlite:///jobs.db"),
        os.environ.get("RILL_OUTPUTS"),
        lease=float(os.environ.get("RILL_LEASE", "10")),
        engines=Engines.from_env("RILL_ENGINES"),
    )
