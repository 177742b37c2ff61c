"""``check-retention``: does the retention outlive the engine's duplicate window?

Nothing is read from a store: retention is the ledger's configuration (``retention=``),
and the window follows from the engine's retry policy, the task timeout and a grace.
"""

from __future__ import annotations

import math
from datetime import timedelta

import click
from rich.table import Table
from rich.text import Text

from .._duplicate_window import DuplicateWindow, RetryPolicy
from ._main import ExitCode
from ._options import duration_option, output_option
from ._output import console, echo_json

__all__ = ["check_retention"]


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
    default="7d",
    show_default=True,
    help="The ledger's retention (Ledger(retention=…); its default is 7 days).",
)
@output_option
def check_retention(
    max_retry_times: int,
    interval_in_seconds: float,
    multiplier: float,
    task_timeout: timedelta,
    grace: timedelta,
    retention: timedelta,
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
        found.add_row("retention", _s(retention))
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
