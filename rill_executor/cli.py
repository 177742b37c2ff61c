"""The ``rill-executor`` command: ``demo`` and ``schema upgrade``.

Options default from environment variables (``RILL_STORE``). Every failure the library
knows about exits with status 2 and one line saying what to do.
"""

from __future__ import annotations

import sys
from typing import Any

try:
    import click
except ImportError:  # pragma: no cover - exercised only without the extra
    sys.exit("the rill-executor command needs the 'cli' extra: pip install 'rill-executor[cli]'")

from ._errors import RillExecutorError
from ._registry import upgrade_schema

__all__ = ["main"]


class _Errors(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except RillExecutorError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(2)


@click.group(cls=_Errors)
@click.version_option(package_name="rill-executor")
def main() -> None:
    """Business idempotency for workflow executors."""


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


@main.group()
def schema() -> None:
    """Manage a store's schema."""


@schema.command()
@click.option("--store", envvar="RILL_STORE", required=True, help="Store URL [env: RILL_STORE].")
def upgrade(store: str) -> None:
    """Apply the schema migrations the store is missing."""
    applied = upgrade_schema(store)
    if applied:
        click.echo(f"schema upgraded to version {applied[-1]}")
    else:
        click.echo("schema is up to date")


if __name__ == "__main__":
    main()
