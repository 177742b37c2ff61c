"""The options commands share: the store, the namespace, the output format, durations."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import click

from .. import Ledger, RillExecutorError
from ._exit import CliError, ExitCode

__all__ = [
    "OUTPUT_KEY",
    "duration_option",
    "job_options",
    "nothing_found",
    "open_ledger",
    "output_option",
    "refuse_missing_file",
    "store_option",
]

F = TypeVar("F", bound=Callable[..., Any])
OUTPUT_KEY = "rill_executor.output"

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def duration_option(*names: str, **options: Any) -> Callable[[F], F]:
    """An option taking a duration: seconds (``90``) or a number with a unit (``90s``,
    ``10m``, ``2h``, ``7d``, ``1w``); the command gets a ``timedelta``."""
    return click.option(*names, callback=_duration, metavar="DURATION", **options)


def _duration(ctx: click.Context, param: click.Parameter, value: Any) -> timedelta | None:
    if value is None or isinstance(value, timedelta):
        return value
    found = _DURATION.match(str(value))
    if not found:
        raise click.BadParameter(
            f"{value!r} is not a duration: write seconds (90) or a number with s, m, h, d or w"
            " (90s, 10m, 2h, 7d)"
        )
    number, unit = found.groups()
    return timedelta(seconds=float(number) * _UNITS[unit or "s"])


def _remember_output(ctx: click.Context, param: click.Parameter, value: str) -> str:
    ctx.find_root().meta[OUTPUT_KEY] = value
    return value


def output_option(fn: F) -> F:
    return click.option(
        "-o",
        "--output",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        is_eager=True,  # known before any other option can fail, so errors use it too
        callback=_remember_output,
        help="Tables for people, or JSON for scripts.",
    )(fn)


def job_options(fn: F) -> F:
    """``--store``, ``--namespace`` and ``-o``: what every command that reads a store takes."""
    fn = output_option(fn)
    fn = click.option(
        "-n",
        "--namespace",
        envvar="RILL_NAMESPACE",
        show_envvar=True,
        required=True,
        help="The ledger's namespace.",
    )(fn)
    return store_option(fn)


def store_option(fn: F) -> F:
    """``--store URL`` (or ``RILL_STORE``), required."""
    return click.option(
        "--store",
        envvar="RILL_STORE",
        show_envvar=True,
        required=True,
        metavar="URL",
        help="Store URL, e.g. sqlite:///jobs.db, postgresql+psycopg://…, redis://…",
    )(fn)


_SHOWN = 20  # namespaces named when the one given has no jobs


def nothing_found(namespace: str, what: str, store: object = None) -> Exception:
    """The error (exit 3) of a command that found no job in ``namespace``: a typo'd
    namespace must not look like a healthy one. A store that can list its namespaces
    cheaply (memory, SQL: ``store.namespaces(limit)``) has them named."""

    names = _namespaces(store)
    shown = "" if names is None else f"; namespaces with jobs: {', '.join(names) or 'none'}"
    more = "…" if names is not None and len(names) == _SHOWN else ""
    return CliError(
        f"namespace {namespace!r} has no jobs in this store: {what}{shown}{more} (check"
        " --namespace and --store)",
        ExitCode.NOT_FOUND,
    )


def _namespaces(store: object) -> list[str] | None:
    lister = getattr(store, "namespaces", None)
    if not callable(lister):
        return None  # e.g. Redis: listing namespaces would scan every key
    try:
        return [str(name) for name in lister(_SHOWN)]
    except RillExecutorError:
        return None  # the listing is a courtesy: the error says what matters


def refuse_missing_file(url: str) -> None:
    """Refuse a SQLite URL naming a file that does not exist: opening it would create an
    empty store, and an operator's typo should change nothing."""

    if not url.lower().startswith("sqlite"):
        return
    path = unquote(urlsplit(url).path.removeprefix("/"))
    if path and path != ":memory:" and not Path(path).exists():
        raise CliError(
            f"no SQLite database at {path!r} (resolved from {url!r}); nothing was created."
            " Check the path: sqlite:///relative.db or sqlite:////absolute/path.db",
            ExitCode.NOT_FOUND,
        )


@contextmanager
def open_ledger(store: str, namespace: str, retention: timedelta | None = None) -> Iterator[Ledger]:
    """A ledger on ``store`` for reading and delivering (with ``retention``, for what it
    writes); closed on exit."""
    refuse_missing_file(store)
    found = (
        Ledger(store, namespace=namespace)
        if retention is None
        else Ledger(store, namespace=namespace, retention=retention)
    )
    with found as ledger:
        yield ledger
