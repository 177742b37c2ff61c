"""The Lua scripts, one per store operation, and the keys and arguments each call sends.

The ``.lua`` files in ``lua/`` are the source of truth; ``common.lua`` is prepended to each.
Sync and asyncio stores register the same sources and send the same ``ScriptCall``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from rill_executor.store import (
    AttemptOutcome,
    AttemptRef,
    ClaimRequest,
    Completion,
    JobState,
    StoreProtocolError,
)

from ._keys import job_keys

__all__ = [
    "Op",
    "ScriptCall",
    "claim_call",
    "finish_call",
    "heartbeat_call",
    "register_output_call",
    "source",
    "status_call",
]


class Op(enum.StrEnum):
    CLAIM = "claim"
    HEARTBEAT = "heartbeat"
    REGISTER_OUTPUT = "register_output"
    FINISH = "finish"
    STATUS = "status"


@cache
def source(op: Op) -> str:
    """The full text of ``op``'s script: the shared prelude, then the operation."""
    lua = files(__package__).joinpath("lua")
    return (
        lua.joinpath("common.lua").read_text("utf-8")
        + "\n"
        + lua.joinpath(f"{op.value}.lua").read_text("utf-8")
    )


@dataclass(frozen=True, slots=True)
class ScriptCall:
    op: Op
    job_id: str
    keys: tuple[str, str]
    args: tuple[str | int, ...]


def claim_call(request: ClaimRequest) -> ScriptCall:
    return ScriptCall(
        Op.CLAIM,
        request.job_id,
        job_keys(request.job_id),
        (
            request.namespace,
            request.key,
            request.fingerprint,
            request.result_version or "",  # the core never passes an empty version
            request.attempt_id,
            request.lease_us,
        ),
    )


def heartbeat_call(ref: AttemptRef, lease_us: int) -> ScriptCall:
    return ScriptCall(
        Op.HEARTBEAT, ref.job_id, job_keys(ref.job_id), (ref.attempt_id, ref.fence, lease_us)
    )


def register_output_call(ref: AttemptRef, output: str) -> ScriptCall:
    return ScriptCall(
        Op.REGISTER_OUTPUT, ref.job_id, job_keys(ref.job_id), (ref.attempt_id, ref.fence, output)
    )


def finish_call(ref: AttemptRef, completion: Completion) -> ScriptCall:
    if completion.state is JobState.PROCESSING:
        raise StoreProtocolError("a completion must be SUCCEEDED or FAILED, got PROCESSING")
    outcome = (
        AttemptOutcome.SUCCEEDED
        if completion.state is JobState.SUCCEEDED
        else AttemptOutcome.FAILED
    )
    retryable = "" if completion.retryable is None else ("1" if completion.retryable else "0")
    return ScriptCall(
        Op.FINISH,
        ref.job_id,
        job_keys(ref.job_id),
        (
            ref.attempt_id,
            ref.fence,
            completion.state.value,
            outcome.value,
            completion.result or "",  # JSON text is never empty: '' means none
            completion.error or "",
            retryable,
            completion.retention_us,
            completion.outputs,
        ),
    )


def status_call(job_id: str) -> ScriptCall:
    return ScriptCall(Op.STATUS, job_id, job_keys(job_id), ())
