"""A decorated handler's default name is its qualified name, whatever its module: two
different functions that would share it on one ledger are refused, while one function
decorated again (its module imported under another name, or reloaded) keeps its jobs. A
function defined inside another, or a lambda, has no default name that lasts: it is refused
without ``name=``."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rill_executor import AsyncLedger, ConfigError, Ledger

SOURCE = """
RUNS = []

if ledger_is_async:
    async def refund(order: str) -> str:
        RUNS.append(order)
        return f"refunded {order} by {__name__}"
else:
    def refund(order: str) -> str:
        RUNS.append(order)
        return f"refunded {order} by {__name__}"

def decorate(ledger, **options):
    return ledger.idempotent(key=lambda order: order, **options)(refund)
"""


def _module(name: str, file: Path, ledger: Ledger | AsyncLedger, source: str = SOURCE) -> Any:
    """``source`` executed as module ``name`` from ``file``, as an import would."""
    module = types.ModuleType(name)
    module.__file__ = str(file)
    module.ledger_is_async = isinstance(ledger, AsyncLedger)  # type: ignore[attr-defined]
    exec(compile(source, str(file), "exec"), module.__dict__)
    return module


def _call(handler: Callable[..., Any], *args: Any) -> Any:
    result = handler(*args)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


@pytest.fixture(params=["sync", "async"])
def ledger(request: pytest.FixtureRequest) -> Ledger | AsyncLedger:
    twin = Ledger if request.param == "sync" else AsyncLedger
    return twin("memory://", namespace="billing")


def _status_key(ledger: Ledger | AsyncLedger, key: str, handler: Any) -> str | None:
    found = ledger.status(key, handler=handler)
    status = asyncio.run(found) if asyncio.iscoroutine(found) else found
    return None if status is None else status.key


def test_the_default_name_is_the_qualified_name_not_the_module(
    ledger: Ledger | AsyncLedger, tmp_path: Path
) -> None:
    refund = _module("__main__", tmp_path / "billing.py", ledger).decorate(ledger)
    assert refund.__rill_handler__ == "refund"
    assert _call(refund, "o-1") == "refunded o-1 by __main__"
    assert _status_key(ledger, "o-1", refund) == "refund/o-1"


def test_two_functions_with_one_default_name_are_refused(
    ledger: Ledger | AsyncLedger, tmp_path: Path
) -> None:
    billing = _module("billing", tmp_path / "billing.py", ledger)
    shipping = _module("shipping", tmp_path / "shipping.py", ledger)
    refund = billing.decorate(ledger)
    with pytest.raises(ConfigError, match=r"idempotent\(name=\.\.\.\)") as refused:
        shipping.decorate(ledger)
    message = str(refused.value)
    assert "'refund'" in message and "namespace 'billing'" in message
    assert "billing" in message and "shipping" in message
    moved = shipping.decorate(ledger, name="shipping.refund")  # a name of its own is taken
    assert _call(refund, "o-1") == "refunded o-1 by billing"
    assert _call(moved, "o-1") == "refunded o-1 by shipping"
    assert billing.RUNS == ["o-1"] and shipping.RUNS == ["o-1"]
    other = Ledger("memory://", namespace="billing")  # names are taken per ledger
    shipping.decorate(other)


def test_one_function_decorated_again_keeps_its_jobs(
    ledger: Ledger | AsyncLedger, tmp_path: Path
) -> None:
    """The script run as ``__main__`` and imported as ``worker`` (one file), then the module
    reloaded with lines added above the handler (one module name)."""
    script = tmp_path / "worker.py"
    main = _module("__main__", script, ledger)
    first = main.decorate(ledger)
    assert _call(first, "o-1") == "refunded o-1 by __main__"
    imported = _module("worker", script, ledger).decorate(ledger)
    assert _call(imported, "o-1") == "refunded o-1 by __main__"  # a replay
    edited = "\n\n# a comment moves the handler down\n" + SOURCE
    reloaded = _module("worker", tmp_path / "elsewhere" / "worker.py", ledger, edited)
    assert _call(reloaded.decorate(ledger), "o-1") == "refunded o-1 by __main__"
    assert _call(main.decorate(ledger), "o-1") == "refunded o-1 by __main__"  # the same again
    assert main.RUNS == ["o-1"]


def test_a_name_given_may_be_shared_on_purpose(
    ledger: Ledger | AsyncLedger, tmp_path: Path
) -> None:
    billing = _module("billing", tmp_path / "billing.py", ledger)
    shipping = _module("shipping", tmp_path / "shipping.py", ledger)
    refund = billing.decorate(ledger)
    shared = shipping.decorate(ledger, name=refund.__rill_handler__)
    assert _call(refund, "o-1") == _call(shared, "o-1") == "refunded o-1 by billing"
    assert shipping.RUNS == []


INSIDE = """
def main(ledger, **options):
    if ledger_is_async:
        @ledger.idempotent(key=lambda video: video, **options)
        async def transcode(video: str) -> str:
            return f"s3://out/{video}.mp4"
    else:
        @ledger.idempotent(key=lambda video: video, **options)
        def transcode(video: str) -> str:
            return f"s3://out/{video}.mp4"
    return transcode
"""


def test_a_handler_defined_inside_a_function_needs_a_name(
    ledger: Ledger | AsyncLedger, tmp_path: Path
) -> None:
    """Its qualified name says where it is written (``main.<locals>.transcode``): moved out
    of ``main`` it would silently start a new set of jobs."""
    app = _module("app", tmp_path / "app.py", ledger, INSIDE)
    with pytest.raises(ConfigError) as refused:
        app.main(ledger)
    assert str(refused.value) == (
        "handler 'main.<locals>.transcode' is defined inside a function, so its default name"
        " would change if it moved: pass it a durable name, e.g."
        " idempotent(name='transcode', key=...) (or task(path, name=...) on a RillFlowExecutor)"
    )
    assert _call(app.main(ledger, name="transcode"), "A") == "s3://out/A.mp4"
    assert _status_key(ledger, "A", "transcode") == "transcode/A"


def test_a_lambda_handler_needs_a_name() -> None:
    ledger = Ledger("memory://", namespace="billing")  # an AsyncLedger takes no lambda at all
    with pytest.raises(ConfigError, match=r"<lambda>' is a lambda.*idempotent\(name="):
        ledger.idempotent(key=lambda video: video)(lambda video: video)
