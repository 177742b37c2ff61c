"""Redis key names of a job.

A job lives in two keys that share the hash tag ``{<job_id>}``:

- ``rill:{<job_id>}:job``       hash: the record
- ``rill:{<job_id>}:attempts``  hash: the attempt history, ``<fence>:<part>`` -> value, and
                                ``fence``, the last fence handed out; it outlives the
                                record by one retention, so a key claimed again after its
                                record expired continues its fences instead of reusing 1

``job_id`` is the core's SHA-256 hex digest of (namespace, key), so the tag puts both
in one Cluster slot and no business key can forge another job's name, change its slot or
make a name long: user input is stored inside the record, never in a key name.

Each namespace has an outbox index (see ``_outbox``): ``rill:{ns-<sha1(namespace)>}:outbox``,
a sorted set of job ids with pending notices or waiting watches, and on a Redis Cluster its
tokens hash ``rill:{ns-<sha1(namespace)>}:outbox-tokens``. The namespace is hashed (by the
scripts too, with ``redis.sha1hex``), so it never appears in a key name either.

One more key, ``rill:store-id``, holds the store's identity: a hash of a random id created
by the first store that opens the database, never changed or expired, and the versions of
the code that may write to it (``_writers``).
"""

from __future__ import annotations

import hashlib
import re

from rill_executor.store import StoreProtocolError

__all__ = ["IDENTITY", "PREFIX", "job_id_of", "job_keys", "outbox_keys"]

PREFIX = "rill"
IDENTITY = f"{PREFIX}:store-id"
_JOB_ID = re.compile(r"[0-9a-f]{64}")


def job_keys(job_id: str) -> tuple[str, str]:
    """The (record, history) key names of ``job_id``."""
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
        # Only the ledger's digest is safe inside a hash tag; anything else is a bug upstream.
        raise StoreProtocolError(
            f"job id {job_id!r} is not a SHA-256 hex digest; job ids come from the ledger"
            " (rill_executor's job_id(namespace, key)), never from user input"
        )
    tag = "{" + job_id + "}"
    return f"{PREFIX}:{tag}:job", f"{PREFIX}:{tag}:attempts"


def job_id_of(record_key: bytes | str) -> str:
    """The job id in a record key name a ``SCAN`` found: ``rill:{<job_id>}:job``."""
    name = record_key.decode() if isinstance(record_key, bytes) else str(record_key)
    return name[len(PREFIX) + 2 : -len("}:job")]


def outbox_keys(namespace: str) -> tuple[str, str]:
    """The (index, tokens) key names of ``namespace``'s outbox; as ``outbox_key`` in Lua."""
    digest = hashlib.sha1(namespace.encode("utf-8"), usedforsecurity=False).hexdigest()
    tag = "{ns-" + digest + "}"
    return f"{PREFIX}:{tag}:outbox", f"{PREFIX}:{tag}:outbox-tokens"
