"""What every store's refusal of an unknown URL option says (``unknown_url_option``)."""

from __future__ import annotations

import unicodedata


def assert_refusal(message: str, name: str, url: str, *, lists: tuple[str, ...], docs: str) -> None:
    """``message`` names option ``name`` as the caller wrote it (escaped, a long one cut at
    80 characters) in ``url``, lists ``lists`` among the options taken, points at ``docs``,
    and holds no character a terminal would act on rather than show."""
    shown = name if len(name) <= 80 else name[:80] + "…"
    assert f"unknown option {shown!r} in {url}" in message
    assert all(listed in message for listed in lists), (lists, message)
    assert docs in message
    assert not [c for c in message if unicodedata.category(c) in ("Cc", "Cf")]
