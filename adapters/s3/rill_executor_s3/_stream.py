"""Reading an object: its bytes in chunks, checked against the SHA-256 recorded for it.

Two checks run while the chunks go by. botocore validates S3's own full-object checksum
(requested with ``ChecksumMode=ENABLED``; S3 has one for objects written in one request), and
this stream hashes the bytes and compares them at the end with the ``x-amz-meta-sha256`` the
adapter stored at write time (the only full-content digest of a multipart object). Either
one failing raises ``ChecksumMismatch`` instead of the last chunk.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING

from rill_executor.outputs import ChecksumMismatch

from ._errors import wrap_errors

if TYPE_CHECKING:
    from botocore.response import StreamingBody

__all__ = ["ObjectStream"]


class ObjectStream(Iterator[bytes]):
    """The chunks of one GetObject response; closes the response when done or closed."""

    def __init__(
        self,
        body: StreamingBody,
        *,
        bucket: str,
        key: str,
        size: int,
        sha256: str | None,
        chunk_size: int,
    ) -> None:
        self._body = body
        self._bucket = bucket
        self._key = key
        self._size = size
        self._expected = sha256
        self._hash = hashlib.sha256() if sha256 is not None else None
        self._seen = 0
        self._chunk_size = chunk_size
        self._closed = False

    def __iter__(self) -> ObjectStream:
        return self

    def __next__(self) -> bytes:
        if self._closed:
            raise StopIteration
        try:
            with wrap_errors(self._bucket, self._key, action="s3:GetObject"):
                chunk = self._body.read(self._chunk_size)
            if chunk:
                self._seen += len(chunk)
                if self._hash is not None:
                    self._hash.update(chunk)
                return chunk
            self._verify()
        except BaseException:
            self.close()
            raise
        self.close()
        raise StopIteration

    def _verify(self) -> None:
        where = f"s3://{self._bucket}/{self._key}"
        if self._seen != self._size:
            raise ChecksumMismatch(
                f"{where}: read {self._seen} bytes, S3 announced {self._size}; the object"
                " changed while it was read, read it again"
            )
        if self._hash is not None and self._hash.hexdigest() != self._expected:
            raise ChecksumMismatch(
                f"{where}: the bytes hash to sha256 {self._hash.hexdigest()}, but the object"
                f" records {self._expected} (x-amz-meta-sha256); it was replaced or corrupted"
                " behind the ledger's back: do not use it"
            )

    def close(self) -> None:
        """Release the connection; the rest of the object is not read."""
        if not self._closed:
            self._closed = True
            self._body.close()

    def __enter__(self) -> ObjectStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_closed", True) is False:  # dropped unfinished: free the connection
            self.close()
