"""S3OutputStore against moto's server over HTTP: writes, reads, listings, deletes, conditions."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import pytest

from rill_executor import UsageError
from rill_executor.outputs import (
    OutputExists,
    OutputMissing,
    OutputPreconditionFailed,
    OutputStore,
    StoredObject,
)
from rill_executor_s3 import S3OutputStore

from .conftest import PREFIX, MiB, MotoServer

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content(store: S3OutputStore, key: str) -> bytes:
    return b"".join(store.read(key))


class Unseekable(io.RawIOBase):
    """A stream that can only be read in order, like a pipe or a socket."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        chunk = self._data.read(min(len(buffer), 64 * 1024))  # short reads, as pipes do
        buffer[: len(chunk)] = chunk
        return len(chunk)


def test_the_store_is_an_output_store(store: S3OutputStore) -> None:
    assert isinstance(store, OutputStore)


def test_bytes_round_trip(store: S3OutputStore, bucket: str, admin: S3Client) -> None:
    data = b"segment-1 h264\n" * 1000
    put = store.put("ns/digest/a1/seg.ts", data)

    assert put.key == "ns/digest/a1/seg.ts"
    assert put.uri == f"s3://{bucket}/{PREFIX}/ns/digest/a1/seg.ts"
    assert (put.size, put.sha256) == (len(data), sha256(data))
    assert put.etag and put.last_modified.tzinfo is not None
    head = store.head("ns/digest/a1/seg.ts")
    assert head is not None
    assert (head.key, head.uri, head.size, head.sha256, head.etag) == (
        put.key,
        put.uri,
        put.size,
        put.sha256,
        put.etag,
    )
    assert content(store, "ns/digest/a1/seg.ts") == data
    raw = admin.head_object(Bucket=bucket, Key=f"{PREFIX}/ns/digest/a1/seg.ts")
    assert raw["Metadata"] == {"sha256": sha256(data)}


def test_empty_object(store: S3OutputStore) -> None:
    put = store.put("empty", b"")
    assert (put.size, put.sha256) == (0, sha256(b""))
    assert content(store, "empty") == b""


def test_small_file_object_and_path(store: S3OutputStore, tmp_path: Path) -> None:
    data = os.urandom(300 * 1024)
    path = tmp_path / "small.bin"
    path.write_bytes(data)

    from_path = store.put("from-path", path)
    with path.open("rb") as file:
        from_file = store.put("from-file", file)
    from_stream = store.put("from-stream", cast(BinaryIO, Unseekable(data)))

    for stored, key in (
        (from_path, "from-path"),
        (from_file, "from-file"),
        (from_stream, "from-stream"),
    ):
        assert (stored.key, stored.size, stored.sha256) == (key, len(data), sha256(data))
        assert content(store, key) == data


def test_large_path_goes_multipart_with_the_full_sha256(
    store: S3OutputStore, bucket: str, admin: S3Client, random_file: Path
) -> None:
    data = random_file.read_bytes()
    put = store.put("big/video.mp4", random_file)

    assert (put.size, put.sha256) == (20 * MiB, sha256(data))
    assert put.etag is not None and put.etag.strip('"').endswith("-4")  # four 5 MiB parts
    raw = admin.head_object(Bucket=bucket, Key=f"{PREFIX}/big/video.mp4", ChecksumMode="ENABLED")
    assert raw["Metadata"]["sha256"] == sha256(data)
    # S3's own SHA-256 of a multipart object is a checksum of the parts' checksums:
    assert raw.get("ChecksumSHA256") != put.sha256
    head = store.head("big/video.mp4")
    assert head is not None and head.sha256 == sha256(data) and head.size == 20 * MiB
    assert hashlib.sha256(content(store, "big/video.mp4")).hexdigest() == sha256(data)


def test_large_file_object_and_stream(store: S3OutputStore, random_file: Path) -> None:
    data = random_file.read_bytes()[: 12 * MiB + 7]
    with io.BytesIO(b"header" + data) as file:
        file.seek(len(b"header"))  # a file object is read from where it stands
        from_file = store.put("big-file", file)
    from_stream = store.put("big-stream", cast(BinaryIO, Unseekable(data)))

    for stored in (from_file, from_stream):
        assert (stored.size, stored.sha256) == (len(data), sha256(data))
        assert stored.etag is not None and stored.etag.strip('"').endswith("-3")
        assert content(store, stored.key) == data


def test_read_streams_in_chunks(moto: MotoServer, bucket: str) -> None:
    data = os.urandom(100_000)
    with S3OutputStore(
        bucket, endpoint_url=moto.endpoint, region_name="us-east-1", read_chunk_size=16_384
    ) as store:
        store.put("k", data)
        chunks = list(store.read("k"))
    assert [len(chunk) for chunk in chunks] == [16_384] * 6 + [100_000 - 6 * 16_384]
    assert b"".join(chunks) == data


def test_a_read_dropped_early_releases_its_connection(store: S3OutputStore) -> None:
    store.put("k", os.urandom(3 * MiB))
    stream = store.read("k")
    assert len(next(stream)) == MiB
    stream.close()
    with store.read("k") as again:
        assert len(next(again)) == MiB
    assert content(store, "k")  # the pool still works


def test_head_of_an_absent_key_is_none(store: S3OutputStore) -> None:
    assert store.head("nothing/here") is None


def test_read_of_an_absent_key_names_it(store: S3OutputStore, bucket: str) -> None:
    with pytest.raises(OutputMissing, match=f"s3://{bucket}/{PREFIX}/nothing/here"):
        store.read("nothing/here")


def test_list_paginates_and_returns_caller_keys(
    store: S3OutputStore, bucket: str, admin: S3Client, moto: MotoServer
) -> None:
    def write(i: int) -> None:
        admin.put_object(Bucket=bucket, Key=f"{PREFIX}/ns/k/{i:04d}", Body=b"x" * (i % 7))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(1100)))
    admin.put_object(Bucket=bucket, Key=f"{PREFIX}/other/x", Body=b"")
    admin.put_object(Bucket=bucket, Key="outside-the-prefix", Body=b"")

    calls: list[str] = []
    store.client.meta.events.register(
        "after-call.s3.ListObjectsV2", lambda **_: calls.append("page")
    )
    listed = list(store.list("ns/"))

    assert [o.key for o in listed] == [f"ns/k/{i:04d}" for i in range(1100)]
    assert len(calls) == 2  # 1000 + 100: the continuation token was followed
    first = listed[3]
    assert first.uri == f"s3://{bucket}/{PREFIX}/ns/k/0003"
    assert (first.size, first.sha256, first.version_id) == (3, None, None)
    assert first.etag and isinstance(first.last_modified, datetime)
    assert {o.key for o in store.list("")} == {o.key for o in listed} | {"other/x"}
    assert list(store.list("ns/k/2")) == []


def test_list_with_a_small_page_size(moto: MotoServer, bucket: str) -> None:
    with S3OutputStore(
        bucket, prefix="p", endpoint_url=moto.endpoint, region_name="us-east-1", page_size=7
    ) as store:
        for i in range(30):
            store.put(f"a/{i:02d}", b"%d" % i)
        calls: list[str] = []
        store.client.meta.events.register(
            "after-call.s3.ListObjectsV2", lambda **_: calls.append("page")
        )
        keys = [o.key for o in store.list("a/")]
    assert keys == [f"a/{i:02d}" for i in range(30)]
    assert len(calls) == 5


def test_delete_twice(store: S3OutputStore) -> None:
    store.put("gone", b"x")
    assert store.delete("gone") is True
    assert store.head("gone") is None
    assert store.delete("gone") is False


def test_put_if_none_match_refuses_a_taken_key(store: S3OutputStore) -> None:
    first = store.put("canonical/seg.ts", b"first", if_none_match=True)
    with pytest.raises(OutputExists, match=r"canonical/seg\.ts"):
        store.put("canonical/seg.ts", b"second", if_none_match=True)
    head = store.head("canonical/seg.ts")
    assert head is not None and head.etag == first.etag
    assert content(store, "canonical/seg.ts") == b"first"


def test_put_if_match_replaces_only_the_expected_version(store: S3OutputStore) -> None:
    first = store.put("canonical/seg.ts", b"first")
    assert first.etag is not None
    second = store.put_if_match("canonical/seg.ts", b"second", etag=first.etag)
    assert content(store, "canonical/seg.ts") == b"second"

    with pytest.raises(OutputPreconditionFailed, match=r"canonical/seg\.ts"):
        store.put_if_match("canonical/seg.ts", b"third", etag=first.etag)  # stale
    head = store.head("canonical/seg.ts")
    assert head is not None and head.etag == second.etag
    with pytest.raises(OutputPreconditionFailed):
        store.put_if_match("never/written", b"x", etag=first.etag)
    assert store.head("never/written") is None


def test_large_conditional_writes(store: S3OutputStore, random_file: Path) -> None:
    data = random_file.read_bytes()
    first = store.put("canonical/big", random_file, if_none_match=True)
    assert first.sha256 == sha256(data)
    assert first.etag is not None and first.etag.strip('"').endswith("-4")
    with pytest.raises(OutputExists):
        store.put("canonical/big", random_file, if_none_match=True)

    replaced = store.put_if_match("canonical/big", random_file, etag=first.etag)
    assert replaced.sha256 == sha256(data)
    with pytest.raises(OutputPreconditionFailed):
        store.put_if_match("canonical/big", random_file, etag='"0123-4"')
    head = store.head("canonical/big")
    assert head is not None and head.sha256 == sha256(data) and head.etag == replaced.etag


class Interfering(io.BytesIO):
    """A file that runs ``interfere`` once, when its upload pass starts reading."""

    def __init__(self, data: bytes, interfere: Any) -> None:
        super().__init__(data)
        self._interfere = interfere
        self._rewound = False

    def seek(self, offset: int, whence: int = 0, /) -> int:
        self._rewound = True
        return super().seek(offset, whence)

    def read(self, size: int | None = -1, /) -> bytes:
        if self._rewound and self._interfere is not None:
            interfere, self._interfere = self._interfere, None
            interfere()
        return super().read(size)


def test_a_key_taken_during_a_large_if_none_match_upload(
    store: S3OutputStore, bucket: str, admin: S3Client
) -> None:
    """The check before uploading passes; S3's condition on completion still refuses."""
    data = os.urandom(11 * MiB)
    full_key = f"{PREFIX}/canonical/raced"

    def other_writer() -> None:
        admin.put_object(Bucket=bucket, Key=full_key, Body=b"the other attempt")

    with pytest.raises(OutputExists):
        store.put("canonical/raced", Interfering(data, other_writer), if_none_match=True)
    assert content(store, "canonical/raced") == b"the other attempt"
    assert admin.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="moto 5.2 ignores If-Match on CompleteMultipartUpload: only If-None-Match is"
    " checked there (moto/s3/responses.py, the uploadId branch of the POST handler)",
)
def test_a_key_replaced_during_a_large_if_match_upload(
    store: S3OutputStore, bucket: str, admin: S3Client
) -> None:
    first = store.put("canonical/raced", b"v1")
    assert first.etag is not None
    full_key = f"{PREFIX}/canonical/raced"

    def other_writer() -> None:
        admin.put_object(Bucket=bucket, Key=full_key, Body=b"the other attempt")

    try:
        store.put_if_match(
            "canonical/raced", Interfering(os.urandom(11 * MiB), other_writer), etag=first.etag
        )
    except OutputPreconditionFailed:
        return  # what S3 does
    raise AssertionError("the If-Match condition on CompleteMultipartUpload was not enforced")


def test_keys_are_not_validated_beyond_s3(store: S3OutputStore) -> None:
    for key in ("a b/ü/#?&=", "dots..", "trailing/"):
        stored = store.put(key, b"x")
        assert stored.key == key
        assert content(store, key) == b"x"
    with pytest.raises(UsageError, match="1024"):
        store.put("k" * 1100, b"x")
    with pytest.raises(UsageError):
        store.put("", b"x")
    with pytest.raises(UsageError, match="not a str"):
        store.put("k", "text")  # type: ignore[arg-type]
    assert [o.key for o in store.list("k")] == []


def test_without_a_prefix(moto: MotoServer, bucket: str) -> None:
    with S3OutputStore(bucket, endpoint_url=moto.endpoint, region_name="us-east-1") as store:
        stored = store.put("ns/x", b"1")
        assert stored.uri == f"s3://{bucket}/ns/x" == store.uri("ns/x")
        assert [o.key for o in store.list("ns/")] == ["ns/x"]


def test_stored_objects_are_plain_values(store: S3OutputStore) -> None:
    stored = store.put("v", b"1")
    assert isinstance(stored, StoredObject)
    assert stored == dataclasses.replace(stored)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stored.size = 2  # type: ignore[misc]


def test_data_that_is_not_bytes_is_refused_before_any_request(
    store: S3OutputStore, tmp_path: Path
) -> None:
    text = tmp_path / "t.txt"
    text.write_text("hello")
    with text.open("r") as file, pytest.raises(UsageError, match="mode 'rb'"):
        store.put("k", file)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="not int"):
        store.put("k", 123)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="ETag"):
        store.put_if_match("k", b"x", etag="")
    assert store.head("k") is None
