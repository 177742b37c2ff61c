"""A sequential multipart upload whose completion carries a condition (If-None-Match / If-Match).

boto3's transfer manager (s3transfer) accepts no conditional headers, so conditional writes
larger than the multipart threshold go through this loop instead: CreateMultipartUpload,
UploadPart with each part's SHA-256 for S3 to verify, then CompleteMultipartUpload with the
condition, which S3 checks atomically when it makes the object visible. Any failure aborts
the upload, so nothing is left behind but what S3 keeps of an abort.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
from typing import TYPE_CHECKING

from botocore import exceptions as bc

from ._payload import Payload

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import (
        CompletedPartTypeDef,
        CompleteMultipartUploadOutputTypeDef,
        CompleteMultipartUploadRequestTypeDef,
    )

__all__ = ["MAX_PARTS", "MIN_PART_SIZE", "part_size_for", "put_multipart"]

MIN_PART_SIZE = 5 * 1024 * 1024  # S3's floor for every part but the last
MAX_PART_SIZE = 5 * 1024 * 1024 * 1024
MAX_PARTS = 10_000


def part_size_for(size: int, preferred: int) -> int:
    """``preferred``, raised as needed to stay within S3's part-size and part-count limits."""
    needed = -(-size // MAX_PARTS)
    return min(max(preferred, needed, MIN_PART_SIZE), MAX_PART_SIZE)


def put_multipart(
    client: S3Client,
    *,
    bucket: str,
    key: str,
    payload: Payload,
    part_size: int,
    metadata: dict[str, str],
    if_none_match: str | None = None,
    if_match: str | None = None,
    where: str,
) -> CompleteMultipartUploadOutputTypeDef:
    upload_id = client.create_multipart_upload(
        Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256", Metadata=metadata
    )["UploadId"]
    try:
        reader = payload.reader(where)
        chunk_size = part_size_for(payload.size, part_size)
        parts: list[CompletedPartTypeDef] = []
        while chunk := reader.read(chunk_size):
            checksum = base64.b64encode(hashlib.sha256(chunk).digest()).decode("ascii")
            answer = client.upload_part(
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
                PartNumber=len(parts) + 1,
                Body=chunk,
                ChecksumSHA256=checksum,
            )
            parts.append(
                {"PartNumber": len(parts) + 1, "ETag": answer["ETag"], "ChecksumSHA256": checksum}
            )
        reader.verify()
        request: CompleteMultipartUploadRequestTypeDef = {
            "Bucket": bucket,
            "Key": key,
            "UploadId": upload_id,
            "MultipartUpload": {"Parts": parts},
        }
        if if_none_match is not None:
            request["IfNoneMatch"] = if_none_match
        if if_match is not None:
            request["IfMatch"] = if_match
        return client.complete_multipart_upload(**request)
    except BaseException:
        with contextlib.suppress(bc.BotoCoreError, bc.ClientError):
            client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        raise
