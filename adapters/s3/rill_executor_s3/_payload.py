"""What a put uploads: the caller's data, its SHA-256 and size known before the first request.

S3 takes an object's checksum and metadata when the upload starts, so the digest of the full
content is computed locally first:

- up to the multipart threshold, the data is read into memory once (bytes, a file object or
  a path alike) and sent in one PutObject with that digest for S3 to verify;
- above it, a first pass hashes the data and a second uploads it: a path or a seekable file
  is read twice (rewound to where it started), a stream that cannot seek is copied to a
  temporary file while it is hashed.

The upload pass hashes again what it sends (``VerifyingReader``) and fails with
``ChecksumMismatch`` before the upload completes if the bytes changed between the passes.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import BinaryIO, cast

from rill_executor import UsageError
from rill_executor.outputs import ChecksumMismatch, OutputData

__all__ = ["Payload", "VerifyingReader", "open_payload"]

_BLOCK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Payload:
    """The data of one put: in memory (``body``) or in a seekable file from ``start``."""

    sha256: bytes
    size: int
    body: bytes | None
    file: BinaryIO | None
    start: int

    @property
    def sha256_hex(self) -> str:
        return self.sha256.hex()

    @property
    def sha256_b64(self) -> str:
        return base64.b64encode(self.sha256).decode("ascii")

    def reader(self, where: str) -> VerifyingReader:
        """A fresh pass over a file payload that checks the bytes against the first pass."""
        assert self.file is not None, "in-memory payloads are sent as they are"
        self.file.seek(self.start)
        return VerifyingReader(self, self.file, where)


class VerifyingReader:
    """Reads a file payload for the upload, hashing what it hands out.

    It has no ``seek``: s3transfer then reads it once, in order. Reading past the size of the
    first pass, or reaching the end with another digest, raises ``ChecksumMismatch``; raised
    inside an upload, that aborts it before S3 completes the object.
    """

    def __init__(self, payload: Payload, file: BinaryIO, where: str) -> None:
        self._payload = payload
        self._file = file
        self._where = where
        self._hash = hashlib.sha256()
        self._seen = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        chunk = self._file.read(size)
        self._hash.update(chunk)
        self._seen += len(chunk)
        if self._seen > self._payload.size or (not chunk and size != 0):
            self.verify()
        return chunk

    def verify(self) -> None:
        """Raise ``ChecksumMismatch`` unless everything read so far is the first pass's data."""
        if self._seen != self._payload.size or self._hash.digest() != self._payload.sha256:
            raise ChecksumMismatch(
                f"the data for {self._where} changed while it was being uploaded (first pass:"
                f" {self._payload.size} bytes, sha256 {self._payload.sha256_hex}; upload pass:"
                f" {self._seen} bytes so far); nothing was written. Do not modify a file while"
                " it is being put"
            )


def _read_up_to(file: BinaryIO, size: int) -> bytes:
    """Up to ``size`` bytes; fewer only at the end (raw files and pipes may return short)."""
    parts: list[bytes] = []
    left = size
    while left > 0:
        chunk = file.read(left)
        if not isinstance(chunk, bytes | bytearray | memoryview):
            raise UsageError(
                f"put() needs a binary file object; read() returned {type(chunk).__name__}"
                " (open the file with mode 'rb')"
            )
        if not chunk:
            break
        parts.append(bytes(chunk))
        left -= len(chunk)
    return b"".join(parts)


def _seekable(file: BinaryIO) -> bool:
    try:
        return bool(file.seekable())
    except (AttributeError, OSError, ValueError):
        return False


@contextmanager
def open_payload(data: OutputData, *, threshold: int) -> Iterator[Payload]:
    """Hash ``data`` and keep it ready to send; files this opened are closed on exit."""
    if isinstance(data, bytes | bytearray | memoryview):
        body = bytes(data)
        yield Payload(hashlib.sha256(body).digest(), len(body), body, None, 0)
        return
    if isinstance(data, str):
        raise UsageError(
            "put() takes bytes, a binary file object or a path, not a str; pass"
            " text.encode() for content or pathlib.Path(name) for a file"
        )
    with ExitStack() as stack:
        if isinstance(data, os.PathLike):
            file = cast(BinaryIO, stack.enter_context(open(os.fspath(data), "rb")))
        elif callable(getattr(data, "read", None)):
            file = data
        else:
            raise UsageError(
                f"put() takes bytes, a binary file object or a path, not {type(data).__name__}"
            )
        start = file.tell() if _seekable(file) else 0
        head = _read_up_to(file, threshold + 1)
        if len(head) <= threshold:
            yield Payload(hashlib.sha256(head).digest(), len(head), head, None, 0)
            return
        digest = hashlib.sha256(head)
        size = len(head)
        if not _seekable(file):  # copy the stream aside while hashing it, then send the copy
            spool = cast(BinaryIO, stack.enter_context(tempfile.TemporaryFile()))
            spool.write(head)
            while chunk := _read_up_to(file, _BLOCK):
                digest.update(chunk)
                spool.write(chunk)
                size += len(chunk)
            yield Payload(digest.digest(), size, None, spool, 0)
            return
        while chunk := _read_up_to(file, _BLOCK):
            digest.update(chunk)
            size += len(chunk)
        yield Payload(digest.digest(), size, None, file, start)
