"""``S3OutputStore``: rill-executor's output-store port on one S3 bucket (boto3).

Keys are the caller's, placed under the store's ``prefix``; the ``StoredObject.key`` it
returns is the caller's key again, its ``uri`` the full ``s3://bucket/prefix/key``.

Writes carry SHA-256 checksums S3 verifies (the whole object's for a single PutObject,
every part's for a multipart upload) and the full content's hex digest as the object
metadata ``x-amz-meta-sha256``, computed locally (see ``_payload``). Conditional writes use
S3's ``If-None-Match: *`` and ``If-Match: <etag>``. Retries are boto3's standard mode.
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, cast

import boto3
from boto3.s3.transfer import TransferConfig
from botocore import exceptions as bc
from botocore.config import Config

from rill_executor import ConfigError, UsageError
from rill_executor.outputs import (
    OutputData,
    OutputExists,
    OutputPreconditionFailed,
    StoredObject,
)

from ._errors import Condition, is_conditional_conflict, wrap_errors
from ._multipart import put_multipart
from ._payload import Payload, open_payload
from ._stream import ObjectStream
from ._url import parse_url

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import HeadObjectOutputTypeDef, PutObjectRequestTypeDef

__all__ = ["SHA256_METADATA", "S3OutputStore", "open_s3_output_store"]

SHA256_METADATA = "sha256"  # sent as x-amz-meta-sha256: the full content's hex SHA-256
MAX_KEY_BYTES = 1024  # S3's limit on a full object key, in UTF-8
_CONFLICT_ATTEMPTS = 4  # tries of a conditional write that S3 answers 409 (a concurrent one)
_HEX_SHA256 = re.compile(r"[0-9a-f]{64}")

AddressingStyle = Literal["auto", "virtual", "path"]


def _default_transfer_config() -> TransferConfig:
    # "classic": the Python transfer manager, which reads a stream in order (the CRT one may not)
    return TransferConfig(preferred_transfer_client="classic")


class S3OutputStore:
    """An ``OutputStore`` on one S3 bucket; every key lives under ``prefix``.

    ``client``: a boto3 S3 client to use as it is (the store does not close it); otherwise
    one is built from ``endpoint_url``, ``region_name``, ``profile_name`` and boto3's
    credential chain, with the standard retry mode (``max_attempts`` tries in all) and the
    given timeouts, and closed by ``close()``. ``transfer_config``: boto3's
    ``TransferConfig`` for large objects; its ``multipart_threshold`` separates one-request
    writes from multipart ones, its ``multipart_chunksize`` sizes the parts.
    """

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        client: S3Client | None = None,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        profile_name: str | None = None,
        transfer_config: TransferConfig | None = None,
        max_attempts: int = 5,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        addressing_style: AddressingStyle | None = None,
        page_size: int = 1000,
        read_chunk_size: int = 1024 * 1024,
    ) -> None:
        if not bucket or "/" in bucket:
            raise ConfigError(f"S3 bucket name {bucket!r} is empty or contains '/'")
        if page_size < 1 or read_chunk_size < 1 or max_attempts < 1:
            raise ConfigError("page_size, read_chunk_size and max_attempts must be positive")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self._root = f"{self.prefix}/" if self.prefix else ""
        self._transfer = transfer_config or _default_transfer_config()
        self._page_size = page_size
        self._chunk_size = read_chunk_size
        self._bucket_seen = False
        self._owns_client = client is None
        if client is None:
            config = Config(
                retries={"mode": "standard", "total_max_attempts": max_attempts},
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                user_agent_extra="rill-executor-s3/0.1.0",
            )
            if addressing_style is not None:
                config = config.merge(Config(s3={"addressing_style": addressing_style}))
            try:
                session = boto3.session.Session(profile_name=profile_name)
            except bc.ProfileNotFound as exc:
                raise ConfigError(
                    f"AWS profile {profile_name!r} is not in the AWS config files: {exc}"
                ) from exc
            client = session.client(
                "s3", endpoint_url=endpoint_url, region_name=region_name, config=config
            )
        elif endpoint_url or region_name or profile_name:
            raise ConfigError(
                "pass either a configured client or endpoint_url/region_name/profile_name"
            )
        self._client: S3Client = client

    @classmethod
    def from_url(cls, url: str, **options: Any) -> S3OutputStore:
        """``s3://bucket[/prefix][?endpoint_url=…&region=…]``; see ``rill_executor_s3._url``.

        Keyword ``options`` (e.g. ``transfer_config``) are passed to the constructor.
        """
        parsed = parse_url(url)
        settings: dict[str, Any] = {
            "endpoint_url": parsed.endpoint_url,
            "region_name": parsed.region_name,
            "profile_name": parsed.profile_name,
            "addressing_style": parsed.addressing_style,
        }
        for name in ("max_attempts", "connect_timeout", "read_timeout"):
            if (value := getattr(parsed, name)) is not None:
                settings[name] = value
        return cls(parsed.bucket, prefix=parsed.prefix, **settings | options)

    @property
    def client(self) -> S3Client:
        """The boto3 client (for extras such as presigned URLs)."""
        return self._client

    def __repr__(self) -> str:
        return f"S3OutputStore({self.uri('')!r})"

    # -- the port ---------------------------------------------------------------------------

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._root}{key}"

    def put(self, key: str, data: OutputData, *, if_none_match: bool = False) -> StoredObject:
        return self._put(key, data, "if_none_match" if if_none_match else None, None)

    def put_if_match(self, key: str, data: OutputData, *, etag: str) -> StoredObject:
        if not isinstance(etag, str) or not etag.strip('"'):
            raise UsageError(
                f"put_if_match needs the ETag the object must still have, not {etag!r}"
            )
        return self._put(key, data, "if_match", etag)

    def head(self, key: str) -> StoredObject | None:
        full = self._full(key)
        with wrap_errors(self.bucket, full, action="s3:GetObject"):
            answer = self._head(full)
        return None if answer is None else self._stored(key, answer)

    def read(self, key: str) -> ObjectStream:
        """The object's chunks; close the stream (or use it in ``with``) to stop early."""
        full = self._full(key)
        with wrap_errors(self.bucket, full, action="s3:GetObject"):
            answer = self._client.get_object(Bucket=self.bucket, Key=full, ChecksumMode="ENABLED")
        return ObjectStream(
            answer["Body"],
            bucket=self.bucket,
            key=full,
            size=answer["ContentLength"],
            sha256=_metadata_sha256(answer.get("Metadata", {})),
            chunk_size=self._chunk_size,
        )

    def list(self, prefix: str) -> Iterator[StoredObject]:
        if not isinstance(prefix, str):
            raise UsageError(f"list() takes a key prefix (str), not {type(prefix).__name__}")
        paginator = self._client.get_paginator("list_objects_v2")
        with wrap_errors(self.bucket, action="s3:ListBucket"):
            pages = iter(
                paginator.paginate(
                    Bucket=self.bucket,
                    Prefix=self._root + prefix,
                    PaginationConfig={"PageSize": self._page_size},
                )
            )
            first = next(pages, None)  # a missing bucket or a denial surfaces here, not later
        return self._listing(first, pages)

    def delete(self, key: str) -> bool:
        full = self._full(key)
        with wrap_errors(self.bucket, full, action="s3:GetObject"):
            existed = self._head(full) is not None
        if existed:
            with wrap_errors(self.bucket, full, action="s3:DeleteObject"):
                self._client.delete_object(Bucket=self.bucket, Key=full)
        return existed

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> S3OutputStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- writing ----------------------------------------------------------------------------

    def _put(
        self, key: str, data: OutputData, condition: Condition | None, etag: str | None
    ) -> StoredObject:
        full = self._full(key)
        threshold = self._transfer.multipart_threshold
        with (
            open_payload(data, threshold=threshold) as payload,
            wrap_errors(self.bucket, full, action="s3:PutObject", condition=condition),
        ):
            for attempt in range(_CONFLICT_ATTEMPTS):
                try:
                    if payload.body is not None:
                        return self._put_one(key, full, payload, condition, etag)
                    if condition is None:
                        return self._put_transfer(key, full, payload)
                    return self._put_conditional(key, full, payload, condition, etag)
                except bc.ClientError as exc:
                    retry = condition is not None and is_conditional_conflict(exc)
                    if not retry or attempt == _CONFLICT_ATTEMPTS - 1:
                        raise
                time.sleep(0.05 * 2**attempt)  # another conditional write is in flight
        raise AssertionError("unreachable")  # pragma: no cover

    def _put_one(
        self, key: str, full: str, payload: Payload, condition: Condition | None, etag: str | None
    ) -> StoredObject:
        assert payload.body is not None
        request: PutObjectRequestTypeDef = {
            "Bucket": self.bucket,
            "Key": full,
            "Body": payload.body,
            "ChecksumAlgorithm": "SHA256",
            "ChecksumSHA256": payload.sha256_b64,  # S3 rejects the write if the bytes differ
            "Metadata": {SHA256_METADATA: payload.sha256_hex},
        }
        if condition == "if_none_match":
            request["IfNoneMatch"] = "*"
        elif condition == "if_match" and etag is not None:
            request["IfMatch"] = etag
        answer = self._client.put_object(**request)
        return self._written(key, payload, answer)

    def _written(self, key: str, payload: Payload, answer: Any) -> StoredObject:
        """What a write stored: our own digest and size, S3's ETag, version and time."""
        return StoredObject(
            key=key,
            uri=self.uri(key),
            size=payload.size,
            sha256=payload.sha256_hex,
            etag=answer.get("ETag"),
            version_id=answer.get("VersionId"),
            last_modified=_response_time(answer),
        )

    def _put_transfer(self, key: str, full: str, payload: Payload) -> StoredObject:
        # boto3's transfer manager: parallel parts, each with a SHA-256 S3 verifies. It reads
        # the payload once, in order, through a reader that checks it against the first pass.
        self._client.upload_fileobj(
            cast(BinaryIO, payload.reader(self.uri(key))),
            self.bucket,
            full,
            ExtraArgs={
                "ChecksumAlgorithm": "SHA256",
                "Metadata": {SHA256_METADATA: payload.sha256_hex},
            },
            Config=self._transfer,
        )
        # The transfer manager returns nothing: the ETag and version come from a HEAD.
        answer = self._head(full)
        stored = None if answer is None else self._stored(key, answer)
        if stored is None or stored.sha256 != payload.sha256_hex or stored.size != payload.size:
            raise OutputPreconditionFailed(
                f"{self.uri(key)} was deleted or replaced by another writer right after this"
                " upload completed; read its current state"
            )
        return stored

    def _put_conditional(
        self, key: str, full: str, payload: Payload, condition: Condition, etag: str | None
    ) -> StoredObject:
        # Check first, so a large upload that cannot succeed is not sent at all; the
        # condition on CompleteMultipartUpload still decides, atomically, in S3.
        current = self._head(full)
        if condition == "if_none_match" and current is not None:
            raise OutputExists(f"{self.uri(key)} already exists; nothing was uploaded")
        if condition == "if_match" and (
            current is None or current.get("ETag", "").strip('"') != (etag or "").strip('"')
        ):
            raise OutputPreconditionFailed(
                f"{self.uri(key)} is {'gone' if current is None else 'another version'}, not"
                f" the one with ETag {etag}; nothing was uploaded"
            )
        answer = put_multipart(
            self._client,
            bucket=self.bucket,
            key=full,
            payload=payload,
            part_size=self._transfer.multipart_chunksize,
            metadata={SHA256_METADATA: payload.sha256_hex},
            if_none_match="*" if condition == "if_none_match" else None,
            if_match=etag if condition == "if_match" else None,
            where=self.uri(key),
        )
        return self._written(key, payload, answer)

    # -- reading ----------------------------------------------------------------------------

    def _full(self, key: str) -> str:
        if not isinstance(key, str) or not key:
            raise UsageError(f"an output key must be a non-empty str, not {key!r}")
        full = self._root + key
        try:
            length = len(full.encode("utf-8"))
        except UnicodeEncodeError:
            raise UsageError(f"output key {key!r} cannot be encoded as UTF-8") from None
        if length > MAX_KEY_BYTES:
            raise UsageError(
                f"the S3 key {full[:60]!r}… is {length} bytes in UTF-8; S3 allows"
                f" {MAX_KEY_BYTES}. Use a shorter prefix or output name"
            )
        return full

    def _head(self, full: str) -> HeadObjectOutputTypeDef | None:
        """HeadObject, or None if the key is absent (checking once that the bucket is not)."""
        try:
            return self._client.head_object(Bucket=self.bucket, Key=full, ChecksumMode="ENABLED")
        except bc.ClientError as exc:
            if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") != 404:
                raise
        self._check_bucket()
        return None

    def _check_bucket(self) -> None:
        # A HEAD answers a bare 404 for a missing key and a missing bucket alike; a listing
        # of at most one key says NoSuchBucket in its body (and needs s3:ListBucket, which
        # S3 requires anyway to answer 404 rather than 403 for an absent key).
        if not self._bucket_seen:
            self._client.list_objects_v2(Bucket=self.bucket, MaxKeys=1)
            self._bucket_seen = True

    def _stored(self, key: str, answer: HeadObjectOutputTypeDef) -> StoredObject:
        return StoredObject(
            key=key,
            uri=self.uri(key),
            size=answer["ContentLength"],
            sha256=_object_sha256(answer),
            etag=answer.get("ETag"),
            version_id=answer.get("VersionId"),
            last_modified=answer["LastModified"],
        )

    def _listing(self, first: Any, pages: Iterator[Any]) -> Iterator[StoredObject]:
        page = first
        while page is not None:
            for item in page.get("Contents", ()):
                yield StoredObject(
                    key=item["Key"][len(self._root) :],
                    uri=f"s3://{self.bucket}/{item['Key']}",
                    size=item["Size"],
                    sha256=None,
                    etag=item.get("ETag"),
                    version_id=None,
                    last_modified=item["LastModified"],
                )
            with wrap_errors(self.bucket, action="s3:ListBucket"):
                page = next(pages, None)


def _metadata_sha256(metadata: dict[str, str]) -> str | None:
    value = metadata.get(SHA256_METADATA, "").lower()
    return value if _HEX_SHA256.fullmatch(value) else None


def _object_sha256(answer: HeadObjectOutputTypeDef) -> str | None:
    """The object's full-content SHA-256 (hex), as S3 knows it or as the writer recorded it.

    S3's own ``ChecksumSHA256`` is the content's digest only for an object written in one
    request; for a multipart upload it is a checksum of the parts' checksums. So: S3's
    full-object value when there is one (S3 verified it against the bytes), else the
    ``x-amz-meta-sha256`` recorded at write time.
    """
    checksum = answer.get("ChecksumSHA256", "")
    single = (
        checksum
        and "-" not in checksum
        and answer.get("ChecksumType", "FULL_OBJECT") == "FULL_OBJECT"
        and "-" not in answer.get("ETag", "").strip('"')  # multipart ETags end in -<parts>
    )
    if single:
        try:
            digest = base64.b64decode(checksum, validate=True)
        except binascii.Error:
            digest = b""
        if len(digest) == 32:
            return digest.hex()
    return _metadata_sha256(answer.get("Metadata", {}))


def _response_time(answer: Any) -> datetime:
    """When S3 answered the write (writes return no Last-Modified; this is never earlier)."""
    date = answer.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if date:
        try:
            return email.utils.parsedate_to_datetime(date).astimezone(UTC)
        except (TypeError, ValueError):
            pass
    return datetime.now(UTC)


def open_s3_output_store(url: str) -> S3OutputStore:
    """The ``rill_executor.output_stores`` entry point for ``s3://`` URLs."""
    return S3OutputStore.from_url(url)
