"""``bench``: what the ledger costs on the operator's own store, as ratios to its floor.

The measuring is ``rill_executor.cli._measure``; this module opens the ledger and prints.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import click

from .. import Ledger
from ._measure import BenchReport, run_bench
from ._options import duration_option, output_option, refuse_missing_file, store_option
from ._output import console, echo_json, table

__all__ = ["bench"]


def _shown(url: str) -> str:
    """The store URL without its password, if it has one."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    userinfo, _, host = parts.netloc.rpartition("@")
    return parts._replace(netloc=f"{userinfo.split(':', 1)[0]}:***@{host}").geturl()


def _kept(report: BenchReport) -> str:
    hours = report.retention / timedelta(hours=1)
    return (
        f"wrote {report.written} jobs, all committed, in namespace {report.namespace!r}. They"
        f" are kept for the retention ({hours:g}h) and stop binding then: Redis expires them,"
        " a SQL store keeps the rows until gc deletes them"
        f" (rill-executor gc --namespace {report.namespace} --store URL, once they are past"
        " retention)."
    )


def _as_json(store: str, report: BenchReport) -> dict[str, Any]:
    return {
        "store": _shown(store),
        "namespace": report.namespace,
        "n": report.n,
        "warmup": report.warmup,
        "batch": report.batch,
        "seconds": round(report.seconds, 3),
        "floor": "store.ping()" if report.floor else None,
        "measures": [
            {
                "name": f.name,
                "what": f.what,
                "samples": f.samples,
                "p50_us": round(f.p50_us, 3),
                "p99_us": round(f.p99_us, 3),
                "ratio": None if f.ratio is None else round(f.ratio, 3),
            }
            for f in report.figures
        ],
        "written": report.written,
        "retention_seconds": report.retention.total_seconds(),
    }


def _print(store: str, report: BenchReport) -> None:
    out = console()
    out.print(f"rill-executor bench on {_shown(store)}", style="bold", soft_wrap=True)
    out.print(
        f"{report.n} samples per measure after a warm-up of {report.warmup}, interleaved in"
        f" batches of {report.batch}; {report.seconds:.1f}s",
        soft_wrap=True,
    )
    found = table("measure", "what", "p50 µs", "p99 µs", "p50 / floor")
    for f in report.figures:
        ratio = "-" if f.ratio is None else f"{f.ratio:.2f}x"
        found.add_row(f.name, f.what, f"{f.p50_us:.1f}", f"{f.p99_us:.1f}", ratio)
    out.print(found)
    if not report.floor:
        out.print(
            "no floor: this store has no ping() (an optional part of the store port), so the"
            " figures are not ratios to its cheapest round trip",
            style="yellow",
            soft_wrap=True,
        )
    out.print(_kept(report), soft_wrap=True)


@click.command()
@store_option
@click.option(
    "--n",
    "n",
    type=click.IntRange(1, 1_000_000),
    default=2000,
    show_default=True,
    help="Timed samples of each measure.",
)
@click.option(
    "-n",
    "--namespace",
    metavar="NAME",
    help="Where the benchmark's jobs go (default: a new one, rill-bench-<random>). Not read"
    " from RILL_NAMESPACE, so a run never lands in a service's namespace unasked.",
)
@duration_option(
    "--retention",
    default="1h",
    show_default=True,
    help="How long the benchmark's jobs are kept (the ledger's retention).",
)
@output_option
def bench(store: str, n: int, namespace: str | None, retention: timedelta, output: str) -> None:
    """Measure claims, commits, replays and status reads on the store, each as a ratio
    to the store's floor (its cheapest round trip, SQL SELECT 1 or Redis PING, through
    the same pool), measured interleaved in the same run.

    It writes 2 x (N + warm-up) + min(N, 100) committed jobs (4500 by default) into a
    namespace of its own, kept for --retention, and touches no other job."""
    refuse_missing_file(store)
    chosen = namespace or f"rill-bench-{uuid.uuid4().hex[:8]}"
    with Ledger(store, namespace=chosen, retention=retention) as ledger:
        report = run_bench(ledger, n=n)
    if output == "json":
        echo_json(_as_json(store, report))
    else:
        _print(store, report)
