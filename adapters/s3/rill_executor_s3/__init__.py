"""rill-executor-s3: the S3 output store (boto3).

Open it by URL (``S3OutputStore.from_url("s3://bucket/prefix?region=eu-west-1")``, or
through the ``rill_executor.output_stores`` entry point ``s3``), or wrap a boto3 client:
``S3OutputStore("bucket", prefix="outputs", client=boto3.client("s3"))``. See docs/s3.md.
"""

from ._store import SHA256_METADATA, S3OutputStore, open_s3_output_store
from ._stream import ObjectStream

__all__ = [
    "ObjectStream",
    "SHA256_METADATA",
    "S3OutputStore",
    "open_s3_output_store",
]

__version__ = "0.1.0"
