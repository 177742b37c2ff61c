"""``audit``: the drill report of a namespace — every job's record checked against the
invariants, and the recovery counted (see ``rill_executor._namespace_audit``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from .. import Ledger
from ..reports import DrillReport
from ._exit import CliError, ExitCode
from ._options import job_options, nothing_found, refuse_missing_file
from ._output import console, echo_json, styled, table, when

__all__ = ["audit"]


def _counts(report: DrillReport) -> list[tuple[str, str]]:
    states = ", ".join(f"{n} {state}" for state, n in report.states.items()) or "none"
    rows = [
        ("jobs", f"{report.jobs} ({states})"),
        ("dangling", str(report.dangling_count)),
        ("attempts", f"{report.attempts} (at most {report.max_attempts} for one job)"),
        ("takeovers", str(report.takeovers)),
        ("refused writes", str(report.refused_writes)),
        ("manual resolutions", str(report.resolutions)),
        ("notices pending", str(report.notices_pending)),
        ("notices no deliverer may send", str(report.notices_unsent)),
        ("notices dropped", str(report.notices_dropped)),
        ("notices sent more than once", str(report.notices_retried)),
    ]
    if report.orphan_outputs is None:
        rows.append(("orphan outputs", "not checked (no --outputs-url)"))
    else:
        rows.append(("orphan outputs", f"{report.orphan_outputs} ({report.orphan_bytes} bytes)"))
    return rows


def _print(report: DrillReport) -> None:
    out = console()
    summary = table("", "", title=f"namespace {report.namespace} at {when(report.store_time)}")
    summary.show_header = False
    for name, value in _counts(report):
        summary.add_row(name, value)
    out.print(summary)
    if report.dangling:
        out.print("dangling: " + ", ".join(report.dangling))
    for unsent in report.unsent:
        out.print(styled("unsent notice of " + unsent, "yellow"))
    if not report.broken:
        out.print(styled("every invariant holds", "green"))
        return
    broken = table("key", "invariant", "detail", title="broken invariants")
    for finding in report.broken:
        broken.add_row(finding.key, styled(finding.invariant, "red"), finding.detail)
    out.print(broken)


@contextmanager
def _progress(shown: bool) -> Iterator[Callable[[int], None]]:
    """A live count of the jobs read, on stderr when it is a terminal: the report on
    stdout stays whole, and a pipe or -o json gets no progress at all."""
    err = Console(stderr=True)
    if not (shown and err.is_terminal):
        yield lambda read: None
        return
    columns = (SpinnerColumn(), TextColumn("{task.completed} jobs audited"))
    with Progress(*columns, TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("audit", total=None)
        yield lambda read: bar.advance(task, read)


@click.command()
@click.option(
    "--outputs-url",
    envvar="RILL_OUTPUTS",
    show_envvar=True,
    metavar="URL",
    help="Output store URL (e.g. s3://bucket/prefix): also count orphan output objects.",
)
@click.option(
    "--page",
    type=click.IntRange(1, 1000),
    default=1000,
    show_default=True,
    help="Jobs read per store call.",
)
@job_options
def audit(outputs_url: str | None, page: int, store: str, namespace: str, output: str) -> None:
    """The namespace's drill report: each job's record checked against the invariants
    (one committed result, increasing fences, one owner, notices that match the outcome
    that won, each delivered once) and the recovery counted. Exits 1 if an invariant is
    broken. Reads every job whole, a page of --page jobs a store read (one read a job on
    a store without list_statuses); a terminal is shown the count as it goes, on stderr."""
    refuse_missing_file(store)
    with (
        Ledger(store, namespace=namespace, outputs=outputs_url) as ledger,
        _progress(output == "text") as progress,
    ):
        report = ledger.drill(page=page, progress=progress)
        if report.jobs == 0:
            raise nothing_found(namespace, "nothing to audit", ledger.store)
    if output == "json":
        echo_json(report.model_dump(mode="json") | {"ok": report.ok})
    else:
        _print(report)
    if not report.ok:
        raise CliError(
            f"{len(report.broken)} broken invariant(s) in namespace {namespace!r}:"
            " see each job with `rill-executor status KEY`",
            ExitCode.CHECK_FAILED,
        )
