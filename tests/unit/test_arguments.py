"""A handler's arguments by name, as the fingerprint reads them: the fast path agrees with
``inspect``'s binding, and a call that does not fit the signature claims nothing."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from rill_executor import Ledger
from rill_executor._idempotent import _Arguments


def plain(a: int, b: int = 2, c: str = "x") -> None: ...


def starred(a: int, *rest: int, b: int = 2, **more: Any) -> None: ...


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((1,), {}), ((1, 3), {}), ((1, 3, "y"), {}), ((1,), {"c": "z"}), ((), {"a": 1, "b": 5})],
)
def test_the_fast_path_names_the_arguments_as_bind_does(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    signature = inspect.signature(plain)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    fast = _Arguments.of(signature)
    assert fast is not None and fast.named(args, kwargs) == dict(bound.arguments)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((), {}), ((1, 2, "y", 4), {}), ((1,), {"a": 1}), ((1,), {"d": 1}), ((), {"b": 1})],
)
def test_a_call_that_does_not_fit_is_left_to_bind(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    fast = _Arguments.of(inspect.signature(plain))
    assert fast is not None and fast.named(args, kwargs) is None
    with pytest.raises(TypeError):
        inspect.signature(plain).bind(*args, **kwargs)


def test_a_signature_with_star_arguments_always_binds() -> None:
    assert _Arguments.of(inspect.signature(starred)) is None


def test_a_decorated_call_with_wrong_arguments_raises_and_claims_nothing() -> None:
    ledger = Ledger("memory://", namespace="args")

    @ledger.idempotent(key=lambda a, b=2: f"{a}", name="h")
    def handler(a: int, b: int = 2) -> int:
        return a + b

    with pytest.raises(TypeError):
        handler(1, 2, 3)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        handler(1, c=3)  # type: ignore[call-arg]
    assert ledger.status("1", handler="h") is None
    assert handler(1) == handler(a=1, b=2) == 3  # one job: the same arguments by name
    status = ledger.status("1", handler="h")
    assert status is not None and len(status.attempts) == 1
