"""What a command's failure is: its exit status (``ExitCode``), the ``type`` of its JSON
error (``ErrorType``) and the error a command raises for one it detects (``CliError``)."""

from __future__ import annotations

import enum

__all__ = ["CliError", "ErrorType", "ExitCode"]


class ExitCode(enum.IntEnum):
    """The exit statuses of every command (documented in docs/operations.md)."""

    OK = 0
    CHECK_FAILED = 1  # the command ran and found a problem (too short a retention, a broken
    # invariant, a notice still pending)
    USAGE = 2  # a bad option, argument, store URL or configuration; nothing was touched
    NOT_FOUND = 3  # no such job in that namespace (or no store at that path)
    STORE = 4  # the store could not be reached, has no schema, or failed: try again later
    REFUSED = 5  # the job's state refused the change (resolve on a live lease); nothing written
    INTERRUPTED = 6  # stopped from outside (a signal, its parent's death) before it was done


class ErrorType(enum.StrEnum):
    """The ``type`` of a JSON error (documented in docs/operations.md), each with its exit
    status; the exception's class, when there is one, goes in ``exception``."""

    CHECK_FAILED = "check_failed"  # 1
    USAGE = "usage"  # 2: a bad option, argument or value
    CONFIG = "config"  # 2: a store URL or configuration that cannot work
    NOT_FOUND = "not_found"  # 3
    STORE_UNAVAILABLE = "store_unavailable"  # 4: unreachable or dropped the call: retry later
    STORE_FAILED = "store_failed"  # 4: no schema, an older one, or an answer out of contract
    REFUSED = "refused"  # 5
    INTERRUPTED = "interrupted"  # 6

    @property
    def code(self) -> ExitCode:
        return _EXIT[self]


_EXIT = {
    ErrorType.CHECK_FAILED: ExitCode.CHECK_FAILED,
    ErrorType.USAGE: ExitCode.USAGE,
    ErrorType.CONFIG: ExitCode.USAGE,
    ErrorType.NOT_FOUND: ExitCode.NOT_FOUND,
    ErrorType.STORE_UNAVAILABLE: ExitCode.STORE,
    ErrorType.STORE_FAILED: ExitCode.STORE,
    ErrorType.REFUSED: ExitCode.REFUSED,
    ErrorType.INTERRUPTED: ExitCode.INTERRUPTED,
}
_TYPE_OF_CODE = {
    ExitCode.CHECK_FAILED: ErrorType.CHECK_FAILED,
    ExitCode.USAGE: ErrorType.USAGE,
    ExitCode.NOT_FOUND: ErrorType.NOT_FOUND,
    ExitCode.STORE: ErrorType.STORE_FAILED,
    ExitCode.REFUSED: ErrorType.REFUSED,
    ExitCode.INTERRUPTED: ErrorType.INTERRUPTED,
}


class CliError(Exception):
    """A failure the command itself detected, with its exit status (and, when ``code``
    alone does not say it, its ``ErrorType``)."""

    def __init__(self, message: str, code: ExitCode, kind: ErrorType | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.kind = kind or _TYPE_OF_CODE[code]
