"""``gc``: delete a namespace's records past retention, batch by batch (``ledger.purge``),
and with ``--outputs-url`` first collect its orphan output objects (``collect_orphans``).

Orphans are collected before the records go: an object is only ever deleted when its job's
record proves it an orphan, so a purged job's objects could no longer be accounted for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import click
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from .. import Ledger
from ..limits import MAX_PURGE_BATCH
from ..reports import CollectReport, PurgeReport
from ._options import duration_option, job_options, nothing_found, refuse_missing_file
from ._output import console, echo_json

__all__ = ["gc"]

_DEFAULT_RETENTION = timedelta(days=7)  # the ledger's default


def _purge_pages(
    ledger: Ledger, batch: int, dry_run: bool, dangling_after: timedelta, pause: timedelta
) -> Iterator[PurgeReport]:
    cursor = None
    while True:
        report = ledger.purge(
            limit=batch, after=cursor, dry_run=dry_run, dangling_after=dangling_after
        )
        yield report
        if (cursor := report.cursor) is None:
            return
        time.sleep(pause.total_seconds())  # leaves the store to the live claims a while


@contextmanager
def _progress(shown: bool, dry_run: bool) -> Iterator[Callable[[int], None]]:
    """A live count on a terminal; nothing on a pipe or with -o json."""
    if not shown:
        yield lambda purged: None
        return
    verb = "counted" if dry_run else "deleted"
    columns = (SpinnerColumn(), TextColumn(f"{{task.completed}} records {verb}"))
    with Progress(*columns, TimeElapsedColumn(), console=console(), transient=True) as bar:
        task = bar.add_task("gc", total=None)
        yield lambda purged: bar.advance(task, purged)


@click.command()
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@click.option(
    "--batch",
    type=click.IntRange(1, MAX_PURGE_BATCH),
    default=1000,
    show_default=True,
    help="Records deleted per store call: small batches never hold up live claims.",
)
@duration_option(
    "--pause",
    default="0",
    show_default="0s",
    help="Wait this long between batches (e.g. 0.005 with --batch 100), so that claims"
    " running beside the collection keep their tail latency.",
)
@duration_option(
    "--dangling-after",
    default=str(int(_DEFAULT_RETENTION.total_seconds())),
    show_default="7d, the ledger's default retention",
    help="Also delete a processing job whose lease ran out this long ago (its owner died).",
)
@click.option(
    "--outputs-url",
    envvar="RILL_OUTPUTS",
    show_envvar=True,
    metavar="URL",
    help="The output store (e.g. s3://bucket/prefix): first delete the namespace's orphan"
    " output objects.",
)
@duration_option(
    "--outputs-grace",
    default="3600",
    show_default="1h",
    help="Keep orphan objects younger than this (with --outputs-url).",
)
@job_options
def gc(
    dry_run: bool,
    batch: int,
    pause: timedelta,
    dangling_after: timedelta,
    outputs_url: str | None,
    outputs_grace: timedelta,
    store: str,
    namespace: str,
    output: str,
) -> None:
    """Delete the namespace's records past retention: finished jobs whose retention ran
    out, and processing jobs whose lease ran out --dangling-after ago. A record with a
    completion notice still to deliver is kept; a deleted key's fences go on from its
    record's. Batches of --batch records, one store call each, until the namespace is done."""
    refuse_missing_file(store)
    collected: CollectReport | None = None
    purged = kept = batches = 0
    last: PurgeReport | None = None
    shown = output == "text" and console().is_terminal
    with Ledger(store, namespace=namespace, outputs=outputs_url) as ledger:
        if outputs_url is not None and not dry_run:
            collected = ledger.collect_orphans(grace=outputs_grace)
        with _progress(shown, dry_run) as advance:
            for last in _purge_pages(ledger, batch, dry_run, dangling_after, pause):
                purged, kept, batches = purged + last.purged, kept + last.kept_notices, batches + 1
                advance(last.purged)
        if purged == kept == 0 and not collected and not ledger.jobs(limit=1).jobs:
            raise nothing_found(namespace, "nothing to collect", ledger.store)
    assert last is not None
    summary: dict[str, Any] = {
        "namespace": namespace,
        "dry_run": dry_run,
        "purged": purged,
        "kept_notices": kept,
        "batches": batches,
        "store_time": last.store_time.isoformat(),
        "outputs": None if collected is None else _outputs_summary(collected),
    }
    if output == "json":
        echo_json(summary)
        return
    _print(summary, dry_run, outputs_url is not None)


def _outputs_summary(report: CollectReport) -> dict[str, int]:
    return {
        "deleted": len(report.deleted),
        "kept_young": len(report.kept_young),
        "unknown": len(report.unknown),
        "jobs": report.jobs,
    }


def _print(summary: dict[str, Any], dry_run: bool, outputs: bool) -> None:
    out = console()
    verb = "would delete" if dry_run else "deleted"
    records = "record" if summary["purged"] == 1 else "records"
    out.print(
        f"{summary['namespace']}: {verb} {summary['purged']} {records} past retention"
        f" in {summary['batches']} batch{'es' if summary['batches'] != 1 else ''}",
        soft_wrap=True,
    )
    if summary["kept_notices"]:
        out.print(
            f"kept {summary['kept_notices']} past retention: a completion notice is still to"
            " deliver (see `rill-executor deliver`)",
            soft_wrap=True,
        )
    if outputs and dry_run:
        out.print("orphan outputs: not collected in a dry run", soft_wrap=True)
    elif summary["outputs"] is not None:
        found = summary["outputs"]
        out.print(
            f"orphan outputs: deleted {found['deleted']}, kept {found['kept_young']} inside"
            f" the grace, {found['unknown']} not this store's (kept)",
            soft_wrap=True,
        )
