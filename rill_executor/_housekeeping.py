"""What became of output objects: audit, orphan collection, verification and publishing.

The classification is pure (``classify``): it takes a job's status and the objects found
under its folder and says, for each object, whether it is committed, in flight, an orphan or
unknown. The I/O around it — one status read and one listing per job — lives in the ledgers.
"""

from __future__ import annotations

import enum
import hashlib
import re
import tempfile
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from typing import IO

from pydantic import BaseModel, ConfigDict

from ._errors import ChecksumMismatch, OutputExists
from ._keys import canonical_object_key
from ._outputs import OutputStore, StoredObject
from ._records import AttemptOutcome, JobState, JobStatus, OutputInfo, OutputRef

__all__ = [
    "AuditEntry",
    "CollectReport",
    "ObjectState",
    "OutputAudit",
    "classify",
    "job_folder",
    "jobs_in",
    "publish_ref",
    "verify_ref",
]

_DIGEST = re.compile(r"[0-9a-f]{64}")


class ObjectState(enum.StrEnum):
    COMMITTED = "committed"  # an output of the job's committed result, job retained
    IN_FLIGHT = "in_flight"  # registered by the attempt that owns the job now
    ORPHAN = "orphan"  # registered by an attempt that ended without committing it
    UNKNOWN = "unknown"  # under the job's folder, registered by no attempt


class _View(BaseModel):
    model_config = ConfigDict(frozen=True)


class AuditEntry(_View):
    key: str
    state: ObjectState
    exists: bool  # False: registered, never written (or deleted since)
    uri: str | None = None
    name: str | None = None
    attempt_id: str | None = None
    fence: int | None = None
    size: int | None = None
    sha256: str | None = None
    last_modified: datetime | None = None
    age: timedelta | None = None

    @property
    def collectable(self) -> bool:
        return self.exists and self.state in (ObjectState.ORPHAN, ObjectState.UNKNOWN)


class OutputAudit(_View):
    namespace: str
    key: str | None  # None when the job record is gone
    job_id: str
    job_state: JobState | None
    entries: tuple[AuditEntry, ...]

    @property
    def orphans(self) -> tuple[AuditEntry, ...]:
        return tuple(e for e in self.entries if e.collectable)

    @property
    def committed(self) -> tuple[AuditEntry, ...]:
        return tuple(e for e in self.entries if e.state is ObjectState.COMMITTED)


class CollectReport(_View):
    deleted: tuple[AuditEntry, ...]
    kept_young: tuple[AuditEntry, ...]  # orphans inside the grace period
    jobs: int


def job_folder(namespace: str, job_id: str) -> str:
    return f"{namespace}/{job_id}/"


def jobs_in(namespace: str, objects: Iterable[StoredObject]) -> dict[str, list[StoredObject]]:
    """Objects under ``namespace/`` grouped by job id; published copies are not in a job's
    folder (their second segment is ``published``, never a 64-hex digest)."""
    jobs: dict[str, list[StoredObject]] = {}
    for obj in objects:
        parts = obj.key.split("/")
        if len(parts) >= 4 and parts[0] == namespace and _DIGEST.fullmatch(parts[1]):
            jobs.setdefault(parts[1], []).append(obj)
    return jobs


def _live_committed(status: JobStatus) -> int | None:
    """The fence whose committed outputs are live: the job's result, while retained."""
    retained = status.retain_until is not None and status.retain_until > status.store_time
    if status.state is JobState.SUCCEEDED and retained:
        return status.fence
    return None


def _state(status: JobStatus, fence: int, outcome: AttemptOutcome, info: OutputInfo) -> ObjectState:
    if info.committed and fence == _live_committed(status):
        return ObjectState.COMMITTED
    if outcome is AttemptOutcome.RUNNING and fence == status.fence:
        return ObjectState.IN_FLIGHT
    return ObjectState.ORPHAN


def classify(
    namespace: str,
    job_id: str,
    status: JobStatus | None,
    objects: Iterable[StoredObject],
    now: datetime,
) -> OutputAudit:
    found = {obj.key: obj for obj in objects}
    entries: list[AuditEntry] = []
    for attempt in status.attempts if status else ():
        for info in attempt.outputs:
            obj = found.pop(info.key, None)
            entries.append(
                AuditEntry(
                    key=info.key,
                    state=_state(status, attempt.fence, attempt.outcome, info),  # type: ignore[arg-type]
                    exists=obj is not None,
                    uri=info.uri,
                    name=info.name,
                    attempt_id=attempt.attempt_id,
                    fence=attempt.fence,
                    size=obj.size if obj else info.size,
                    sha256=info.sha256,
                    last_modified=obj.last_modified if obj else None,
                    age=now - obj.last_modified if obj else None,
                )
            )
    for obj in found.values():
        entries.append(
            AuditEntry(
                key=obj.key,
                state=ObjectState.UNKNOWN,
                exists=True,
                uri=obj.uri,
                name=obj.key.rsplit("/", 1)[-1],
                attempt_id=obj.key.split("/")[2],
                size=obj.size,
                last_modified=obj.last_modified,
                age=now - obj.last_modified,
            )
        )
    return OutputAudit(
        namespace=namespace,
        key=status.key if status else None,
        job_id=job_id,
        job_state=status.state if status else None,
        entries=tuple(entries),
    )


def _digest(chunks: Iterator[bytes], sink: IO[bytes] | None = None) -> tuple[str, int]:
    sha, size = hashlib.sha256(), 0
    for chunk in chunks:
        sha.update(chunk)
        size += len(chunk)
        if sink is not None:
            sink.write(chunk)
    return sha.hexdigest(), size


def verify_ref(outputs: OutputStore, ref: OutputRef) -> None:
    """Read the object behind ``ref`` and check its SHA-256 and size."""
    sha256, size = _digest(outputs.read(ref.key))
    if (sha256, size) != (ref.sha256, ref.size):
        raise ChecksumMismatch(
            f"{ref.uri} holds {size} bytes with SHA-256 {sha256[:16]}…, but the ledger"
            f" recorded {ref.size} bytes with SHA-256 {ref.sha256[:16]}…: the object was"
            " changed or truncated after it was written"
        )


def _published(ref: OutputRef, stored: StoredObject) -> OutputRef:
    update = {"key": stored.key, "uri": stored.uri, "etag": stored.etag}
    return ref.model_copy(update={**update, "version_id": stored.version_id})


def publish_ref(outputs: OutputStore, status: JobStatus, ref: OutputRef) -> OutputRef:
    """Copy a committed output to its canonical key, never replacing another object there."""
    key = canonical_object_key(status.namespace, status.key, status.result_version, ref.name)
    for _ in range(2):
        existing = outputs.head(key)
        if existing is not None:
            if existing.sha256 != ref.sha256:
                raise OutputExists(
                    f"{existing.uri} already holds another object (SHA-256"
                    f" {(existing.sha256 or '?')[:16]}…, not {ref.sha256[:16]}…); publishing"
                    " never replaces it — resolve the job before publishing again"
                )
            return _published(ref, existing)
        with tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024) as copy:
            sha256, size = _digest(outputs.read(ref.key), copy)
            if (sha256, size) != (ref.sha256, ref.size):
                raise ChecksumMismatch(f"{ref.uri} no longer matches its committed ref")
            copy.seek(0)
            try:
                stored = outputs.put(key, copy, if_none_match=True)  # type: ignore[arg-type]
            except OutputExists:
                continue  # a concurrent publisher won: check what it wrote
        return _published(ref, stored)
    raise OutputExists(f"{key} changed while publishing; try again")
