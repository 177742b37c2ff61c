"""``deliver``: send a namespace's due completion notices (the outbox) now.

The same deliverer a Rill Flow executor runs (``rill_executor.rillflow.Deliverer``): each
notice is leased before it is sent, so a running service and this command never send one
notice at the same time, and settled with the engine's answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import click

from .. import AsyncLedger, Ledger
from ._exit import CliError, ExitCode
from ._options import duration_option, job_options, nothing_found, refuse_missing_file
from ._output import console, echo_json, styled, table

__all__ = ["deliver"]

_DONE = ("ok", "final_duplicate")
_FINAL = (*_DONE, "moved_on", "refused")


async def _deliver(
    store: str, namespace: str, lease: timedelta, batch: int, timeout: timedelta
) -> list[Any]:
    try:
        from ..rillflow._deliverer import Deliverer
    except ImportError as exc:
        raise CliError(
            f"deliver needs the 'rillflow' extra ({exc}): pip install 'rill-executor[rillflow]'",
            ExitCode.USAGE,
        ) from None
    refuse_missing_file(store)
    with _quiet(logging.getLogger("rill_executor.rillflow")):
        async with AsyncLedger(store, namespace=namespace) as ledger:
            deliverer = Deliverer(ledger, lease=lease, batch=batch, timeout=timeout)
            try:
                done = await deliverer.deliver()
            finally:
                await deliverer.stop()
            if not done and not (await ledger.jobs(limit=1)).jobs:
                with Ledger(store, namespace=namespace) as reader:  # its namespaces, if cheap
                    raise nothing_found(namespace, "no notice to deliver", reader.store)
            return done


@contextmanager
def _quiet(logger: logging.Logger) -> Iterator[None]:
    """Each answer is in the table: keep the deliverer's warnings off stderr, and take the
    handler away after, so a caller running the command in its own process keeps its log."""
    handler = logging.NullHandler()
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


@click.command()
@duration_option(
    "--lease",
    default="30s",
    show_default=True,
    help="How long each notice is held while it is sent.",
)
@click.option(
    "--batch", type=click.IntRange(1, 1000), default=16, show_default=True, help="Notices a lease."
)
@duration_option(
    "--timeout",
    default="5s",
    show_default=True,
    help="HTTP timeout of one callback.",
)
@job_options
def deliver(
    lease: timedelta,
    batch: int,
    timeout: timedelta,
    store: str,
    namespace: str,
    output: str,
) -> None:
    """Send the namespace's due completion notices to the engine now, and record each
    answer. Exits 1 if a notice is still pending afterwards (the engine asked to retry
    later, or did not answer)."""
    done = asyncio.run(_deliver(store, namespace, lease, batch, timeout))
    pending = [d for d in done if d.classification.value not in _FINAL or not d.settled]
    if output == "json":
        echo_json(
            {
                "delivered": sum(d.classification.value in _DONE for d in done),
                "pending": len(pending),
                "deliveries": [
                    {
                        "key": d.key,
                        "notice": d.notice_id,
                        "watch": d.watch,
                        "answer": d.classification.value,
                        "detail": d.detail,
                        "settled": d.settled,
                    }
                    for d in done
                ],
            }
        )
    else:
        out = console()
        if not done:
            out.print("no notice is due")
        else:
            found = table("key", "notice", "watch", "answer", "detail", "settled")
            for d in done:
                answer = d.classification.value
                style = "green" if answer in _DONE else "red" if d in pending else "yellow"
                found.add_row(
                    d.key, d.notice_id, d.watch, styled(answer, style), d.detail, str(d.settled)
                )
            out.print(found)
            out.print(f"{len(done)} tried, {len(pending)} still pending")
    if pending:
        click.get_current_context().exit(int(ExitCode.CHECK_FAILED))
