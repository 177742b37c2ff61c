"""Named SQL statements, kept in ``queries/*.sql`` as ``-- name: X`` blocks.

They are driver-level SQL (``%(name)s`` parameters): the hot path sends them straight to the
pooled DBAPI cursor. ``{columns}`` stands for the job's columns without its history and
event log.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

from ._schema import JSON_COLUMNS, jobs

__all__ = ["ANSWER_COLUMNS", "JOB_COLUMNS", "PURGE_COLUMNS", "STATUS_COLUMNS", "named"]

_BLOCK = re.compile(r"^-- name: (\w+)\n", re.MULTILINE)
_COMMENT = re.compile(r"--[^\n]*")  # the .sql files quote no '--' inside a string
_SPACE = re.compile(r"\s+")
# The history and the event log are read by status alone.
JOB_COLUMNS = tuple(c.name for c in jobs.columns if c.name not in ("attempts", "events"))
# JSON columns come back as text: the ledger passes them on as JSON text anyway.
_COLUMNS = ", ".join(
    f"j.{name}::text AS {name}" if name in JSON_COLUMNS else f"j.{name}" for name in JOB_COLUMNS
)
# What each statement answers, in order: rows arrive as tuples, named without a round of
# per-row column metadata.
ANSWER_COLUMNS = ("ok", "now", *JOB_COLUMNS)
STATUS_COLUMNS = ("now", *JOB_COLUMNS, "attempts", "events")
PURGE_COLUMNS = ("now", "purged", "kept", "cursor")


@cache
def _load(family: str) -> dict[str, str]:
    source = files(__package__).joinpath("queries", f"{family}.sql").read_text("utf-8")
    parts = _BLOCK.split(source)[1:]
    return {
        name: _compact(body).replace("{columns}", _COLUMNS)
        for name, body in zip(parts[::2], parts[1::2], strict=True)
    }


def _compact(body: str) -> str:
    """The statement without comments and runs of blanks: psycopg caches its parse of a
    statement only up to 4096 characters, and the claim would otherwise be longer."""
    return _SPACE.sub(" ", _COMMENT.sub("", body)).strip()


def named(family: str, name: str) -> str:
    return _load(family)[name]
