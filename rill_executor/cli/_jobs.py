"""``status``, ``attempts`` and ``timeline``: one job and its whole history, read in one
round trip (``timeline`` draws it as SVG); ``jobs``: a namespace's jobs, a page (one round
trip on SQL) at a time."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import click

from .. import JobState, JobStatus, Ledger
from ..reports import JobSummary, is_resolution
from ._exit import CliError, ExitCode
from ._options import duration_option, job_options, nothing_found, open_ledger
from ._output import (
    attempt_details,
    attempts_table,
    console,
    echo_json,
    events_table,
    is_dangling,
    job_table,
    jobs_table,
    notices_table,
)
from ._timeline import timeline_svg

__all__ = ["attempts", "found_job", "handler_option", "jobs", "status", "timeline"]

handler_option = _handler = click.option(
    "--handler",
    metavar="NAME",
    help="A decorated handler's name: its jobs are stored as NAME/KEY (idempotent(name=…),"
    " by default the handler's qualified name).",
)


def found_job(ledger: Ledger, key: str, handler: str | None) -> JobStatus:
    found = ledger.status(key, handler=handler)
    if found is not None:
        return found
    scoped = f"{handler}/{key}" if handler else key
    hint = (
        "" if handler else "; a decorated handler's job is stored as NAME/KEY: pass --handler NAME"
    )
    raise CliError(
        f"no job {scoped!r} in namespace {ledger.namespace!r} (check --namespace{hint})",
        ExitCode.NOT_FOUND,
    )


@click.command()
@click.argument("key")
@_handler
@job_options
def status(key: str, handler: str | None, store: str, namespace: str, output: str) -> None:
    """The job of KEY: state, owner and lease, result or error, every attempt, the
    completion notices and their delivery."""
    with open_ledger(store, namespace) as ledger:
        job = found_job(ledger, key, handler)
    if output == "json":
        echo_json(job.model_dump(mode="json") | {"dangling": is_dangling(job)})
        return
    out = console()
    out.print(job_table(job))
    out.print(attempts_table(job))
    if job.notices:
        out.print(notices_table(job.notices))
    if job.events or job.events_dropped:
        out.print(events_table(job.events, job.events_dropped))


@click.command()
@click.argument("key")
@_handler
@job_options
def attempts(key: str, handler: str | None, store: str, namespace: str, output: str) -> None:
    """Every attempt at KEY: its fence, times, outcome and error, what it answered (the
    engine's dispatch) and the outputs it wrote, committed or not."""
    with open_ledger(store, namespace) as ledger:
        job = found_job(ledger, key, handler)
    if output == "json":
        dumped = job.model_dump(mode="json")
        echo_json(
            {name: dumped[name] for name in ("namespace", "key", "state", "fence")}
            | {name: dumped[name] for name in ("attempts", "events", "events_dropped")}
        )
        return
    out = console()
    state = "dangling" if is_dangling(job) else job.state.value
    out.print(f"{job.key} ({job.namespace}): {state}, fence {job.fence}", soft_wrap=True)
    for attempt in job.attempts:
        for line in attempt_details(attempt):
            out.print(line, soft_wrap=True)


@click.command()
@click.argument("key")
@_handler
@click.option(
    "--svg",
    "path",
    metavar="FILE",
    default="-",
    show_default=True,
    help="Where to write the picture; - for stdout (-o is the format of messages).",
)
@job_options
def timeline(
    key: str, handler: str | None, path: str, store: str, namespace: str, output: str
) -> None:
    """KEY's job as an SVG picture: each attempt a bar on the store's time axis, with
    takeovers, fenced and refused writes, the commit, resolutions and notices marked."""
    target = None if path == "-" else Path(path)
    if target is not None and not target.parent.is_dir():
        raise CliError(
            f"no folder {str(target.parent)!r} to write {path!r} in; nothing was read or"
            " written (pass --svg FILE in a folder that exists, or --svg - for stdout)",
            ExitCode.USAGE,
        )
    with open_ledger(store, namespace) as ledger:
        job = found_job(ledger, key, handler)
    picture = timeline_svg(job)
    if target is None:
        click.echo(picture, nl=False)
        return
    try:
        target.write_text(picture, encoding="utf-8")
    except OSError as exc:
        raise CliError(
            f"cannot write {path!r}: {exc.strerror or exc}; pass --svg FILE somewhere"
            " writable, or --svg - for stdout",
            ExitCode.USAGE,
        ) from exc
    drawn = {"attempts": len(job.attempts), "notices": len(job.notices), "events": len(job.events)}
    if output == "json":
        echo_json({"file": path, "namespace": job.namespace, "key": job.key} | drawn)
        return
    counts = ", ".join(f"{n} {name}" for name, n in drawn.items())
    console().print(f"wrote {path}: {job.key} ({job.state.value}), {counts}", soft_wrap=True)


def _states(
    states: tuple[str, ...], failed: bool, resolved: bool, dangling: bool
) -> tuple[str, ...]:
    """The states every filter given allows: --failed and --resolved mean failed, --dangling
    processing. Filters no job can meet together are refused (exit 2)."""
    allowed = set(states) if states else {s.value for s in JobState}
    implied = {
        "--failed": (failed, "failed"),
        "--resolved": (resolved, "failed"),
        "--dangling": (dangling, "processing"),
    }
    given = [f"--state {s}" for s in states]
    for flag, (on, state) in implied.items():
        if on:
            allowed &= {state}
            given.append(flag)
    if failed and resolved:
        allowed = set()
    if not allowed:
        raise CliError(
            f"no job can meet {' and '.join(given)} together: every filter given must hold;"
            " drop one",
            ExitCode.USAGE,
        )
    return () if len(allowed) == len(JobState) else tuple(sorted(allowed))


def _kept(failed: bool, resolved: bool) -> Callable[[JobSummary], bool]:
    """Which listed jobs to show: --failed only handlers' failures, --resolved only an
    operator's redo or terminate."""
    if failed:
        return lambda job: not is_resolution(job.error)
    if resolved:
        return lambda job: is_resolution(job.error)
    return lambda job: True


@click.command()
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([s.value for s in JobState]),
    help="Only jobs in this state (repeat for several).",
)
@click.option(
    "--failed",
    is_flag=True,
    help="Only jobs a handler failed (not those an operator redid or terminated).",
)
@click.option(
    "--resolved",
    is_flag=True,
    help="Only jobs an operator redid (waiting for the next claim) or terminated.",
)
@click.option(
    "--dangling",
    is_flag=True,
    help="Only processing jobs whose lease has run out: the owner died or is stuck.",
)
@duration_option("--older-than", help="Only jobs not updated for this long, e.g. 1h (0s: any job).")
@click.option("--result-version", metavar="VERSION", help="Only jobs of this result version.")
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="Jobs a page."
)
@click.option("--cursor", metavar="CURSOR", help="Go on from a previous page's cursor.")
@click.option("--all", "every", is_flag=True, help="Follow the cursor to the last page.")
@job_options
def jobs(
    states: tuple[str, ...],
    failed: bool,
    resolved: bool,
    dangling: bool,
    older_than: timedelta | None,
    result_version: str | None,
    limit: int,
    cursor: str | None,
    every: bool,
    store: str,
    namespace: str,
    output: str,
) -> None:
    """The namespace's jobs, a page at a time, with filters: by state, failed, resolved,
    dangling, older than, result version. Every filter given must hold."""
    filters: dict[str, Any] = {
        "state": _states(states, failed, resolved, dangling) or None,
        "dangling": dangling,
        "older_than": older_than,
        "result_version": result_version,
        "limit": limit,
    }
    kept, thinned = _kept(failed, resolved), failed or resolved
    with open_ledger(store, namespace) as ledger:
        page = ledger.jobs(after=cursor, **filters)
        found = [job for job in page.jobs if kept(job)]
        # a page that --failed or --resolved thinned goes on until it is full again
        while page.cursor is not None and (every or (thinned and len(found) < limit)):
            page = ledger.jobs(after=page.cursor, **filters)
            found += [job for job in page.jobs if kept(job)]
        if not found and cursor is None and not ledger.jobs(limit=1).jobs:
            raise nothing_found(namespace, "nothing to list", ledger.store)
    if output == "json":
        found.sort(key=lambda job: (job.updated_at, job.key))
        echo_json(
            {
                "jobs": [job.model_dump(mode="json") for job in found],
                "cursor": page.cursor,
                "store_time": page.store_time.isoformat(),
            }
        )
        return
    out = console()
    out.print(jobs_table(found, out.width if out.is_terminal else None))
    more = f"; next page: --cursor {page.cursor}" if page.cursor else ""
    out.print(f"{len(found)} job{'s' if len(found) != 1 else ''}{more}", soft_wrap=True)
