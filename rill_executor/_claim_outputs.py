"""``claim.outputs``: writing output objects under a claim.

``put`` registers the object in the attempt's record first (a fenced store write: a
superseded attempt cannot even register), then writes it to an attempt-scoped key (which
carries the job store's identity, see ``attempt_object_key``) with a SHA-256 checksum,
and returns the ``OutputRef`` the result can carry. ``commit`` commits every ref put
through the claim together with the result, in the same fenced write.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

from . import _telemetry as telemetry
from ._errors import ConfigError, UsageError
from ._keys import attempt_object_key, validate_output_name, validate_store_id
from ._outputs import OutputData, OutputStore, StoredObject
from ._records import OutputRef

__all__ = ["AsyncClaimOutputs", "ClaimOutputs"]


class _OutputsBase:
    def __init__(
        self, store: OutputStore | None, namespace: str, job_id: str, attempt_id: str
    ) -> None:
        self._store = store
        self._where = (namespace, job_id, attempt_id)
        self.refs: list[OutputRef] = []

    def _intent(self, name: str, store_id: str) -> tuple[OutputStore, str, str]:
        """The store, object key and registration (JSON) for output ``name``."""
        if self._store is None:
            raise ConfigError(
                "this ledger has no output store: pass outputs=… (e.g. an S3OutputStore) to"
                " Ledger / AsyncLedger to write outputs through a claim"
            )
        name = validate_output_name(name)
        if any(ref.name == name for ref in self.refs):
            raise UsageError(f"output {name!r} was already written by this attempt")
        namespace, job_id, attempt_id = self._where
        key = attempt_object_key(namespace, job_id, validate_store_id(store_id), attempt_id, name)
        uri = self._store.uri(key)
        return self._store, key, json.dumps({"name": name, "key": key, "uri": uri})

    def _written(self, name: str, key: str, stored: StoredObject) -> OutputRef:
        assert stored.sha256 is not None  # checked by _put
        ref = OutputRef(
            name=name,
            key=key,
            uri=stored.uri,
            sha256=stored.sha256,
            size=stored.size,
            etag=stored.etag,
            version_id=stored.version_id,
        )
        self.refs.append(ref)
        return ref

    def committed(self) -> str:
        if not self.refs:
            return "[]"
        return json.dumps([ref.model_dump() for ref in self.refs], separators=(",", ":"))


def _put(store: OutputStore, key: str, data: OutputData) -> StoredObject:
    stored = store.put(key, data)
    if stored.sha256 is None:
        raise ConfigError(f"output store {type(store).__name__} returned no SHA-256 for {key!r}")
    return stored


class ClaimOutputs(_OutputsBase):
    """``register`` is the claim's fenced registration; ``store_id`` its job store's."""

    def __init__(
        self,
        claim: telemetry.Attempt,
        register: Callable[[str], None],
        store_id: Callable[[], str],
        store: OutputStore | None,
    ) -> None:
        super().__init__(store, claim.namespace, claim.job_id, claim.attempt_id)
        self._claim = claim
        self._register = register
        self._store_id = store_id

    def put(self, name: str, data: OutputData) -> OutputRef:
        """Register, then write ``data`` as output ``name``; raises ``StaleAttempt`` (and
        writes nothing) if this attempt no longer owns the job."""
        store, key, intent = self._intent(name, self._store_id())
        with telemetry.output_put(self._claim, name) as span:
            self._register(intent)
            stored = _put(store, key, data)
            telemetry.output_written(span, stored.size)
        return self._written(name, key, stored)


class AsyncClaimOutputs(_OutputsBase):
    def __init__(
        self,
        claim: telemetry.Attempt,
        register: Callable[[str], Awaitable[None]],
        store_id: Callable[[], Awaitable[str]],
        store: OutputStore | None,
    ) -> None:
        super().__init__(store, claim.namespace, claim.job_id, claim.attempt_id)
        self._claim = claim
        self._register = register
        self._store_id = store_id

    async def put(self, name: str, data: OutputData) -> OutputRef:
        store, key, intent = self._intent(name, await self._store_id())
        with telemetry.output_put(self._claim, name) as span:
            await self._register(intent)
            stored = await asyncio.to_thread(_put, store, key, data)
            telemetry.output_written(span, stored.size)
        return self._written(name, key, stored)
