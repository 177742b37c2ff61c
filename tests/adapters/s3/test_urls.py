"""Opening the store: URLs, the entry point, constructor options, the public names."""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any, cast
from urllib.parse import quote

import boto3
import pytest

import rill_executor_s3
from rill_executor import ConfigError
from rill_executor.outputs import open_output_store
from rill_executor_s3 import S3OutputStore, open_s3_output_store
from rill_executor_s3._url import parse_url

from ..url_options import assert_refusal
from .conftest import MotoServer


def test_public_names_are_pinned() -> None:
    assert sorted(rill_executor_s3.__all__) == [
        "ObjectStream",
        "S3OutputStore",
        "SHA256_METADATA",
        "open_s3_output_store",
    ]


def test_parse_url() -> None:
    parsed = parse_url(
        "s3://media/transcode/v1/?endpoint_url=http://127.0.0.1:9000&region=eu-west-1"
        "&addressing_style=path&max_attempts=7&connect_timeout=2.5&read_timeout=30&profile=p"
    )
    assert parsed.bucket == "media"
    assert parsed.prefix == "transcode/v1"
    assert parsed.endpoint_url == "http://127.0.0.1:9000"
    assert parsed.region_name == "eu-west-1"
    assert parsed.addressing_style == "path"
    assert (parsed.max_attempts, parsed.connect_timeout, parsed.read_timeout) == (7, 2.5, 30.0)
    assert parsed.profile_name == "p"
    assert parse_url("s3://media").prefix == ""


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://media/x", "not an s3:// URL"),
        ("s3:///prefix", "names no bucket"),
        ("s3://key:secret@media", "no credentials or port"),
        (
            "s3://media?endpoint=http://x",
            r"unknown option 'endpoint' .*did you mean 'endpoint_url'",
        ),
        ("s3://media?region=a&region=b", "appears twice"),
        ("s3://media?max_attempts=lots", "not a int"),
        ("s3://media?max_attempts=0", "must be positive"),
        ("s3://media?addressing_style=dns", "addressing_style"),
    ],
)
def test_bad_urls_are_config_errors(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_url(url)


def test_from_url_against_the_server(moto: MotoServer, bucket: str) -> None:
    url = f"s3://{bucket}/a/b?endpoint_url={moto.endpoint}&region=us-east-1&max_attempts=2"
    with S3OutputStore.from_url(url) as store:
        stored = store.put("k", b"x")
        assert stored.uri == f"s3://{bucket}/a/b/k"
        assert store.prefix == "a/b"
        assert cast(Any, store.client.meta.config).retries == {
            "mode": "standard",
            "total_max_attempts": 2,
        }  # tries in all


def test_the_entry_point_opens_the_store(moto: MotoServer, bucket: str) -> None:
    (found,) = [ep for ep in entry_points(group="rill_executor.output_stores") if ep.name == "s3"]
    factory = found.load()
    assert factory is open_s3_output_store
    store = factory(f"s3://{bucket}?endpoint_url={moto.endpoint}&region=us-east-1")
    try:
        assert isinstance(store, S3OutputStore)
        assert store.put("k", b"x").size == 1
    finally:
        store.close()


def test_a_given_client_is_used_and_left_open(moto: MotoServer, bucket: str) -> None:
    client = boto3.session.Session().client(
        "s3", endpoint_url=moto.endpoint, region_name="us-east-1"
    )
    with S3OutputStore(bucket, client=client) as store:
        assert store.client is client
        store.put("k", b"x")
    assert client.head_object(Bucket=bucket, Key="k")["ContentLength"] == 1  # still usable
    client.close()
    with pytest.raises(ConfigError, match="either a configured client"):
        S3OutputStore(bucket, client=client, endpoint_url=moto.endpoint)


@pytest.mark.parametrize("bucket_name", ["", "a/b"])
def test_bad_bucket_names(bucket_name: str) -> None:
    with pytest.raises(ConfigError):
        S3OutputStore(bucket_name)


def test_repr_names_the_location() -> None:
    with S3OutputStore("media", prefix="/x/y/", region_name="us-east-1") as store:
        assert repr(store) == "S3OutputStore('s3://media/x/y/')"
        assert store.uri("ns/k") == "s3://media/x/y/ns/k"


def test_an_unknown_profile_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="'no-such-profile'"):
        S3OutputStore.from_url("s3://media?profile=no-such-profile")


@pytest.mark.parametrize("name", ["bogus", "endpoint", "\x00\x1b[31mred", "\u202eevil", "é" * 200])
def test_an_unknown_option_is_refused_with_every_stores_message(name: str) -> None:
    url = f"s3://media?{quote(name)}=1&endpoint_url=http://127.0.0.1:9&region=us-east-1"
    for opener in (S3OutputStore.from_url, open_output_store):
        with pytest.raises(ConfigError) as err:
            opener(url)  # before any client is built
        assert_refusal(
            str(err.value),
            name,
            "the S3 output-store URL",
            lists=("endpoint_url", "(rill-executor-s3)"),
            docs="docs/s3.md",
        )
