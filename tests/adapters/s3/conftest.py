"""An S3 endpoint for the adapter's tests: moto's standalone server, over real HTTP.

- ``moto``: ``python -m moto.server`` on a free 127.0.0.1 port, started once for this
  package's tests and terminated at the end. ``moto.enforce_auth(n)`` makes it check IAM
  after ``n`` more requests (its ``/moto-api/reset-auth``); ``moto.relax_auth()`` undoes it.
- ``admin``: a plain boto3 client on it, for the tests' own setup and inspection.
- ``bucket``: a fresh bucket per test, emptied and removed afterwards.
- ``store``: an ``S3OutputStore`` on that bucket under the prefix ``outputs``, with a
  ``TransferConfig`` small enough (5 MiB parts) that a 20 MiB file really goes multipart.

Credentials: boto3's chain reads fake ones from the environment (set here for the package);
the AWS config files of the machine are hidden from it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest
from boto3.s3.transfer import TransferConfig

from rill_executor_s3 import S3OutputStore

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef

MiB = 1024 * 1024
REGION = "us-east-1"
PREFIX = "outputs"
SMALL_PARTS = TransferConfig(
    multipart_threshold=5 * MiB,
    multipart_chunksize=5 * MiB,
    max_concurrency=4,
    preferred_transfer_client="classic",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class MotoServer:
    """One ``python -m moto.server`` process this test package owns."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = log
        with log.open("ab") as out:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"moto server exited with {self.process.returncode}:\n"
                    + self.log.read_text(errors="replace")[-2000:]
                )
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"moto server on {self.endpoint} did not answer within 30 s")

    def _reset_auth(self, count: str) -> None:
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth",
            data=count.encode(),
            method="POST",
            headers={"Content-Type": "text/plain"},  # a form type would hide the body
        )
        with urllib.request.urlopen(request, timeout=5) as answer:
            assert answer.status == 200, answer.read()

    def enforce_auth(self, after: int) -> None:
        """Check credentials and IAM policies on every request after the next ``after``."""
        self._reset_auth(str(after))

    def relax_auth(self) -> None:
        self._reset_auth("inf")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def fake_aws_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fake credentials and no AWS configuration of the machine's: boto3 finds nothing else."""
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
        yield


@pytest.fixture(scope="package", autouse=True)
def aws_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with fake_aws_env(tmp_path_factory):
        yield


@pytest.fixture(scope="package")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto.log")
    yield server
    server.stop()


@pytest.fixture(scope="package")
def admin(moto: MotoServer, aws_env: None) -> Iterator[S3Client]:
    client = boto3.session.Session().client("s3", endpoint_url=moto.endpoint, region_name=REGION)
    yield client
    client.close()


def _empty_and_remove(client: S3Client, name: str) -> None:
    for upload in client.list_multipart_uploads(Bucket=name).get("Uploads", []):
        client.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
        keys: list[ObjectIdentifierTypeDef] = [
            {"Key": item["Key"]} for item in page.get("Contents", [])
        ]
        if keys:
            client.delete_objects(Bucket=name, Delete={"Objects": keys, "Quiet": True})
    client.delete_bucket(Bucket=name)


@pytest.fixture
def bucket(admin: S3Client) -> Iterator[str]:
    name = f"rill-test-{uuid.uuid4().hex[:16]}"
    admin.create_bucket(Bucket=name)
    yield name
    _empty_and_remove(admin, name)


@pytest.fixture
def store(moto: MotoServer, bucket: str) -> Iterator[S3OutputStore]:
    with S3OutputStore(
        bucket,
        prefix=PREFIX,
        endpoint_url=moto.endpoint,
        region_name=REGION,
        transfer_config=SMALL_PARTS,
    ) as opened:
        yield opened


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str


@pytest.fixture
def read_only_user(moto: MotoServer, bucket: str) -> Iterator[Credentials]:
    """An IAM user allowed s3:GetObject and s3:ListBucket on ``bucket`` only, auth enforced."""
    iam = boto3.session.Session().client("iam", endpoint_url=moto.endpoint, region_name=REGION)
    try:
        moto.enforce_auth(after=3)  # the three IAM calls below are the last unchecked ones
        iam.create_user(UserName=f"reader-{bucket}")
        key = iam.create_access_key(UserName=f"reader-{bucket}")["AccessKey"]
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": ["s3:GetObject", "s3:ListBucket"],
                    "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
                }
            ],
        }
        iam.put_user_policy(
            UserName=f"reader-{bucket}", PolicyName="read", PolicyDocument=json.dumps(policy)
        )
        yield Credentials(key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        moto.relax_auth()
        iam.close()


@pytest.fixture
def random_file(tmp_path: Path) -> Path:
    """20 MiB of random bytes: above the 5 MiB threshold, four parts of 5 MiB."""
    path = tmp_path / "big.bin"
    path.write_bytes(os.urandom(20 * MiB))
    return path
