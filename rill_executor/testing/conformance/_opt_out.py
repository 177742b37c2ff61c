"""A store's opt-out of a group of the kit, or of one test, with a reason: a pytest skip."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import pytest

__all__ = ["apply_opt_outs", "tests_of"]


def tests_of(group: type) -> tuple[str, ...]:
    """The names of the tests a group's class defines, in their order."""
    return tuple(name for name in vars(group) if name.startswith("test_"))


def apply_opt_outs(store: type, groups: Mapping[str, type]) -> None:
    """Mark the tests ``store`` opts out of (its ``skip_groups`` and ``skip_tests``) as
    skipped with their reason, on ``store`` alone. An unknown group or test name, an empty
    reason, or a kit test set to ``None`` raises ``TypeError`` when the class is defined,
    which pytest reports as an error collecting its module."""
    owner = store.__qualname__
    group_of = {test: name for name, group in groups.items() for test in tests_of(group)}
    disabled = sorted(
        name for name in group_of if name in vars(store) and vars(store)[name] is None
    )
    if disabled:
        raise TypeError(
            f"{owner} sets {', '.join(disabled)} to None: name it in skip_tests with a reason"
            f" instead, e.g. skip_tests = {{{disabled[0]!r}: 'why this store cannot'}}"
        )
    reasons: dict[str, str] = {}
    for group, reason in _reasons(owner, "skip_groups", store, groups, "group"):
        reasons.update(dict.fromkeys(tests_of(groups[group]), reason))
    for test, reason in _reasons(owner, "skip_tests", store, group_of, "test"):
        reasons[test] = reason
    for test, reason in reasons.items():
        setattr(store, test, _skipped(getattr(store, test), reason))


def _reasons(
    owner: str, setting: str, store: type, known: Mapping[str, Any], what: str
) -> list[tuple[str, str]]:
    """The (name, reason) pairs of one of ``store``'s own opt-out settings, checked."""
    chosen = vars(store).get(setting, {})
    if not isinstance(chosen, Mapping):
        raise TypeError(f"{owner}.{setting} must map a {what} name to a reason, not {chosen!r}")
    for name, reason in chosen.items():
        if name not in known:
            raise TypeError(
                f"{owner}.{setting}: the kit has no {what} {name!r}; its {what}s are"
                f" {', '.join(sorted(known))}"
            )
        if not isinstance(reason, str) or not reason.strip():
            raise TypeError(f"{owner}.{setting}[{name!r}]: give the reason, a non-empty string")
    return list(chosen.items())


def _skipped(test: Callable[..., Any], reason: str) -> Callable[..., Any]:
    """``test``, skipped with ``reason`` for this store only: a wrapper carries the mark,
    so the kit's own function (shared by every store) keeps none."""

    @functools.wraps(test)
    def skipped(*args: Any, **kwargs: Any) -> Any:
        return test(*args, **kwargs)

    marked: Callable[..., Any] = pytest.mark.skip(reason=reason)(skipped)
    return marked
