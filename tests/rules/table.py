"""The vocabulary of the rule table (``cases.py``): steps, clock references, rows.

A case is a job built by real operations, each at a clock offset (seconds after the case
began, on the store's own clock: ``with_clock_offset``), then one more operation whose
outcome and resulting row are written down. Times in a row are written relative to the
clock of one step: ``At(0, 10)`` is "10 s after the store's now at step 0", ``OP(60)``
"60 s after the now of the operation itself".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = [
    "OP",
    "At",
    "Case",
    "Claim",
    "Commit",
    "Event",
    "Fail",
    "Heartbeat",
    "LeaseNotices",
    "Notice",
    "Purge",
    "Resolve",
    "Row",
    "Settle",
    "Step",
    "Try",
    "Ev",
]

LEASE = 10.0  # seconds: every claim's lease unless a case says otherwise
RETENTION = 60.0  # seconds: every finish's retention
RESOLVE_RETENTION = 90.0  # seconds: a resolution's own (kept only where no finish recorded one)
DANGLING = 30.0  # seconds: a purge's dangling_after


@dataclass(frozen=True)
class At:
    """A time: ``plus`` seconds after the now of step ``step`` (an index, or ``"op"``)."""

    step: int | str
    plus: float = 0.0


def OP(plus: float = 0.0) -> At:  # reads as a time in the table
    return At("op", plus)


@dataclass(frozen=True)
class Claim:
    at: float
    attempt: str = "a1"
    lease: float = LEASE
    fingerprint: str = "f1"
    version: str | None = "v1"
    watch: str | None = None  # a watch id: the claim carries a watch of that id


@dataclass(frozen=True)
class Heartbeat:
    at: float
    attempt: str = "a1"
    fence: int = 1
    lease: float = LEASE


@dataclass(frozen=True)
class Commit:
    at: float
    attempt: str = "a1"
    fence: int = 1
    result: Any = 1


@dataclass(frozen=True)
class Fail:
    at: float
    attempt: str = "a1"
    fence: int = 1
    retryable: bool = True


@dataclass(frozen=True)
class Resolve:
    at: float
    action: str  # reuse, redo, terminate
    force: bool = False
    result: Any = None  # reuse: the result given (None: the committed one)


@dataclass(frozen=True)
class LeaseNotices:
    at: float
    owner: str = "d1"
    lease: float = 30.0


@dataclass(frozen=True)
class Settle:
    at: float
    notice: str = "1.1"
    owner: str = "d1"
    status: str = "delivered"


@dataclass(frozen=True)
class Purge:
    at: float
    dry_run: bool = False


@dataclass(frozen=True)
class Event:
    """A ``token_refused`` event of ``attempt`` at ``fence`` appended to the job's log."""

    at: float
    attempt: str = "a0"
    fence: int = 1


Step: TypeAlias = (
    Claim | Heartbeat | Commit | Fail | Resolve | LeaseNotices | Settle | Purge | Event
)


@dataclass(frozen=True)
class Try:
    """An attempt's history entry: who, at which fence, how it ended (``running``: not yet)."""

    attempt: str
    fence: int
    outcome: str


@dataclass(frozen=True)
class Notice:
    """A notice of the job: the watch it answers ('' for a lapse notice), the fence and job
    state it reports, its delivery status, how often it was leased, and to whom."""

    watch: str
    fence: int
    state: str
    status: str = "pending"
    leased: int = 0
    owner: str | None = None


@dataclass(frozen=True)
class Ev:
    """An entry of the event log: kind, fence, detail (a resolution's action), when."""

    kind: str
    fence: int | None
    detail: str | None
    at: At
    lease_live: bool | None = None  # a resolution's: whether it found a live lease


@dataclass(frozen=True)
class Row:
    """The job as ``status`` reads it after the operation."""

    state: str
    fence: int
    owner: str | None = "a1"
    lease: At | None = None
    retain: At | None = None
    retryable: bool | None = None
    result: Any = None
    attempts: tuple[Try, ...] = ()
    notices: tuple[Notice, ...] = ()
    watchers: tuple[str, ...] = ()
    events: tuple[Ev, ...] = ()
    dropped: int = 0


@dataclass(frozen=True)
class Case:
    rule: str
    name: str
    given: tuple[Step, ...]
    op: Step
    outcome: Any  # claim and fenced writes: ok; lease: the leased (watch, state, fence);
    # purge: (purged, kept); settle and event: bool
    row: Row | None  # None: no job (never made, or purged)
    # Stores known to leave another row, each with why: (store, row, reason). Pinned like
    # the row itself, so a change on either side shows.
    differs: tuple[tuple[str, Row | None, str], ...] = ()

    def row_on(self, store: str) -> Row | None:
        """The row this case expects on ``store``."""
        return next((row for name, row, _ in self.differs if name == store), self.row)

    @property
    def id(self) -> str:
        return f"{self.rule}:{self.name}"
