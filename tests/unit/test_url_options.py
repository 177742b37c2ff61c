"""The one message refusing a store URL's unknown option (``unknown_url_option``): what it
names, and the caller's text in it shown escaped."""

from __future__ import annotations

import unicodedata

import pytest

from rill_executor import ConfigError
from rill_executor.store import unknown_url_option

OURS = ("rill-executor-redis", ("durability",))
THEIRS = ("redis-py's client", ("socket_timeout", "client_name", "db"))


def _message(name: str, theirs: tuple[str, tuple[str, ...]] | None = THEIRS) -> str:
    error = unknown_url_option(name, "the redis:// store URL", OURS, theirs, "docs/redis.md")
    assert isinstance(error, ConfigError)
    return str(error)


def test_it_names_the_option_every_option_and_the_page() -> None:
    message = _message("bogus")
    assert message.startswith("unknown option 'bogus' in the redis:// store URL. ")
    assert "durability (rill-executor-redis)" in message
    assert "client_name, db, socket_timeout (redis-py's client)" in message
    assert "Remove the option or correct its name; see docs/redis.md" in message
    assert "did you mean" not in message


def test_a_close_name_is_suggested() -> None:
    assert "(did you mean 'socket_timeout'?)" in _message("socket_timout")
    assert "(did you mean 'durability'?)" in _message("durabilty")


def test_a_store_without_a_driver_list_names_its_own() -> None:
    message = _message("bogus", None)
    assert "Its options: durability (rill-executor-redis). Remove" in message


@pytest.mark.parametrize(
    "name",
    ["\x00nul", "\x1b[31mred", "line\nbreak", "\u202eevil", "zero\u200bwidth", "\ud800", "tab\t"],
)
def test_hostile_names_are_shown_escaped(name: str) -> None:
    message = _message(name)
    assert repr(name) in message
    unsafe = [c for c in message if unicodedata.category(c) in ("Cc", "Cf", "Cs")]
    assert unsafe == []


def test_a_long_name_is_cut_short() -> None:
    message = _message("x" * 10_000)
    assert f"'{'x' * 80}…'" in message and len(message) < 400
