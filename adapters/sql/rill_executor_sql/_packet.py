"""MariaDB's ``max_allowed_packet``: a statement over it is refused before it is sent.

The server drops the connection on an oversized packet and the driver reports a lost
connection, which reads as an outage that a retry could cure; it fails the same way every
time. So each connection reads the server's limit once when it opens (the server applies a
changed limit to new connections only), and a statement over it is never sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Engine, event

from rill_executor import ConfigError, ResultTooLarge

__all__ = ["watch_packets"]

_LIMIT = "rill_max_allowed_packet"
_RAISE = (
    " Raise max_allowed_packet on the server (SET GLOBAL max_allowed_packet = …, and in its"
    " configuration file)"
)
_OUTPUTS = " store large data as an output object and return a reference. Nothing was written"


def _read_limit(dbapi_connection: Any, record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("SELECT @@max_allowed_packet")
        record.info[_LIMIT] = int(cursor.fetchone()[0])
    finally:
        cursor.close()


def _values(parameters: Any) -> Iterable[Any]:
    return parameters.values() if isinstance(parameters, dict) else parameters or ()


def _sent_size(statement: str, parameters: Any) -> int:
    """The bytes of the query the driver sends: each string escaped, quoted, UTF-8."""
    from pymysql.converters import escape_string  # the driver's own escaping (aiomysql's too)

    size = 1 + len(statement.encode())  # the command byte
    for value in _values(parameters):
        if isinstance(value, str):
            size += len(escape_string(value).encode()) + 2
        else:
            size += len(str(value))
    return size


def _check(
    conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
) -> None:
    limit = conn.info.get(_LIMIT)
    if limit is None or many:
        return
    # Cheap bound first (escaping at most doubles a character, UTF-8 takes 4 bytes at most).
    bound = len(statement) + sum(
        4 * len(v) + 3 if isinstance(v, str) else 24 for v in _values(parameters)
    )
    if bound < limit:
        return
    size = _sent_size(statement, parameters)
    if size <= limit:
        return
    bound_params = context.compiled_parameters[0] if context and context.compiled_parameters else {}
    result = bound_params.get("result")
    if isinstance(result, str):
        stored = len(result.encode())
        raise ResultTooLarge(
            f"the result serialises to {stored} bytes; the statement that stores it would be"
            f" {size} bytes, over the MariaDB server's max_allowed_packet of {limit} bytes,"
            " and the server drops the connection on every try." + _RAISE + ", lower the"
            " ledger's max_result_bytes well below it, or" + _OUTPUTS,
            size=stored,
            limit=limit,
        )
    raise ConfigError(
        f"a statement of {size} bytes for this job is over the MariaDB server's"
        f" max_allowed_packet of {limit} bytes, and the server drops the connection on"
        " every try." + _RAISE + ", or" + _OUTPUTS
    )


def watch_packets(engine: Engine) -> None:
    """Read each new connection's ``max_allowed_packet`` and check statements against it."""
    event.listen(engine, "connect", _read_limit)
    event.listen(engine, "before_cursor_execute", _check)
