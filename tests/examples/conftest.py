"""The examples' tests: moto's standalone S3 server for the package, with fake credentials,
and a new bucket for each test (``outputs``, an output store URL)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from ..adapters.s3.conftest import MotoServer, fake_aws_env


@pytest.fixture(scope="package")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    with fake_aws_env(tmp_path_factory):
        server = MotoServer(Path(tmp_path_factory.mktemp("moto")) / "moto.log")
        yield server
        server.stop()


@pytest.fixture
def outputs(moto: MotoServer) -> str:
    bucket = f"outputs-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto.endpoint).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/outputs?endpoint_url={moto.endpoint}"
