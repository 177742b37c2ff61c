"""botocore errors mapped to rill-executor's, in one place.

    ClientError NoSuchBucket                        → OutputMissing (names the bucket)
    ClientError NoSuchKey / 404                     → OutputMissing (names the object),
                                                      OutputPreconditionFailed under If-Match
    ClientError AccessDenied / 403, bad credentials → OutputAccessDenied
    NoCredentialsError, PartialCredentialsError…    → OutputAccessDenied
    ClientError PreconditionFailed / 412            → OutputExists (If-None-Match)
                                                      OutputPreconditionFailed (If-Match)
    ClientError ConditionalRequestConflict / 409    → OutputPreconditionFailed (the store
                                                      retries it first: ``is_conditional_conflict``)
    ClientError BadDigest, FlexibleChecksumError    → ChecksumMismatch
    connection errors, timeouts, 5xx after retries  → StoreUnavailable
    ParamValidationError (refused before sending)   → ConfigError
    anything else from botocore                     → OutputStoreError

Every mapped error is raised ``from`` the botocore one, so the driver's detail stays on
``__cause__``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from botocore import exceptions as bc

from rill_executor import ConfigError
from rill_executor.outputs import (
    ChecksumMismatch,
    OutputAccessDenied,
    OutputExists,
    OutputMissing,
    OutputPreconditionFailed,
    OutputStoreError,
)
from rill_executor.store import StoreUnavailable

__all__ = ["Condition", "is_conditional_conflict", "wrap_errors"]

Condition = Literal["if_none_match", "if_match"]

_MISSING = {"NoSuchKey", "NotFound", "404"}
_DENIED = {
    "AccessDenied",
    "AllAccessDisabled",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "TokenRefreshRequired",
    "403",
}
_CHECKSUM = {"BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch"}
_UNAVAILABLE = {
    "InternalError",
    "ServiceUnavailable",
    "SlowDown",
    "RequestTimeout",
    "OperationAborted",
}
_CREDENTIALS = (
    bc.NoCredentialsError,
    bc.PartialCredentialsError,
    bc.CredentialRetrievalError,
)
_CONNECTION = (bc.ConnectionError, bc.HTTPClientError, bc.IncompleteReadError)


def _code(exc: bc.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: bc.ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def is_conditional_conflict(exc: BaseException) -> bool:
    """A 409 ConditionalRequestConflict: another conditional write to the key is in flight."""
    return isinstance(exc, bc.ClientError) and (
        _code(exc) == "ConditionalRequestConflict"
        or (_status(exc) == 409 and _code(exc) in ("", "409"))
    )


@contextmanager
def wrap_errors(
    bucket: str,
    key: str | None = None,
    *,
    action: str,
    condition: Condition | None = None,
) -> Iterator[None]:
    """Map botocore errors raised inside the block to rill-executor's.

    ``key`` is the object's full key in the bucket (None for bucket-wide calls such as a
    listing), ``action`` the S3 permission the call needs (for the access-denied message),
    and ``condition`` the conditional header the call carried, if any.
    """
    where = f"s3://{bucket}/{key}" if key is not None else f"s3://{bucket}"
    try:
        yield
    except bc.ClientError as exc:
        raise _client_error(exc, bucket, key, where, action, condition) from exc
    except bc.FlexibleChecksumError as exc:
        raise ChecksumMismatch(
            f"{where}: the bytes read do not match the checksum S3 stored for them ({exc});"
            " the object is corrupt or was replaced with a wrong checksum: do not use it"
        ) from exc
    except _CREDENTIALS as exc:
        raise OutputAccessDenied(
            f"no usable AWS credentials for {where} ({exc}); configure boto3's credential"
            " chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, an instance or"
            " task role) or pass a configured client"
        ) from exc
    except _CONNECTION as exc:
        raise StoreUnavailable(
            f"could not reach S3 for {where}: {exc}. The operation may or may not have been"
            " applied; retrying it later is safe"
        ) from exc
    except bc.ParamValidationError as exc:
        raise ConfigError(f"S3 refused the request for {where} before sending it: {exc}") from exc
    except bc.BotoCoreError as exc:
        raise OutputStoreError(f"S3 call for {where} failed: {exc}") from exc


def _client_error(
    exc: bc.ClientError,
    bucket: str,
    key: str | None,
    where: str,
    action: str,
    condition: Condition | None,
) -> Exception:
    code, status = _code(exc), _status(exc)
    message = str(exc.response.get("Error", {}).get("Message", "")) or code or str(status)
    if code == "NoSuchBucket":
        return OutputMissing(
            f"bucket {bucket!r} does not exist ({message}); create it, or fix the bucket"
            " name (and endpoint/region) in the output store's configuration"
        )
    if code == "NoSuchUpload":
        return OutputStoreError(
            f"{where}: the multipart upload was aborted while it ran (a lifecycle rule or"
            f" another process; {message}); write the object again"
        )
    if code in _MISSING or status == 404:
        if condition == "if_match":
            return OutputPreconditionFailed(
                f"{where} no longer exists, so its ETag is not the expected one; read the"
                " current state before replacing it"
            )
        return OutputMissing(
            f"no object {where} ({message}); check the key, or whether it was deleted"
            " (GC, a lifecycle rule) or never written"
        )
    if code in _DENIED or status == 403:
        return OutputAccessDenied(
            f"access denied: {action} on {where} ({code}: {message}); grant the credentials"
            f" {action} on arn:aws:s3:::{bucket}{'/*' if key is not None else ''} (see the"
            " IAM section of docs/s3.md) or use other credentials"
        )
    if code == "PreconditionFailed" or status == 412:
        if condition == "if_none_match":
            return OutputExists(
                f"{where} already exists; a write that must not replace an object found the"
                " key taken"
            )
        return OutputPreconditionFailed(
            f"{where} has changed (its ETag is no longer the expected one); read the current"
            " state before replacing it"
        )
    if is_conditional_conflict(exc):
        return OutputPreconditionFailed(
            f"{where}: another conditional write to the same key kept conflicting"
            f" ({message}); read the current state and try again"
        )
    if code in _CHECKSUM:
        return ChecksumMismatch(
            f"S3 rejected the bytes for {where}: they do not match the SHA-256 computed"
            f" while reading them ({message}); the data changed or was corrupted on the way;"
            " nothing was written"
        )
    if code in _UNAVAILABLE or status >= 500:
        return StoreUnavailable(
            f"S3 is unavailable for {where} ({code or status}: {message}) after boto3's"
            " retries; the operation may or may not have been applied; retrying later is safe"
        )
    return OutputStoreError(f"S3 refused {action} on {where} ({code or status}: {message})")
