"""Rendering: rich tables (colour only on a terminal, ``NO_COLOR`` respected) or JSON.

rich draws the tables: it wraps long keys inside their cells instead of cutting them,
detects whether stdout is a terminal, and honours ``NO_COLOR``. Stored text is shown
visibly (``_visible``): on the console, in warnings and in JSON.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import JobState, JobStatus
from ..reports import AttemptInfo, EventInfo, JobSummary, NoticeInfo
from ._visible import VisibleConsole, visible, visible_json, visible_text

__all__ = [
    "attempt_details",
    "attempts_table",
    "console",
    "echo_json",
    "events_table",
    "is_dangling",
    "job_state",
    "job_table",
    "jobs_table",
    "shortened",
    "notices_table",
    "table",
    "warn",
    "when",
]

STATE_STYLE = {
    JobState.SUCCEEDED: "green",
    JobState.FAILED: "red",
    JobState.PROCESSING: "yellow",
}
OUTCOME_STYLE = {
    "succeeded": "green",
    "failed": "red",
    "running": "yellow",
    "expired": "magenta",
    "fenced": "magenta",
    "abandoned": "magenta",
    "delivered": "green",
    "dropped": "red",
    "pending": "yellow",
}


def console() -> Console:
    """The console every command prints with: it shows stored text visibly (``_visible``)."""
    # Not a terminal (a pipe, a file): wide enough that a table rarely folds.
    found = VisibleConsole()
    return found if found.is_terminal else VisibleConsole(width=160)


def warn(message: str) -> None:
    """One line on stderr, whatever the output format: never inside ``-o json``."""
    click.echo(f"warning: {visible(' '.join(message.split()))}", err=True)


def echo_json(data: Any) -> None:
    """``data`` as JSON, each string exact; unprintable characters (a lone surrogate, an
    escape sequence, a bidi override) as ``\\u`` escapes, never raw."""
    click.echo(visible_json(json.dumps(data, indent=2, ensure_ascii=False, default=str)))


def table(*columns: str, title: str | None = None) -> Table:
    found = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", title_style="bold")
    for column in columns:
        found.add_column(column, overflow="fold")
    return found


def when(at: datetime | None) -> str:
    return "-" if at is None else at.isoformat(sep=" ", timespec="milliseconds")


def seconds(span: timedelta) -> str:
    return f"{span.total_seconds():.3f}s"


def styled(value: str, style: str | None = None) -> Text:
    # Visible already here, so that a table measures the cell as it is shown.
    return visible_text(Text(value, style=style or OUTCOME_STYLE.get(value, "")))


def compact(value: Any) -> str:
    return "-" if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def owner_line(status: JobStatus) -> Text:
    owner = status.owner
    if owner is None:
        return Text("-")
    line = f"attempt {owner.attempt_id}, fence {owner.fence}, since {when(owner.since)}, "
    if owner.lease_left.total_seconds() > 0:
        return Text(line + f"lease {seconds(owner.lease_left)} left", style="yellow")
    return Text(
        line + f"lease ran out {seconds(-owner.lease_left)} ago: dangling", style="bold red"
    )


def is_dangling(status: JobStatus) -> bool:
    """Processing, its owner's lease run out: ``jobs`` and ``status`` say "dangling"."""
    owner = status.owner
    return owner is not None and owner.lease_left.total_seconds() <= 0


def job_state(status: JobStatus) -> Text:
    if is_dangling(status):
        return styled("dangling", "bold red")
    return styled(status.state.value, STATE_STYLE[status.state])


def job_table(status: JobStatus) -> Table:
    found = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
    found.add_column(style="bold")
    found.add_column(overflow="fold")
    error = status.error
    rows: list[tuple[str, str | Text]] = [
        ("namespace", status.namespace),
        ("key", status.key),
        ("state", job_state(status)),
        ("fence", str(status.fence)),
        ("result version", status.result_version or "-"),
        ("fingerprint", status.fingerprint),
        ("owner", owner_line(status)),
        ("result", compact(status.result)),
        (
            "error",
            "-"
            if error is None
            else styled(
                f"{error.type}: {error.message} ({'retryable' if error.retryable else 'terminal'})",
                "red",
            ),
        ),
        ("created", when(status.created_at)),
        ("updated", when(status.updated_at)),
        ("finished", when(status.finished_at)),
        ("retain until", when(status.retain_until)),
        ("store time", when(status.store_time)),
    ]
    for ref in status.outputs:
        rows.append(("output", f"{ref.name}: {ref.uri} ({ref.size} bytes, sha256 {ref.sha256})"))
    for watch, target in status.watchers.items():
        rows.append(("waiting", f"{watch} -> {compact(target)}"))
    for name, value in rows:
        found.add_row(name, value)
    return found


def attempts_table(status: JobStatus) -> Table:
    found = table(
        "fence", "attempt", "started", "ended", "outcome", "error",
        title=f"attempts ({len(status.attempts)})",
    )  # fmt: skip
    for a in status.attempts:
        error = "-" if a.error is None else f"{a.error.type}: {a.error.message}"
        found.add_row(
            str(a.fence),
            a.attempt_id,
            when(a.started_at),
            when(a.ended_at),
            styled(a.outcome.value),
            error,
        )
    return found


def attempt_details(attempt: AttemptInfo) -> list[Text]:
    """One attempt in full, a line each: what it answered, its error, its outputs."""
    lines = [
        Text.assemble(
            (f"fence {attempt.fence}", "bold"),
            f"  attempt {attempt.attempt_id}  ",
            styled(attempt.outcome.value),
            f"  {when(attempt.started_at)} -> {when(attempt.ended_at)}",
        ),
        Text(f"  origin  {compact(attempt.origin)}"),
    ]
    if attempt.trace is not None:
        lines.append(Text(f"  trace   {attempt.trace}"))
    if attempt.error is not None:
        error = attempt.error
        kind = "retryable" if error.retryable else "terminal"
        lines.append(Text(f"  error   {error.type}: {error.message} ({kind})", style="red"))
    for e in attempt.events:
        by = f" by {e.actor}" if e.actor else ""
        lines.append(Text(f"  event   {e.kind} {e.detail or ''}{by}: {e.reason or '-'}"))
    for o in attempt.outputs:
        state = "committed" if o.committed else "uncommitted"
        size = "not written" if o.size is None else f"{o.size} bytes, sha256 {o.sha256}"
        lines.append(Text(f"  output  {o.name} ({state}) {o.uri} ({size})"))
    return lines


def events_table(events: tuple[EventInfo, ...], dropped: int = 0) -> Table:
    """The job's event log: refused tokens, resolutions (who, why, the state before), and
    how many reported events it dropped once full."""
    found = table("at", "event", "by", "attempt", "fence", "reason", "detail", title="events")
    if dropped:
        found.caption = f"{dropped} later reported events dropped: the log keeps its first"
    for e in events:
        before = (e.data or {}).get("before")
        detail = e.detail or "-"
        if before is not None:
            forced = ", forced" if (e.data or {}).get("force") else ""
            detail += f" (was {before['state']} at fence {before['fence']}{forced})"
        found.add_row(
            when(e.at),
            styled(e.kind, "magenta"),
            e.actor or "-",
            e.attempt_id or "-",
            "-" if e.fence is None else str(e.fence),
            e.reason or "-",
            detail,
        )
    return found


def notices_table(notices: tuple[NoticeInfo, ...]) -> Table:
    found = table(
        "notice",
        "watch",
        "fence",
        "reports",
        "status",
        "tries",
        "due",
        "last answer",
        "settled",
        title=f"notices ({len(notices)})",
    )
    for n in notices:
        answer = " ".join(part for part in (n.outcome, n.detail) if part) or "-"
        found.add_row(
            n.id,
            n.watch,
            str(n.fence),
            styled(n.state.value, STATE_STYLE[n.state]),
            styled(n.status),
            str(n.attempts),
            when(n.due),
            answer,
            when(n.settled_at),
        )
    return found


def shortened(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: its middle replaced by '…', so that both a
    key's start and its end (often the version) stay readable."""
    if len(text) <= width:
        return text
    head = width // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


_WIDE = 120  # narrower terminals get the columns an on-call engineer reads first


def jobs_table(jobs: list[JobSummary], width: int | None = None) -> Table:
    """The jobs, oldest update first. On a terminal (``width``) a long key is shortened in
    the middle, a state never folds, and under 120 columns only key, state, fence, updated
    and error are shown (``-o json`` has everything)."""
    narrow = width is not None and width < _WIDE
    columns = ["key", "state", "fence", "updated"]
    columns += ["error"] if narrow else ["version", "owner", "error", "notices"]
    found = Table(box=box.SIMPLE_HEAD)
    for column in columns:
        found.add_column(column, no_wrap=column != "error", overflow="fold")
    room = None if width is None else max(12, width // 3 if narrow else width // 4)
    for job in sorted(jobs, key=lambda job: (job.updated_at, job.key)):
        cells = _job_cells(job)
        cells["key"] = job.key if room is None else shortened(job.key, room)
        if narrow:
            cells["updated"] = job.updated_at.strftime("%m-%d %H:%M:%S")
        found.add_row(*(cells[column] for column in columns))
    return found


def _job_cells(job: JobSummary) -> dict[str, str | Text]:
    state = (
        styled("dangling", "bold red")
        if job.dangling
        else styled(job.state.value, STATE_STYLE[job.state])
    )
    owner = "-"
    if job.owner is not None:
        left = job.owner.lease_left
        owner = f"{job.owner.attempt_id} (" + (
            f"lease {seconds(left)} left)" if left.total_seconds() > 0
            else f"lease ran out {seconds(-left)} ago)"
        )  # fmt: skip
    return {
        "state": state,
        "fence": str(job.fence),
        "version": job.result_version or "-",
        "updated": when(job.updated_at),
        "owner": owner,
        "error": "-" if job.error is None else f"{job.error.type}: {job.error.message}",
        "notices": _notices_cell(job),
    }


def _notices_cell(job: JobSummary) -> str:
    if not job.pending_notices:
        return "-"
    unsent = f" ({job.unsent_notices} no deliverer may send)" if job.unsent_notices else ""
    return f"{job.pending_notices} pending{unsent}"
