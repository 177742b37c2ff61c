"""The command group, its commands, and the one error exit every command shares.

Every failure ends in ``fail``: one line ``error: …`` on stderr (a JSON object with
``-o json``) and an exit status from ``ExitCode``.
"""

from __future__ import annotations

import enum
import json
from typing import Any, NoReturn

import click

from .._errors import RillExecutorError, StoreError, UsageError
from ._options import OUTPUT_KEY

__all__ = ["CliError", "ExitCode", "main"]


class ExitCode(enum.IntEnum):
    """The exit statuses of every command (documented in docs/operations.md)."""

    OK = 0
    CHECK_FAILED = 1  # the command ran and found a problem (too short a retention, a broken
    # invariant, a notice still pending)
    USAGE = 2  # a bad option, argument, store URL or configuration; nothing was touched
    NOT_FOUND = 3  # no such job in that namespace (or no store at that path)
    STORE = 4  # the store could not be reached, has no schema, or failed: try again later
    REFUSED = 5  # the job's state refused the change (resolve on a live lease); nothing written


class CliError(Exception):
    """A failure the command itself detected, with its exit status."""

    def __init__(self, message: str, code: ExitCode) -> None:
        super().__init__(message)
        self.code = code


def _code_of(exc: RillExecutorError) -> ExitCode:
    if isinstance(exc, UsageError):
        return ExitCode.USAGE
    if isinstance(exc, StoreError):
        return ExitCode.STORE
    return ExitCode.USAGE


def fail(ctx: click.Context, message: str, code: ExitCode, kind: str) -> NoReturn:
    if ctx.meta.get(OUTPUT_KEY) == "json":
        error = {"type": kind, "message": message, "exit_code": int(code)}
        click.echo(json.dumps({"error": error}), err=True)
    else:
        click.echo(f"error: {message}", err=True)
    ctx.exit(int(code))


class _Errors(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # a bad option or argument, before anything ran
            where = f" (see {exc.ctx.command_path} --help)" if exc.ctx else ""
            fail(ctx, exc.format_message() + where, ExitCode.USAGE, "usage")
        except CliError as exc:
            fail(ctx, str(exc), exc.code, exc.code.name.lower())
        except RillExecutorError as exc:
            fail(ctx, str(exc), _code_of(exc), type(exc).__name__)


@click.group(cls=_Errors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rill-executor")
def main() -> None:
    """Business idempotency for workflow executors: inspect and operate a job store.

    Every command that reads a store takes --store URL (or RILL_STORE) and --namespace
    (or RILL_NAMESPACE), prints tables (-o text) or JSON (-o json), and exits with
    0 ok, 1 check failed, 2 bad usage, 3 not found, 4 store unavailable or failing,
    5 refused by the job's state (resolve on a live lease without --force).
    """


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
    from .._demo import run_demo

    run_demo(store, lease, click.echo)


def _register() -> None:
    from ._audit import audit
    from ._bench import bench
    from ._gc import gc
    from ._jobs import attempts, jobs, status, timeline
    from ._notices import deliver
    from ._resolve import resolve
    from ._retention import check_retention
    from ._schema import schema

    commands = [status, attempts, timeline, jobs, resolve, audit, gc, check_retention, deliver]
    for command in [*commands, schema, bench]:
        main.add_command(command)


_register()
