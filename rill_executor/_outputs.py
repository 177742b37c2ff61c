"""The output-store port: where attempts write the objects their results refer to.

An ``OutputStore`` keeps bytes under keys in one bucket-like space and reports each
object's SHA-256, size, ETag and version. It is a plain, synchronous port; the ledger
decides the keys (attempt-scoped, then canonical), registers every object before it is
written, and commits the refs with the result in one fenced write.

Adapters: ``rill-executor-s3`` (boto3). Errors: ``OutputStoreError`` and subclasses, mapped
from the driver in one place by each adapter.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO, Protocol, runtime_checkable

__all__ = ["OutputData", "OutputStore", "StoredObject"]

OutputData = bytes | BinaryIO | os.PathLike[str]
"""What can be written: bytes, a binary file object positioned at its start, or a path."""


@dataclass(frozen=True, slots=True)
class StoredObject:
    key: str  # the object's key inside the store
    uri: str  # e.g. s3://bucket/prefix/...
    size: int
    sha256: str | None  # hex digest as stored by the store's checksum, if it keeps one
    etag: str | None
    version_id: str | None
    last_modified: datetime


@runtime_checkable
class OutputStore(Protocol):
    def uri(self, key: str) -> str:
        """The URI an object under ``key`` has (or will have)."""

    def put(self, key: str, data: OutputData, *, if_none_match: bool = False) -> StoredObject:
        """Write ``data`` under ``key`` with a SHA-256 checksum the store verifies.

        ``if_none_match`` makes the write fail with ``OutputExists`` when ``key`` exists.
        """

    def put_if_match(self, key: str, data: OutputData, *, etag: str) -> StoredObject:
        """Replace the object under ``key`` only if its ETag is still ``etag``
        (``OutputPreconditionFailed`` otherwise)."""

    def head(self, key: str) -> StoredObject | None:
        """The object's metadata (with its stored SHA-256), or None if absent."""

    def read(self, key: str) -> Iterator[bytes]:
        """The object's bytes, in chunks (``OutputMissing`` if absent)."""

    def list(self, prefix: str) -> Iterator[StoredObject]:
        """Every object whose key starts with ``prefix`` (without stored checksums)."""

    def delete(self, key: str) -> bool:
        """Delete ``key``; True if it existed. Deleting twice is not an error."""

    def close(self) -> None: ...
