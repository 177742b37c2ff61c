"""An in-memory ``OutputStore``: for unit tests of services that write outputs.

Same contract as the real output stores within one process: SHA-256 of every object,
conditional writes, listing by prefix.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from ._clock import SYSTEM_CLOCK, Clock, checked_clock
from ._errors import OutputExists, OutputMissing, OutputPreconditionFailed
from ._outputs import OutputData, StoredObject

__all__ = ["MemoryOutputStore"]


def _bytes(data: OutputData) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, os.PathLike):
        return Path(data).read_bytes()
    return data.read()


def _chunks(body: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


class MemoryOutputStore:
    def __init__(self, bucket: str = "outputs", *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.bucket = bucket
        self._clock = checked_clock(clock)  # an object's last_modified: a test's VirtualClock
        self._lock = threading.Lock()
        self._objects: dict[str, tuple[bytes, StoredObject]] = {}
        self._versions = itertools.count(1)

    def uri(self, key: str) -> str:
        return f"memory://{self.bucket}/{key}"

    def _store(self, key: str, data: OutputData) -> StoredObject:
        body = _bytes(data)
        sha256 = hashlib.sha256(body).hexdigest()
        stored = StoredObject(
            key=key,
            uri=self.uri(key),
            size=len(body),
            sha256=sha256,
            etag=f'"{sha256[:32]}"',
            version_id=str(next(self._versions)),
            last_modified=datetime.fromtimestamp(self._clock.time_ns() / 1e9, UTC),
        )
        self._objects[key] = (body, stored)
        return stored

    def put(self, key: str, data: OutputData, *, if_none_match: bool = False) -> StoredObject:
        with self._lock:
            if if_none_match and key in self._objects:
                raise OutputExists(f"{self.uri(key)} exists already")
            return self._store(key, data)

    def put_if_match(self, key: str, data: OutputData, *, etag: str) -> StoredObject:
        with self._lock:
            current = self._objects.get(key)
            if current is None or current[1].etag != etag:
                raise OutputPreconditionFailed(f"{self.uri(key)} is not at ETag {etag}")
            return self._store(key, data)

    def head(self, key: str) -> StoredObject | None:
        with self._lock:
            found = self._objects.get(key)
            return None if found is None else found[1]

    def read(self, key: str) -> Iterator[bytes]:
        with self._lock:
            found = self._objects.get(key)
        if found is None:
            raise OutputMissing(f"no object at {self.uri(key)}")
        return _chunks(found[0])

    def list(self, prefix: str) -> Iterator[StoredObject]:
        with self._lock:
            found = [
                stored
                for key, (_, stored) in sorted(self._objects.items())
                if key.startswith(prefix)
            ]
        return iter([replace(stored, sha256=None) for stored in found])

    def delete(self, key: str) -> bool:
        with self._lock:
            return self._objects.pop(key, None) is not None

    def close(self) -> None:
        pass
