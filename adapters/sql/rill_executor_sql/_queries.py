"""Named SQL statements, kept in ``queries/*.sql`` as ``-- name: X`` blocks."""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

from sqlalchemy import TextClause, text

__all__ = ["named"]

_BLOCK = re.compile(r"^-- name: (\w+)\n", re.MULTILINE)


@cache
def _load(family: str) -> dict[str, TextClause]:
    source = files(__package__).joinpath("queries", f"{family}.sql").read_text("utf-8")
    parts = _BLOCK.split(source)[1:]
    return {name: text(body.strip()) for name, body in zip(parts[::2], parts[1::2], strict=True)}


def named(family: str, name: str) -> TextClause:
    return _load(family)[name]
