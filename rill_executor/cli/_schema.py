"""``schema upgrade``: apply a store's missing schema migrations."""

from __future__ import annotations

import click

from ..store import upgrade_schema

__all__ = ["schema"]


@click.group()
def schema() -> None:
    """Manage a store's schema."""


@schema.command()
@click.option("--store", envvar="RILL_STORE", show_envvar=True, required=True, help="Store URL.")
def upgrade(store: str) -> None:
    """Apply the schema migrations the store is missing."""
    applied = upgrade_schema(store)
    if applied:
        click.echo(f"schema upgraded to version {applied[-1]}")
    else:
        click.echo("schema is up to date")
