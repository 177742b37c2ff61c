"""The refusal of a store URL's query option that no part of the store takes.

A store URL's options go to the adapter, or through it to its driver (redis-py, libpq,
PyMySQL…). An option neither takes is a typo or a setting meant for another store, and a
driver either ignores it or refuses it late and obscurely (a ``TypeError`` at the first
connection). Each adapter refuses it when the store opens, before anything is read or
written, with ``unknown_url_option``: one message for every store, naming the option (its
name escaped and cut short: it is the caller's text), a close match if there is one, every
option the store takes, and where they are described.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection

from ._errors import ConfigError

__all__ = ["unknown_url_option"]

_SHOWN = 80  # characters of a long option name the message shows


def unknown_url_option(
    name: str,
    url: str,
    ours: tuple[str, Collection[str]],
    theirs: tuple[str, Collection[str]] | None,
    docs: str,
) -> ConfigError:
    """The ``ConfigError`` for option ``name`` of ``url`` (e.g. "the Redis store URL"):
    ``ours`` and ``theirs`` are who takes which options (the adapter; its driver, or None),
    ``docs`` the page that lists them."""
    shown = name if len(name) <= _SHOWN else name[:_SHOWN] + "…"
    own_label, own = ours
    known = sorted({*own, *(theirs[1] if theirs else ())})
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    takes = [f"{', '.join(sorted(own)) or 'none'} ({own_label})"]
    if theirs is not None:
        takes.append(f"{', '.join(sorted(theirs[1])) or 'none'} ({theirs[0]})")
    return ConfigError(
        f"unknown option {shown!r} in {url}{guess}. Its options: {'; '.join(takes)}. Remove"
        f" the option or correct its name; see {docs}"
    )
