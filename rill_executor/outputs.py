"""The public port for output-store adapters (e.g. ``rill-executor-s3``)."""

from ._errors import (
    ChecksumMismatch,
    OutputAccessDenied,
    OutputExists,
    OutputMissing,
    OutputPreconditionFailed,
    OutputStoreError,
)
from ._outputs import OutputData, OutputStore, StoredObject

__all__ = [
    "ChecksumMismatch",
    "OutputAccessDenied",
    "OutputData",
    "OutputExists",
    "OutputMissing",
    "OutputPreconditionFailed",
    "OutputStore",
    "OutputStoreError",
    "StoredObject",
]
