"""What became of output objects: audit, orphan collection, verification and publishing.

The classification is pure (``classify``): it takes a job's status, this job store's
identity and the objects found under the job's folder and says, for each object, whether it
is committed, in flight, an orphan or unknown. Only an orphan may be deleted, and an object
is an orphan only when this store can prove it: an attempt this store holds registered it,
under the key that attempt wrote with this store's identity in it, and that registration
is uncommitted and ended (or belongs to a job past its retention). Everything else this
store cannot account for — another job store's objects on the same prefix, objects written
by hand — is unknown and never deleted. The I/O around it — one status read and one listing
per job — lives in the ledgers.
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
from ._keys import attempt_object_key, canonical_object_key
from ._outputs import OutputStore, StoredObject
from ._records import AttemptInfo, AttemptOutcome, JobState, JobStatus, OutputInfo, OutputRef

__all__ = [
    "AuditEntry",
    "CollectReport",
    "ObjectState",
    "OutputAudit",
    "classify",
    "job_folder",
    "publish_ref",
    "sort_namespace",
    "unknown_entry",
    "verify_ref",
]

_DIGEST = re.compile(r"[0-9a-f]{64}")


class ObjectState(enum.StrEnum):
    COMMITTED = "committed"  # an output of the job's committed result, job retained
    IN_FLIGHT = "in_flight"  # registered by the attempt that owns the job now
    ORPHAN = "orphan"  # written by an attempt of this store that ended without committing it
    UNKNOWN = "unknown"  # this store cannot account for it: never deleted


# When one key was registered more than once (an attempt id reused), the registration that
# protects the object most decides its state.
_PROTECTION = {
    ObjectState.ORPHAN: 0,
    ObjectState.UNKNOWN: 1,
    ObjectState.IN_FLIGHT: 2,
    ObjectState.COMMITTED: 3,
}


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
        return self.exists and self.state is ObjectState.ORPHAN


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

    @property
    def unknown(self) -> tuple[AuditEntry, ...]:
        return tuple(e for e in self.entries if e.state is ObjectState.UNKNOWN and e.exists)


class CollectReport(_View):
    deleted: tuple[AuditEntry, ...]
    kept_young: tuple[AuditEntry, ...]  # orphans inside the grace period
    jobs: int  # job folders read against this store
    unknown: tuple[AuditEntry, ...] = ()  # objects this store cannot account for: kept


def job_folder(namespace: str, job_id: str) -> str:
    return f"{namespace}/{job_id}/"


def sort_namespace(
    namespace: str, store_id: str, objects: Iterable[StoredObject]
) -> tuple[dict[str, list[StoredObject]], list[StoredObject]]:
    """Objects under ``namespace/``: the job folders holding an object written with this
    store's identity, by job id, and every other object (another store's, written by hand).

    Published copies are in neither: their second segment is ``published``, never a digest.
    """
    jobs: dict[str, list[StoredObject]] = {}
    others: list[StoredObject] = []
    for obj in objects:
        parts = obj.key.split("/")
        if parts[0] == namespace and len(parts) >= 3 and parts[1] == "published":
            continue
        if parts[0] == namespace and len(parts) >= 3 and _DIGEST.fullmatch(parts[1]):
            jobs.setdefault(parts[1], []).append(obj)
        else:
            others.append(obj)
    ours = {job: found for job, found in jobs.items() if _holds_ours(found, store_id)}
    others.extend(obj for job, found in jobs.items() if job not in ours for obj in found)
    return ours, others


def _holds_ours(objects: list[StoredObject], store_id: str) -> bool:
    return any(len(parts := o.key.split("/")) == 5 and parts[2] == store_id for o in objects)


def _live_committed(status: JobStatus) -> int | None:
    """The fence whose committed outputs are live: the job's result, while retained."""
    retained = status.retain_until is not None and status.retain_until > status.store_time
    if status.state is JobState.SUCCEEDED and retained:
        return status.fence
    return None


def _state(status: JobStatus, own_key: str, attempt: AttemptInfo, info: OutputInfo) -> ObjectState:
    if info.committed and attempt.fence == _live_committed(status):
        return ObjectState.COMMITTED
    if attempt.outcome is AttemptOutcome.RUNNING:
        # the owner's objects are in flight; a running attempt that is not the owner
        # cannot be proved to have ended
        return ObjectState.IN_FLIGHT if attempt.fence == status.fence else ObjectState.UNKNOWN
    # written where this attempt of this store writes: provably ours, and it ended
    return ObjectState.ORPHAN if info.key == own_key else ObjectState.UNKNOWN


def _registrations(
    namespace: str, store_id: str, job_id: str, status: JobStatus
) -> dict[str, tuple[ObjectState, AttemptInfo, OutputInfo]]:
    """Each registered key with the registration that protects its object most."""
    found: dict[str, tuple[ObjectState, AttemptInfo, OutputInfo]] = {}
    for attempt in status.attempts:
        for info in attempt.outputs:
            own = attempt_object_key(namespace, job_id, store_id, attempt.attempt_id, info.name)
            state = _state(status, own, attempt, info)
            seen = found.get(info.key)
            if seen is None or _PROTECTION[state] >= _PROTECTION[seen[0]]:
                found[info.key] = (state, attempt, info)
    return found


def unknown_entry(namespace: str, store_id: str, obj: StoredObject, now: datetime) -> AuditEntry:
    """An object no registration of this store accounts for."""
    parts = obj.key.split("/")
    ours = len(parts) == 5 and parts[0] == namespace and parts[2] == store_id
    return AuditEntry(
        key=obj.key,
        state=ObjectState.UNKNOWN,
        exists=True,
        uri=obj.uri,
        name=parts[-1],
        attempt_id=parts[3] if ours else None,
        size=obj.size,
        last_modified=obj.last_modified,
        age=now - obj.last_modified,
    )


def classify(
    namespace: str,
    store_id: str,
    job_id: str,
    status: JobStatus | None,
    objects: Iterable[StoredObject],
    now: datetime,
) -> OutputAudit:
    found = {obj.key: obj for obj in objects}
    entries: list[AuditEntry] = []
    registered = _registrations(namespace, store_id, job_id, status) if status else {}
    for key, (state, attempt, info) in registered.items():
        obj = found.pop(key, None)
        entries.append(
            AuditEntry(
                key=key,
                state=state,
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
    entries.extend(unknown_entry(namespace, store_id, obj, now) for obj in found.values())
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
