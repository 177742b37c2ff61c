from datetime import timedelta

import pytest

from rill_executor import ConfigError, Ledger, UsageError, current_claim
from rill_executor._registry import open_store
from rill_executor.store import MemoryStore


def test_retention_must_cover_the_duplicate_window() -> None:
    with pytest.raises(ConfigError, match="duplicate window"):
        Ledger(
            MemoryStore(),
            namespace="n",
            retention=timedelta(hours=1),
            duplicate_window=timedelta(hours=2),
        )
    ledger = Ledger(
        MemoryStore(),
        namespace="n",
        retention=timedelta(hours=3),
        duplicate_window=timedelta(hours=2),
    )
    assert ledger.retention == timedelta(hours=3)


def test_unknown_scheme_lists_the_installed_ones() -> None:
    with pytest.raises(ConfigError, match=r"no store adapter for scheme 'cassandra'.*memory"):
        open_store("cassandra://host/jobs")
    with pytest.raises(ConfigError, match="no scheme"):
        open_store("jobs.db")


def test_current_claim_outside_a_handler() -> None:
    with pytest.raises(UsageError, match="only available inside"):
        current_claim()


def test_async_ledger_refuses_plain_functions() -> None:
    from rill_executor import AsyncLedger
    from rill_executor.store import AsyncMemoryStore

    ledger = AsyncLedger(AsyncMemoryStore(), namespace="n")
    with pytest.raises(ConfigError, match="async def"):
        ledger.idempotent(key=lambda: "k")(lambda: 1)


class _Plain:
    """A class pydantic has no schema for."""


def test_a_return_type_that_cannot_be_stored_is_refused_when_decorating() -> None:
    ledger = Ledger(MemoryStore(), namespace="n")
    with pytest.raises(ConfigError, match=r"handler plain is annotated to return _Plain"):

        @ledger.idempotent(key=lambda k: k, name="plain")
        def handler(k: str) -> _Plain:
            return _Plain()


def test_a_forward_referenced_return_type_is_checked_before_the_first_run() -> None:
    ledger = Ledger(MemoryStore(), namespace="n")
    runs: list[str] = []

    @ledger.idempotent(key=lambda k: k, name="later")
    def handler(k: str) -> "NotDefinedYet":  # type: ignore[name-defined]  # noqa: F821
        runs.append(k)

    with pytest.raises(NameError):
        handler("k")
    assert runs == [] and ledger.status("k", handler="later") is None


@pytest.mark.parametrize("name", ["", "a/b", "x" * 201, "tab\there"])
def test_a_bad_handler_name_is_refused(name: str) -> None:
    ledger = Ledger(MemoryStore(), namespace="n")
    with pytest.raises(ConfigError, match="handler name"):
        ledger.idempotent(key=lambda k: k, name=name)(lambda k: k)
