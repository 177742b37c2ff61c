"""The limits on what the ledger stores, each checked before anything is written (a value
over one is a ``UsageError`` or ``InvalidKey`` that names it), and on the pages and batches
of the operations that read or purge many jobs."""

from ._keys import (
    MAX_ATTEMPT_ID_CHARS,
    MAX_HANDLER_NAME_CHARS,
    MAX_KEY_BYTES,
    MAX_OBJECT_KEY_BYTES,
    MAX_OUTPUT_NAME_CHARS,
    MAX_VERSION_CHARS,
)
from ._listing import MAX_PAGE
from ._records import MAX_ERROR_CHARS
from ._rules.events import MAX_DETAIL_CHARS, MAX_EVENTS
from ._rules.notices import MAX_WATCH_ID_CHARS
from ._rules.purge import MAX_PURGE_BATCH
from ._rules.resolution import MAX_ACTOR_CHARS, MAX_REASON_CHARS

__all__ = [
    "MAX_ACTOR_CHARS",
    "MAX_ATTEMPT_ID_CHARS",
    "MAX_DETAIL_CHARS",
    "MAX_ERROR_CHARS",
    "MAX_EVENTS",
    "MAX_HANDLER_NAME_CHARS",
    "MAX_KEY_BYTES",
    "MAX_OBJECT_KEY_BYTES",
    "MAX_OUTPUT_NAME_CHARS",
    "MAX_PAGE",
    "MAX_PURGE_BATCH",
    "MAX_REASON_CHARS",
    "MAX_VERSION_CHARS",
    "MAX_WATCH_ID_CHARS",
]
