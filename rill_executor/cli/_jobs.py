"""``status`` and ``attempts``: one job and its whole history, read in one round trip."""

from __future__ import annotations

import click

from .._ledger import Ledger
from .._records import JobStatus
from ._main import CliError, ExitCode
from ._options import job_options, open_ledger
from ._output import attempt_details, attempts_table, console, echo_json, job_table, notices_table

__all__ = ["attempts", "status"]

_handler = click.option(
    "--handler",
    metavar="NAME",
    help="A decorated handler's name: its jobs are stored as NAME/KEY (idempotent(name=…),"
    " by default the handler's module and qualified name).",
)


def _found(ledger: Ledger, key: str, handler: str | None) -> JobStatus:
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
        job = _found(ledger, key, handler)
    if output == "json":
        echo_json(job.model_dump(mode="json"))
        return
    out = console()
    out.print(job_table(job))
    out.print(attempts_table(job))
    if job.notices:
        out.print(notices_table(job.notices))


@click.command()
@click.argument("key")
@_handler
@job_options
def attempts(key: str, handler: str | None, store: str, namespace: str, output: str) -> None:
    """Every attempt at KEY: its fence, times, outcome and error, what it answered (the
    engine's dispatch) and the outputs it wrote, committed or not."""
    with open_ledger(store, namespace) as ledger:
        job = _found(ledger, key, handler)
    if output == "json":
        dumped = job.model_dump(mode="json")
        echo_json(
            {name: dumped[name] for name in ("namespace", "key", "state", "fence")}
            | {"attempts": dumped["attempts"]}
        )
        return
    out = console()
    out.print(f"{job.key} ({job.namespace}): {job.state.value}, fence {job.fence}", soft_wrap=True)
    for attempt in job.attempts:
        for line in attempt_details(attempt):
            out.print(line, soft_wrap=True)
