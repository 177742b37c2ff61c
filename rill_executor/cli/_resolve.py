"""``resolve``: an operator's decision on one job, fenced and recorded with reason and actor."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import click

from .. import JobState, JobStatus, Ledger, ResolutionRefused
from ..reports import NO_RESULT, default_actor
from ._exit import CliError, ExitCode
from ._jobs import found_job, handler_option
from ._options import job_options, open_ledger
from ._output import console, echo_json, events_table, job_table, warn
from ._retention import recorded_retentions

__all__ = ["resolve"]


def _json(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return NO_RESULT
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        example = '\'{"uri": "s3://…"}\''
        raise click.BadParameter(f"not JSON ({exc}); quote it, e.g. {example}") from None


def _recorded(job: JobStatus) -> bool:
    """Whether the job's finish recorded its retention, which the resolution keeps."""
    ended, until = job.finished_at, job.retain_until
    if job.state is JobState.PROCESSING or ended is None or until is None:
        return False
    return until > ended


def _namespace_retention(ledger: Ledger) -> timedelta | None:
    """For a job that recorded no retention (never finished, or released by a redo): the
    longest one the namespace's finished jobs recorded, so that the resolution keeps the
    namespace's policy, not this command's default; None if none recorded one."""
    spans = recorded_retentions(ledger)
    return max(spans) if spans else None


def _action(**flags: bool) -> str:
    """The one action asked for; two are refused before anything is read or written."""
    chosen = [name for name, given in flags.items() if given]
    if not chosen:
        raise click.UsageError("say what to do: --reuse, --redo or --terminate")
    if len(chosen) > 1:
        both = " and ".join(f"--{name}" for name in chosen)
        raise click.UsageError(
            f"{both} were both given: choose one of --reuse, --redo or --terminate;"
            " nothing was written"
        )
    return chosen[0]


@click.command()
@click.argument("key")
@click.option("--reuse", is_flag=True, help="Keep the committed result (or --result).")
@click.option("--redo", is_flag=True, help="Make the next claim run the work again.")
@click.option("--terminate", is_flag=True, help="Record a terminal failure.")
@click.option("--reason", required=True, help="Why: recorded with the change (required).")
@click.option(
    "--actor",
    default=default_actor,
    show_default="the OS user at this host",
    help="Who decides: recorded with the change.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Act on a job whose lease is live: its running attempt is fenced off (recorded).",
)
@click.option(
    "--result",
    metavar="JSON",
    callback=_json,
    help="With --reuse: the result to commit, as JSON, when there is none to keep.",
)
@handler_option
@job_options
def resolve(
    key: str,
    reuse: bool,
    redo: bool,
    terminate: bool,
    reason: str,
    actor: str,
    force: bool,
    result: Any,
    handler: str | None,
    store: str,
    namespace: str,
    output: str,
) -> None:
    """Decide KEY's job by hand: --reuse, --redo or --terminate, with --reason.

    The fence is bumped, so an attempt still running (a zombie) can never commit; the
    change is recorded in the job's event log with who, why, when and the state before.
    A job whose lease is live is refused (exit 5) unless --force.
    """
    action = _action(reuse=reuse, redo=redo, terminate=terminate)
    if result is not NO_RESULT:
        warn(
            "--result is not checked against the handler's return type, which this command"
            " does not know: give what the handler returns, or its replay raises"
            " UndecodableResult (from Python, ledger.resolve(..., handler=fn) checks it)"
        )
    with open_ledger(store, namespace) as reader:
        before = found_job(reader, key, handler)
        retention = None if _recorded(before) else _namespace_retention(reader)
    with open_ledger(store, namespace, retention) as ledger:
        try:
            after = ledger.resolve(
                key,
                action,
                reason=reason,
                actor=actor,
                force=force,
                result=result,
                handler=handler,
            )
        except ResolutionRefused as exc:
            code = ExitCode.NOT_FOUND if exc.reason == "missing" else ExitCode.REFUSED
            raise CliError(str(exc), code) from exc
    if output == "json":
        echo_json(
            {"resolved": action, "fence_before": before.fence, **after.model_dump(mode="json")}
        )
        return
    out = console()
    out.print(
        f"{action}: fence {before.fence} -> {after.fence}; no earlier attempt can write again",
        soft_wrap=True,
    )
    out.print(job_table(after))
    out.print(events_table(after.events, after.events_dropped))
