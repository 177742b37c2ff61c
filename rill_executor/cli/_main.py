"""The command group, its commands, and the one error exit every command shares.

Every failure ends in ``fail``: one line ``error: …`` on stderr (a JSON object with
``-o json``: ``type`` from ``ErrorType``, the exception's class in ``exception``) and an
exit status from ``ExitCode``.
"""

from __future__ import annotations

import json
import warnings
from typing import Any, NoReturn, TextIO

import click

from .. import (
    ConfigError,
    OutcomeError,
    RillExecutorError,
    StoreError,
    StoreUnavailable,
    UsageError,
)
from ._exit import CliError, ErrorType
from ._options import OUTPUT_KEY
from ._visible import visible, visible_json

__all__ = ["main"]


def _type_of(exc: RillExecutorError) -> ErrorType:
    if isinstance(exc, ConfigError):
        return ErrorType.CONFIG
    if isinstance(exc, UsageError):
        return ErrorType.USAGE
    if isinstance(exc, StoreUnavailable):
        return ErrorType.STORE_UNAVAILABLE
    if isinstance(exc, StoreError):
        return ErrorType.STORE_FAILED
    if isinstance(exc, OutcomeError):
        return ErrorType.REFUSED
    return ErrorType.USAGE


def fail(
    ctx: click.Context, message: str, kind: ErrorType, exception: BaseException | None
) -> NoReturn:
    code = kind.code
    if ctx.meta.get(OUTPUT_KEY) == "json":
        error = {
            "type": kind.value,
            "exception": None if exception is None else type(exception).__name__,
            "message": message,
            "exit_code": int(code),
        }
        click.echo(visible_json(json.dumps({"error": error}, ensure_ascii=False)), err=True)
    else:
        click.echo(f"error: {visible(message)}", err=True)
    ctx.exit(int(code))


class _Errors(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # a bad option or argument, before anything ran
            where = f" (see {exc.ctx.command_path} --help)" if exc.ctx else ""
            fail(ctx, exc.format_message() + where, ErrorType.USAGE, exc)
        except CliError as exc:
            fail(ctx, str(exc), exc.kind, exc.__cause__)
        except RillExecutorError as exc:
            fail(ctx, str(exc), _type_of(exc), exc)


def _one_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A warning (e.g. Redis's DurabilityWarning) as one line on stderr: no source line,
    and never in stdout, where -o json writes."""
    text = visible(" ".join(str(message).split()))
    click.echo(f"warning: {category.__name__}: {text}", err=True)


@click.group(cls=_Errors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rill-executor")
def main() -> None:
    """Business idempotency for workflow executors: inspect and operate a job store.

    Every command that reads a store takes --store URL (or RILL_STORE) and --namespace
    (or RILL_NAMESPACE), prints tables (-o text) or JSON (-o json), and exits with
    0 ok, 1 check failed, 2 bad usage, 3 not found, 4 store unavailable or failing,
    5 refused by the job's state (resolve on a live lease without --force), 6 interrupted
    (a drill stopped from outside).
    """
    # Put back once the command is done: a caller that runs it in its own process (a
    # test, a script) keeps its own hook.
    before = warnings.showwarning
    warnings.showwarning = _one_line
    click.get_current_context().call_on_close(lambda: setattr(warnings, "showwarning", before))


@main.command()
@click.option(
    "--store",
    envvar="RILL_STORE",
    default=None,
    help="Store URL (default: a new SQLite file in a temporary folder).",
)
@click.option(
    "--lease", default=1.0, show_default=True, help="Lease of the demo's claims, seconds."
)
def demo(store: str | None, lease: float) -> None:
    """Walk through a fresh run, a replay, a concurrent duplicate and a fenced takeover."""
    from ._demo import run_demo

    run_demo(store, lease, click.echo)


def _register() -> None:
    from ._audit import audit
    from ._bench import bench
    from ._drill import drill
    from ._gc import gc
    from ._jobs import attempts, jobs, status, timeline
    from ._notices import deliver
    from ._resolve import resolve
    from ._retention import check_retention
    from ._schema import schema

    commands = [status, attempts, timeline, jobs, resolve, audit, gc, check_retention, deliver]
    for command in [*commands, schema, bench, drill]:
        main.add_command(command)


_register()
