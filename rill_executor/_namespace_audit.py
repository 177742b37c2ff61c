"""The namespace audit: a namespace's records checked against the invariants, and counted.

After a fault drill (or any incident) an operator wants to know, for a whole namespace:
did any key commit two results, are the recorded histories consistent, did every
completion notice report an outcome that won its fence and reach the engine once, which
jobs are left dangling, and what the recovery cost (attempts, takeovers, refused writes,
manual resolutions, orphan outputs). ``examine`` checks one job's record (no I/O);
``NamespaceAudit`` adds the jobs up into a ``DrillReport`` (what ``ledger.drill()`` and the
command ``audit`` answer). A broken invariant is a ``DrillFinding``; anything else is a count.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict

from ._housekeeping import OutputAudit
from ._records import AttemptOutcome, JobState, JobStatus
from ._rules.events import TOKEN_REFUSED
from ._rules.resolution import RESOLVED

__all__ = ["DrillFinding", "DrillReport", "NamespaceAudit", "examine"]

MAX_LISTED = 100  # keys listed per kind in a report; the counts are always whole


class _View(BaseModel):
    model_config = ConfigDict(frozen=True)


class DrillFinding(_View):
    """A broken invariant on one job's record."""

    key: str
    invariant: (
        str  # one_committed_result, fences_increase, one_owner, notices_match, delivered_once
    )
    detail: str


class DrillReport(_View):
    """A namespace after a drill: ``broken`` must be empty; the rest says what happened."""

    namespace: str
    store_time: datetime
    jobs: int
    states: dict[str, int]
    dangling: tuple[str, ...]  # processing, lease run out: the owner is gone (first 100)
    dangling_count: int
    attempts: int
    max_attempts: int  # the most attempts one job took
    takeovers: int  # attempts ended because their lease ran out and another took over
    refused_writes: int  # recorded refusals: completion tokens, attempts fenced off
    resolutions: int  # manual resolutions (reason and actor in each job's event log)
    notices_pending: int
    notices_unsent: int  # pending, given back unsent by every deliverer that leased them
    unsent: tuple[str, ...]  # "key: why" of those (first 100)
    notices_dropped: int
    notices_retried: int  # notices that needed more than one delivery
    orphan_outputs: int | None  # None: the ledger has no output store
    orphan_bytes: int | None
    broken: tuple[DrillFinding, ...]

    @property
    def ok(self) -> bool:
        return not self.broken


def _one_committed_result(status: JobStatus, retention: timedelta) -> list[str]:
    """Two successes while the first was still retained, with no operator's resolution
    between them (``--redo`` releases a result on the record): a result was replaced."""
    done = [a for a in status.attempts if a.outcome is AttemptOutcome.SUCCEEDED]
    resolved = [e.fence for e in status.events if e.kind == RESOLVED and e.fence is not None]
    return [
        f"attempt {b.attempt_id} (fence {b.fence}) committed while the result of fence"
        f" {a.fence} was retained"
        for a, b in itertools.pairwise(done)
        if a.ended_at is not None
        and b.started_at < a.ended_at + retention
        and not any(a.fence < fence <= b.fence for fence in resolved)
    ]


def _fences_increase(status: JobStatus) -> list[str]:
    fences = [a.fence for a in status.attempts]
    problems = []
    if len(set(fences)) != len(fences):
        repeated = sorted(f for f, n in Counter(fences).items() if n > 1)
        problems.append(f"fence {repeated[0]} was given to more than one attempt")
    if fences and max(fences) > status.fence:
        problems.append(f"an attempt holds fence {max(fences)}, above the job's {status.fence}")
    return problems


def _one_owner(status: JobStatus) -> list[str]:
    running = [a for a in status.attempts if a.outcome is AttemptOutcome.RUNNING]
    if status.state is JobState.PROCESSING and status.owner is None:
        return ["processing with no owner or lease"]
    if len(running) > 1:
        return [f"{len(running)} attempts are running at once"]
    if running and status.state is not JobState.PROCESSING:
        return [f"attempt {running[0].attempt_id} is running on a {status.state.value} job"]
    return []


def _notices_match(status: JobStatus) -> list[str]:
    """Every notice reports the outcome that won its fence: an attempt's, or a resolution's."""
    won = {a.fence: a.outcome.value for a in status.attempts}
    resolved = {e.fence for e in status.events if e.kind == RESOLVED}
    problems = []
    for n in status.notices:
        if n.state is JobState.PROCESSING:
            continue  # a lapse notice (the owner's lease ran out), not an outcome
        if n.fence > status.fence:
            problems.append(f"notice {n.id} reports fence {n.fence}, above the job's")
        elif n.fence not in resolved and won.get(n.fence) != n.state.value:
            problems.append(
                f"notice {n.id} reports {n.state.value} for fence {n.fence}, whose attempt"
                f" ended {won.get(n.fence, 'nowhere')}"
            )
    return problems


def _delivered_once(status: JobStatus) -> list[str]:
    """One outcome delivered twice to the same dispatch (its watch and target): a task the
    engine dispatched again (a redo) is owed the outcome once more, at its new target."""
    sent = Counter(
        (n.watch, json.dumps(n.target, sort_keys=True, default=str), n.fence)
        for n in status.notices
        if n.status == "delivered" and n.state is not JobState.PROCESSING
    )
    return [
        f"the outcome of fence {fence} was delivered {count} times to {watch}"
        for (watch, _, fence), count in sent.items()
        if count > 1
    ]


def examine(status: JobStatus, retention: timedelta) -> list[DrillFinding]:
    """The invariants ``status`` breaks (none on a record only this library wrote)."""
    checks = {
        "one_committed_result": _one_committed_result(status, retention),
        "fences_increase": _fences_increase(status),
        "one_owner": _one_owner(status),
        "notices_match": _notices_match(status),
        "delivered_once": _delivered_once(status),
    }
    return [
        DrillFinding(key=status.key, invariant=name, detail=detail)
        for name, details in checks.items()
        for detail in details
    ]


class NamespaceAudit:
    """Adds up the jobs of a namespace, one status at a time."""

    def __init__(self, namespace: str, retention: timedelta) -> None:
        self.namespace = namespace
        self.retention = retention
        self.states: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()
        self.dangling: list[str] = []
        self.unsent: list[str] = []
        self.broken: list[DrillFinding] = []
        self.orphans: tuple[int, int] | None = None
        self.store_time: datetime | None = None

    def add(self, status: JobStatus) -> None:
        self.states[status.state.value] += 1
        self.store_time = status.store_time
        owner = status.owner
        if owner is not None and owner.lease_left <= timedelta(0):
            self.counts["dangling"] += 1
            if len(self.dangling) < MAX_LISTED:
                self.dangling.append(status.key)
        outcomes = Counter(a.outcome for a in status.attempts)
        self.counts["attempts"] += len(status.attempts)
        self.counts["max_attempts"] = max(self.counts["max_attempts"], len(status.attempts))
        self.counts["takeovers"] += outcomes[AttemptOutcome.EXPIRED]
        self.counts["refused"] += outcomes[AttemptOutcome.FENCED]
        self.counts["refused"] += sum(e.kind == TOKEN_REFUSED for e in status.events)
        self.counts["resolutions"] += sum(e.kind == RESOLVED for e in status.events)
        for n in status.notices:
            self.counts["notices_" + n.status] += 1
            self.counts["notices_retried"] += n.attempts > 1
            if n.unsent:
                self.counts["notices_unsent"] += 1
                if len(self.unsent) < MAX_LISTED:
                    self.unsent.append(f"{status.key}: {n.detail}")
        self.broken.extend(examine(status, self.retention))

    def add_outputs(self, audits: list[OutputAudit]) -> None:
        orphans = [e for audit in audits for e in audit.orphans if e.exists]
        self.orphans = (len(orphans), sum(e.size or 0 for e in orphans))

    def report(self, store_time: datetime) -> DrillReport:
        c = self.counts
        return DrillReport(
            namespace=self.namespace,
            store_time=self.store_time or store_time,
            jobs=sum(self.states.values()),
            states=dict(sorted(self.states.items())),
            dangling=tuple(self.dangling),
            dangling_count=c["dangling"],
            attempts=c["attempts"],
            max_attempts=c["max_attempts"],
            takeovers=c["takeovers"],
            refused_writes=c["refused"],
            resolutions=c["resolutions"],
            notices_pending=c["notices_pending"],
            notices_unsent=c["notices_unsent"],
            unsent=tuple(self.unsent),
            notices_dropped=c["notices_dropped"],
            notices_retried=c["notices_retried"],
            orphan_outputs=None if self.orphans is None else self.orphans[0],
            orphan_bytes=None if self.orphans is None else self.orphans[1],
            broken=tuple(self.broken),
        )
