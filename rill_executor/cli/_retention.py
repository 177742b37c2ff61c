"""``check-retention``: does the retention outlive the engine's duplicate window?

The window follows from the engine's retry policy, the task timeout and a grace. The
retention is the ledger's configuration (``retention=``): given with ``--retention``, or
read from a store, where every finished job records it (``retain_until - finished_at``).
"""

from __future__ import annotations

import math
from datetime import timedelta

import click
from rich.table import Table
from rich.text import Text

from .. import DuplicateWindow, Ledger, RetryPolicy
from ._exit import CliError, ExitCode
from ._options import duration_option, open_ledger, output_option
from ._output import console, echo_json

__all__ = ["check_retention", "recorded_retentions"]


_DEFAULT = timedelta(days=7)
_SAMPLE = 1000


def recorded_retentions(ledger: Ledger) -> list[timedelta]:
    """The retentions the first page of the namespace's finished jobs recorded. A record a
    redo released (``retain_until = finished_at``, waiting for its next claim) binds nothing
    and records no retention: it does not count."""
    page = ledger.jobs(state=("succeeded", "failed"), limit=_SAMPLE)
    spans = [
        job.retain_until - job.finished_at
        for job in page.jobs
        if job.retain_until is not None and job.finished_at is not None
    ]
    return [span for span in spans if span > timedelta(0)]


def _recorded(store: str, namespace: str | None) -> tuple[timedelta, str]:
    """The shortest retention recorded by the first page of the namespace's finished jobs."""
    if namespace is None:
        raise CliError(
            "reading the retention from --store needs --namespace (or pass --retention)",
            ExitCode.USAGE,
        )
    with open_ledger(store, namespace) as ledger:
        spans = recorded_retentions(ledger)
    if not spans:
        raise CliError(
            f"namespace {namespace!r} has no finished job to read the retention from (a"
            " record a redo released records none); pass --retention",
            ExitCode.NOT_FOUND,
        )
    return min(spans), f"the shortest of {len(spans)} finished jobs in {namespace!r}"


def _s(span: timedelta | float) -> str:
    value = span.total_seconds() if isinstance(span, timedelta) else span
    return f"{value:g}s" + (f" ({value / 86400:.2f} days)" if value >= 86400 else "")


@click.command("check-retention")
@click.option(
    "--max-retry-times",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="The task's retry.maxRetryTimes: retries after the first attempt.",
)
@click.option(
    "--interval-in-seconds",
    type=click.FloatRange(min=0),
    default=0,
    show_default=True,
    help="The task's retry.intervalInSeconds.",
)
@click.option(
    "--multiplier",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="The task's retry.multiplier: retry k waits int(interval * multiplier**k) seconds.",
)
@duration_option(
    "--task-timeout",
    required=True,
    help="How long one attempt may run before the engine retries it"
    " (timeline.timeoutInSeconds for async tasks), e.g. 10m.",
)
@duration_option(
    "--grace",
    default="0",
    show_default=True,
    help="Slack for late callbacks and operators' redo, e.g. 1h.",
)
@duration_option(
    "--retention",
    help="The ledger's retention (Ledger(retention=…)). Without it: the shortest one the"
    " namespace's finished jobs recorded, with --store; else the ledger's default, 7 days.",
)
@click.option(
    "--store",
    envvar="RILL_STORE",
    show_envvar=True,
    metavar="URL",
    help="Read the retention the namespace's jobs recorded (when --retention is not given).",
)
@click.option("-n", "--namespace", envvar="RILL_NAMESPACE", show_envvar=True)
@output_option
def check_retention(
    max_retry_times: int,
    interval_in_seconds: float,
    multiplier: float,
    task_timeout: timedelta,
    grace: timedelta,
    retention: timedelta | None,
    store: str | None,
    namespace: str | None,
    output: str,
) -> None:
    """Compute the window in which the engine may still send a duplicate of a task, and
    check that the ledger's retention covers it (exit 1 if it does not)."""
    window = DuplicateWindow(
        RetryPolicy(max_retry_times, interval_in_seconds, multiplier),
        task_timeout=task_timeout,
        grace=grace,
    )
    length, delays = window.length, window.delays
    source = "given"
    if retention is None and store is not None:
        retention, source = _recorded(store, namespace)
    elif retention is None:
        retention, source = _DEFAULT, "the ledger's default"
    covered = retention >= length
    need = math.ceil(length.total_seconds())
    if output == "json":
        echo_json(
            {
                "attempts": window.retry.total_attempts,
                "task_timeout_seconds": task_timeout.total_seconds(),
                "retry_delays_seconds": delays,
                "grace_seconds": grace.total_seconds(),
                "window_seconds": length.total_seconds(),
                "retention_seconds": retention.total_seconds(),
                "retention_from": source,
                "covered": covered,
                "margin_seconds": (retention - length).total_seconds(),
            }
        )
    else:
        found = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
        found.add_column(style="bold")
        found.add_column(overflow="fold")
        timeouts = task_timeout * window.retry.total_attempts
        shown = ", ".join(f"{d:g}" for d in delays[:10]) + (", …" if len(delays) > 10 else "")
        found.add_row(
            "attempts x timeout",
            f"{window.retry.total_attempts} x {_s(task_timeout)} = {_s(timeouts)}",
        )
        found.add_row("retry delays", f"{shown or 'none'} = {_s(math.fsum(delays))}")
        found.add_row("grace", _s(grace))
        found.add_row("duplicate window", _s(length))
        found.add_row("retention", f"{_s(retention)} ({source})")
        out = console()
        out.print(found)
        if covered:
            out.print(
                Text(f"covered: {_s(retention - length)} to spare", style="green"),
            )
        else:
            out.print(
                Text(
                    f"NOT covered: a duplicate may come {_s(length - retention)} after the"
                    f" record is collected and run the work again. Set retention to at least"
                    f" {need}s (Ledger(retention=timedelta(seconds={need}))) or shorten the"
                    " engine's retries.",
                    style="bold red",
                )
            )
    if not covered:
        click.get_current_context().exit(int(ExitCode.CHECK_FAILED))
