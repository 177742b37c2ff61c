"""What the groups of the kit share: the handlers' models and wrappers of a store."""

from __future__ import annotations

import inspect
from collections import Counter
from typing import Any

from pydantic import BaseModel

from ... import JobStatus, StoreUnavailable, current_async_claim, current_claim
from .._driver import LedgerDriver

__all__ = [
    "Measured",
    "Segment",
    "Transcoded",
    "_LosingReplies",
    "_counting",
    "_per_job",
    "_put_output",
    "_stable",
    "_store_id",
]


class Segment(BaseModel):
    video: str
    segment: int
    profile: str


class Transcoded(BaseModel):
    uri: str
    frames: int


class Measured(BaseModel):
    uri: str
    seconds: float


def _stable(status: JobStatus | None) -> dict[str, Any] | None:
    """A status without the fields that move with the clock alone."""
    if status is None:
        return None
    return status.model_dump(exclude={"store_time": True, "owner": {"lease_left"}})


def _store_id(driver: LedgerDriver) -> str:
    """The identity of the driver's store, through its sync or async face."""
    return str(driver.resolve(driver.shared_store().store_id()))


def _counting(store: Any, calls: Counter[str]) -> Any:
    class Counting:
        def __getattr__(self, name: str) -> Any:
            target = getattr(store, name)

            def call(*args: Any, **kwargs: Any) -> Any:
                calls[name] += 1
                return target(*args, **kwargs)

            return call

    return Counting()


def _per_job(store: Any) -> Any:
    """``store`` without ``list_statuses``: a drill reads it one ``status`` a job."""

    class PerJob:
        def __getattr__(self, name: str) -> Any:
            if name == "list_statuses":
                raise AttributeError(name)
            return getattr(store, name)

    return PerJob()


class _LosingReplies:
    """Wraps a store so that the first ``times`` replies to ``operations`` are lost: each
    call is applied (or, with ``apply=False``, never arrives), then ``StoreUnavailable``."""

    def __init__(self, *operations: str, times: int = 1, apply: bool = True) -> None:
        self.operations, self.times, self.apply = operations, times, apply
        self.calls = 0
        self.lost_by: Counter[str] = Counter()

    @property
    def lost(self) -> int:
        return sum(self.lost_by.values())

    def _lose(self, operation: str) -> bool:
        if self.lost_by[operation] >= self.times:
            return False
        self.lost_by[operation] += 1
        return True

    def wrap(self, store: Any) -> Any:
        losing = self

        class Losing:
            def __getattr__(self, name: str) -> Any:
                target = getattr(store, name)
                if name not in losing.operations:
                    return target
                if inspect.iscoroutinefunction(target):

                    async def acall(*args: Any) -> Any:
                        losing.calls += 1
                        if losing._lose(name):
                            if losing.apply:
                                await target(*args)
                            raise StoreUnavailable(
                                f"connection lost before the {name} reply",
                                applied=None if losing.apply else False,
                            )
                        return await target(*args)

                    return acall

                def call(*args: Any) -> Any:
                    losing.calls += 1
                    if losing._lose(name):
                        if losing.apply:
                            target(*args)
                        raise StoreUnavailable(
                            f"connection lost before the {name} reply",
                            applied=None if losing.apply else False,
                        )
                    return target(*args)

                return call

        return Losing()


def _put_output(driver: LedgerDriver, name: str, data: bytes) -> Any:
    """Register and write an output from inside a decorated handler, on either twin (an
    async twin's handler runs in a worker thread of the driver's loop)."""
    if driver.is_async:
        return driver.resolve(current_async_claim().outputs.put(name, data))
    return current_claim().outputs.put(name, data)
