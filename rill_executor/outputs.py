"""Output objects: what a claim writes (``claim.outputs``, ``OutputRef``), the in-memory
store for tests, and the public port for output-store adapters (e.g. ``rill-executor-s3``)."""

from ._claim_outputs import AsyncClaimOutputs, ClaimOutputs
from ._errors import (
    ChecksumMismatch,
    OutputAccessDenied,
    OutputExists,
    OutputMissing,
    OutputPreconditionFailed,
    OutputStoreError,
)
from ._memory_outputs import MemoryOutputStore
from ._outputs import OutputData, OutputStore, StoredObject
from ._records import OutputRef
from ._registry import open_output_store

__all__ = [
    "AsyncClaimOutputs",
    "ClaimOutputs",
    "MemoryOutputStore",
    "OutputRef",
    "open_output_store",
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
