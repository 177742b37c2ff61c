"""The examples' tests: moto's standalone S3 server for the package, with fake credentials,
and a new bucket for each test (``outputs``, an output store URL)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from ..adapters.s3.conftest import REGION, MotoServer


@pytest.fixture(scope="package")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    nowhere = tmp_path_factory.mktemp("aws") / "absent"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ACCESS_KEY_ID", "testing")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        patch.setenv("AWS_DEFAULT_REGION", REGION)
        patch.setenv("AWS_CONFIG_FILE", str(nowhere))
        patch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(nowhere))
        patch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
            patch.delenv(name, raising=False)
        server = MotoServer(Path(tmp_path_factory.mktemp("moto")) / "moto.log")
        yield server
        server.stop()


@pytest.fixture
def outputs(moto: MotoServer) -> str:
    bucket = f"outputs-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto.endpoint).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/outputs?endpoint_url={moto.endpoint}"
