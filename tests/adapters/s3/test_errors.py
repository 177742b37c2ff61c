"""Failures as the callers see them: typed, naming the bucket or object, saying what to do."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
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
from rill_executor_s3 import S3OutputStore
from rill_executor_s3._errors import Condition, is_conditional_conflict, wrap_errors

from .conftest import PREFIX, Credentials, MotoServer, free_port


@pytest.fixture
def missing_bucket_store(moto: MotoServer) -> Iterator[S3OutputStore]:
    with S3OutputStore(
        "no-such-bucket-here", prefix=PREFIX, endpoint_url=moto.endpoint, region_name="us-east-1"
    ) as store:
        yield store


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.put("k", b"x"),
        lambda s: s.put("k", b"x", if_none_match=True),
        lambda s: s.put_if_match("k", b"x", etag='"e"'),
        lambda s: s.head("k"),
        lambda s: s.read("k"),
        lambda s: s.list(""),
        lambda s: s.delete("k"),
    ],
    ids=["put", "put-if-none-match", "put-if-match", "head", "read", "list", "delete"],
)
def test_a_missing_bucket_is_named(missing_bucket_store: S3OutputStore, call: Any) -> None:
    with pytest.raises(OutputMissing, match="bucket 'no-such-bucket-here' does not exist"):
        call(missing_bucket_store)


def test_access_denied_is_typed(moto: MotoServer, bucket: str, read_only_user: Credentials) -> None:
    import boto3

    client = boto3.session.Session(
        aws_access_key_id=read_only_user.access_key_id,
        aws_secret_access_key=read_only_user.secret_access_key,
    ).client("s3", endpoint_url=moto.endpoint, region_name="us-east-1")
    with S3OutputStore(bucket, prefix=PREFIX, client=client) as store:
        with pytest.raises(OutputAccessDenied, match=r"s3:PutObject on s3://.*/outputs/k") as put:
            store.put("k", b"x")
        assert isinstance(put.value.__cause__, bc.ClientError)
        assert put.value.__cause__.response["Error"]["Code"] == "AccessDenied"
        assert store.head("k") is None  # reading is allowed
        assert list(store.list("")) == []
    client.close()


def test_unknown_credentials_are_denied(moto: MotoServer, bucket: str, read_only_user: Any) -> None:
    import boto3

    client = boto3.session.Session(
        aws_access_key_id="AKIANOTAREALKEY00000", aws_secret_access_key="nope"
    ).client("s3", endpoint_url=moto.endpoint, region_name="us-east-1")
    with (
        S3OutputStore(bucket, client=client) as store,
        pytest.raises(OutputAccessDenied, match="InvalidAccessKeyId"),
    ):
        store.put("k", b"x")
    client.close()


def test_a_closed_port_is_store_unavailable() -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    with (
        S3OutputStore(
            "bucket", endpoint_url=endpoint, region_name="us-east-1", max_attempts=2
        ) as store,
        pytest.raises(StoreUnavailable, match="could not reach S3") as caught,
    ):
        store.put("k", b"x")
    assert isinstance(caught.value.__cause__, bc.EndpointConnectionError)
    assert not isinstance(caught.value, OutputStoreError)


def test_retries_are_boto3s_standard_mode(store: S3OutputStore) -> None:
    retries = cast(Any, store.client.meta.config).retries  # not in botocore-stubs
    assert retries is not None and retries["mode"] == "standard"


def client_error(code: str, status: int, operation: str = "PutObject") -> bc.ClientError:
    """The error botocore raises for such an answer (the parts wrap_errors reads)."""
    response: Any = {
        "Error": {"Code": code, "Message": f"{code} happened"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return bc.ClientError(response, operation)


def mapped(exc: BaseException, condition: Condition | None = None) -> BaseException:
    with (
        pytest.raises(Exception) as caught,
        wrap_errors("bkt", "p/k", action="s3:PutObject", condition=condition),
    ):
        raise exc
    assert caught.value.__cause__ is exc
    return caught.value


@pytest.mark.parametrize(
    ("code", "status", "condition", "expected"),
    [
        ("NoSuchBucket", 404, None, OutputMissing),
        ("NoSuchKey", 404, None, OutputMissing),
        ("404", 404, None, OutputMissing),
        ("NoSuchKey", 404, "if_match", OutputPreconditionFailed),
        ("AccessDenied", 403, None, OutputAccessDenied),
        ("403", 403, None, OutputAccessDenied),
        ("InvalidAccessKeyId", 403, None, OutputAccessDenied),
        ("PreconditionFailed", 412, "if_none_match", OutputExists),
        ("PreconditionFailed", 412, "if_match", OutputPreconditionFailed),
        ("ConditionalRequestConflict", 409, "if_none_match", OutputPreconditionFailed),
        ("BadDigest", 400, None, ChecksumMismatch),
        ("SlowDown", 503, None, StoreUnavailable),
        ("InternalError", 500, None, StoreUnavailable),
        ("InvalidStorageClass", 400, None, OutputStoreError),
    ],
)
def test_client_errors_map(
    code: str, status: int, condition: Condition | None, expected: type[Exception]
) -> None:
    error = mapped(client_error(code, status), condition)
    assert type(error) is expected
    assert "'bkt'" in str(error) if code == "NoSuchBucket" else "s3://bkt/p/k" in str(error)


def test_messages_say_what_to_do() -> None:
    assert "create it" in str(mapped(client_error("NoSuchBucket", 404)))
    denied = str(mapped(client_error("AccessDenied", 403)))
    assert "s3:PutObject" in denied and "arn:aws:s3:::bkt/*" in denied
    assert "already exists" in str(mapped(client_error("PreconditionFailed", 412), "if_none_match"))


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (bc.EndpointConnectionError(endpoint_url="http://x"), StoreUnavailable),
        (bc.ConnectTimeoutError(endpoint_url="http://x"), StoreUnavailable),
        (bc.ReadTimeoutError(endpoint_url="http://x"), StoreUnavailable),
        (bc.ConnectionClosedError(endpoint_url="http://x"), StoreUnavailable),
        (bc.NoCredentialsError(), OutputAccessDenied),
        (bc.FlexibleChecksumError(error_msg="bad"), ChecksumMismatch),
        (bc.ParamValidationError(report="bad"), ConfigError),
        (bc.WaiterError(name="w", reason="r", last_response={}), OutputStoreError),
    ],
)
def test_botocore_errors_map(exc: BaseException, expected: type[Exception]) -> None:
    assert type(mapped(exc)) is expected


def test_a_conditional_conflict_is_recognised() -> None:
    assert is_conditional_conflict(client_error("ConditionalRequestConflict", 409))
    assert not is_conditional_conflict(client_error("PreconditionFailed", 412))
    assert not is_conditional_conflict(ValueError())


def test_other_exceptions_pass_through() -> None:
    with pytest.raises(KeyError), wrap_errors("bkt", action="s3:ListBucket"):
        raise KeyError("ours")
