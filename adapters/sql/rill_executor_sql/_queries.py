"""Named SQL statements, kept in ``queries/*.sql`` as ``-- name: X`` blocks.

They are driver-level SQL (``%(name)s`` parameters): the hot path sends them straight to the
pooled DBAPI cursor. ``{columns}`` stands for the job's columns without its history and
event log, ``{awaits_lapse}`` and ``{new_notice}`` for the blocks of those names (parts of
statements, not statements).
``claim_function`` is the DDL of ``rill_claim`` (schema version 10), which runs the ``claim``
statement when a read and an insert do not settle the claim.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

from sqlalchemy.dialects.postgresql.base import PGDialect

from ._dialect import shifted_now
from ._schema import JSON_COLUMNS, jobs

__all__ = [
    "ANSWER_COLUMNS",
    "JOB_COLUMNS",
    "PURGE_COLUMNS",
    "STATUS_COLUMNS",
    "claim_function",
    "named",
    "on_clock",
]

_BLOCK = re.compile(r"^-- name: (\w+)\n", re.MULTILINE)
_COMMENT = re.compile(r"--[^\n]*")  # the .sql files quote no '--' inside a string
_SPACE = re.compile(r"\s+")
_PARAM = re.compile(r"%\((\w+)\)s")
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
_POSTGRES = PGDialect()  # type: ignore[no-untyped-call]
# rill_claim's result columns: the answer's names, with the types the statements give them.
_ANSWER_TYPES = ", ".join(
    [
        "ok boolean",
        "now bigint",
        *(
            f"{name} text"
            if name in JSON_COLUMNS
            else f"{name} {jobs.c[name].type.compile(dialect=_POSTGRES)}"
            for name in JOB_COLUMNS
        ),
    ]
)
PURGE_COLUMNS = ("now", "purged", "kept", "cursor")
_PG_NOW = "(extract(epoch FROM now()) * 1000000)::bigint"  # the clock, as the .sql files read it
_CALL_END = "CAST(%(watch)s AS jsonb))"  # the end of claim_call
_WATCH_PARAM = "p_watch jsonb DEFAULT NULL)"  # the end of rill_claim's parameters
_FRAGMENTS = ("awaits_lapse", "new_notice")  # blocks that are parts of statements, not ones


@cache
def _load(family: str) -> dict[str, str]:
    source = files(__package__).joinpath("queries", f"{family}.sql").read_text("utf-8")
    parts = _BLOCK.split(source)[1:]
    blocks = {name: _compact(body) for name, body in zip(parts[::2], parts[1::2], strict=True)}
    fragments = {"{columns}": _COLUMNS}
    fragments |= {f"{{{name}}}": blocks[name] for name in _FRAGMENTS if name in blocks}
    return {name: _fill(body, fragments) for name, body in blocks.items()}


def _fill(body: str, fragments: dict[str, str]) -> str:
    for mark, text in fragments.items():
        body = body.replace(mark, text)
    return body


def _compact(body: str) -> str:
    """The statement without comments and runs of blanks: psycopg caches its parse of a
    statement only up to 4096 characters, and the claim would otherwise be longer."""
    return _SPACE.sub(" ", _COMMENT.sub("", body)).strip()


def named(family: str, name: str) -> str:
    return _load(family)[name]


@cache
def on_clock(sql: str, clock_offset_us: int, clock_frozen: bool) -> str:
    """Tests only: the PostgreSQL statement ``sql`` on a view's clock (``SqlDialect``), read
    ``clock_offset_us`` later or standing there (``clock_frozen``); a claim calls the view's
    ``pg_temp.rill_claim`` (``claim_function(shifted=True)``) with that clock."""
    offset = int(clock_offset_us)
    sql = sql.replace(_PG_NOW, shifted_now(_PG_NOW, offset, frozen=clock_frozen))
    if "rill_claim(" in sql:
        frozen = "true" if clock_frozen else "false"
        sql = _swap(sql, _CALL_END, f"{_CALL_END[:-1]}, {offset}, {frozen})")
        sql = _swap(sql, "rill_claim(", "pg_temp.rill_claim(")
    return sql


def claim_function(*, shifted: bool = False) -> str:
    """``CREATE OR REPLACE FUNCTION rill_claim``: the ``claim`` statement inside it reads its
    parameters ``%(x)s`` as the function's arguments ``p_x``. ``shifted``: tests only, the
    function ``pg_temp.rill_claim`` of one session, on the clock its last two arguments
    give (see ``SqlStore._with_clock_offset``)."""
    statements = _load("postgres")
    claim = _PARAM.sub(r"p_\1", statements["claim"])
    ddl = statements["claim_function"].replace("{answer}", _ANSWER_TYPES).replace("{claim}", claim)
    if not shifted:
        return ddl
    ddl = _swap(ddl, " rill_claim(", " pg_temp.rill_claim(")
    clock = "p_clock_offset_us bigint DEFAULT 0, p_clock_frozen boolean DEFAULT false"
    ddl = _swap(ddl, _WATCH_PARAM, f"{_WATCH_PARAM[:-1]}, {clock})")
    now = f"(CASE WHEN p_clock_frozen THEN 0 ELSE {_PG_NOW} END + p_clock_offset_us)"
    return ddl.replace(_PG_NOW, now)


def _swap(body: str, old: str, new: str) -> str:
    """``body`` with its one ``old`` replaced by ``new``."""
    if body.count(old) != 1:
        raise AssertionError(f"expected one {old!r} in the statement: update the test hook")
    return body.replace(old, new)
