"""``drill``: a fault drill against your own executor (see ``rill_executor.testing.drill``
and docs/drills.md). Exits 0 when every check holds, 1 when one fails (or, with
``--enforce-target``, a fault kind's recovery missed the target), 6 when stopped from
outside; everything it started ends with it."""

from __future__ import annotations

import importlib
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.text import Text

from .. import ConfigError
from ._exit import CliError, ExitCode
from ._options import output_option
from ._output import console, echo_json, styled, table

if TYPE_CHECKING:
    from ..testing.drill import Check, DrillConfig, DrillRecord, DrillResult, Workload

__all__ = ["drill"]

MENU = (
    "kill,stop,reset,blackhole,latency,dup,redo,timeout,lost-callback,refused-callback,"
    "store-restart"
)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _verdict(met: bool | None) -> str | Text:
    return "-" if met is None else styled("met", "green") if met else styled("MISSED", "red")


def _print(result: DrillResult) -> None:
    out = console()
    faults = table(
        "fault", "injected", "nothing hit", "tasks hit", "recovered", "success", "p50 s",
        "p99 s", "max s", "target", title=f"faults (seed {result.seed})",
    )  # fmt: skip
    for s in result.stats:
        rate = "-" if s.success_rate is None else f"{s.success_rate:.0%}"
        faults.add_row(
            s.kind, str(s.injected), str(s.skipped), str(s.hits), str(s.recovered),
            styled(rate, None if s.success_rate in {None, 1.0} else "red"),
            _seconds(s.p50), _seconds(s.p99), _seconds(s.max), _verdict(s.target_met),
        )  # fmt: skip
    out.print(faults)
    out.print(f"recovery target: {result.target}", soft_wrap=True)
    checks = table("check", "result", "first problem")
    for c in result.checks:
        verdict = "skipped" if c.skipped else ("holds" if c.ok else f"FAILED ({c.count})")
        colour = None if c.skipped else ("green" if c.ok else "red")
        checks.add_row(
            c.name, styled(verdict, colour), c.skipped or (c.problems[0] if c.problems else "")
        )
    out.print(checks)
    out.print(
        f"{result.executions} executions, {result.tasks} tasks, {result.dispatches} dispatches,"
        f" {result.callbacks} callbacks ({result.repeated_callbacks} sent again after an"
        f" answer); {result.duration:.0f} s of faults, quiescent"
        f" {result.settled:.1f} s later",
        soft_wrap=True,
    )


def _workload(ref: str, seed: int) -> Any:
    """The workload ``MODULE:NAME`` makes for ``seed``."""
    module, _, name = ref.partition(":")
    try:
        factory = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise CliError(
            f"--workload {ref!r}: {exc}; give MODULE:NAME, a function of the seed", ExitCode.USAGE
        ) from exc
    return factory(seed)


def _run(
    config: DrillConfig, workload: Workload, *, own_redis: bool, keep_redis: bool
) -> tuple[DrillRecord, list[Check]]:
    """Run the drill and check it; whatever ends it ends everything it started (its Redis
    too), and an interruption exits with ``ExitCode.INTERRUPTED``."""
    from ..testing.drill import (
        DrillInterrupted,
        FaultDrill,
        Reaper,
        RedisServer,
        check,
        interruptible,
    )

    try:
        with Reaper() as reaper, interruptible(reaper):
            redis = RedisServer(keep=keep_redis, reaper=reaper) if own_redis else None
            try:
                if redis is not None:
                    redis.start()
                    config = replace(config, store=redis.url, store_server=redis)
                record = FaultDrill(replace(config, reaper=reaper), workload).run()
                checks = check(
                    record,
                    namespace=workload.namespace,
                    outputs=config.outputs,
                    outputs_per_key=workload.outputs_per_key,
                )
            finally:
                if redis is not None:
                    redis.close()
                    if keep_redis:
                        click.echo(f"drill: its Redis's folder is kept: {redis.folder}", err=True)
    except DrillInterrupted as exc:
        raise CliError(
            f"the drill was {exc}; every process it started has ended", ExitCode.INTERRUPTED
        ) from exc
    return record, checks


@click.command()
@click.option(
    "--command",
    "command",
    required=True,
    metavar="TEMPLATE",
    help='How to start one executor: {port} is its port, e.g. "uvicorn app:app --port {port}"'
    " (the store URL reaches it as RILL_STORE, and {store}).",
)
@click.option("--processes", type=click.IntRange(1, 64), default=3, show_default=True)
@click.option(
    "--store",
    metavar="URL",
    default=None,
    help="The executors' store: checked at the end, its link cut by the faults. Omit for an"
    " executor that keeps none (only the engine's records are checked).",
)
@click.option(
    "--own-redis",
    is_flag=True,
    help="Start a Redis server for the drill (the store; store-restart restarts it), in a"
    " temporary folder removed at the end.",
)
@click.option(
    "--keep-redis",
    is_flag=True,
    help="With --own-redis: keep its folder (the append-only file) and say where.",
)
@click.option("--outputs", metavar="URL", default=None, help="The output store (RILL_OUTPUTS).")
@click.option("-n", "--namespace", default="segments", show_default=True)
@click.option("--handler", default="segment", show_default=True, help="The handler's name.")
@click.option(
    "--workload",
    "workload_ref",
    metavar="MODULE:NAME",
    default=None,
    help="Your own workload: a function of the seed returning one (e.g."
    " examples.transcode.drill:workload); --namespace, --handler, --path,"
    " --segments and --outputs-per-key are then the workload's.",
)
@click.option("--path", default="/segments", show_default=True, help="The task's resource path.")
@click.option("--segments", type=click.IntRange(1, 1000), default=3, show_default=True,
              help="Tasks per execution.")  # fmt: skip
@click.option("--outputs-per-key", type=click.IntRange(0), default=None,
              help="Committed output objects each key must have (with --outputs).")  # fmt: skip
@click.option("--duration", type=click.FloatRange(min=1), default=90.0, show_default=True,
              help="Seconds of faults.")  # fmt: skip
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--faults", default=MENU, show_default=True, help="The fault menu, comma-separated.")
@click.option("--rate", default="1/5s", show_default=True, help="Mean fault rate, e.g. 1/5s.")
@click.option("--each-kind", is_flag=True,
              help="Draw every kind of the menu once first (in a seeded order), then at random:"
              " a short drill exercises all of it.")  # fmt: skip
@click.option("--submit-every", type=click.FloatRange(min=0.1), default=2.0, show_default=True,
              help="Seconds between two submitted executions.")  # fmt: skip
@click.option("--lease", type=click.FloatRange(min=0.5), default=3.0, show_default=True,
              help="Given to the executors as RILL_LEASE.")  # fmt: skip
@click.option("--settle", type=click.FloatRange(min=1), default=120.0, show_default=True,
              help="At most this long to wait for quiescence.")  # fmt: skip
@click.option("--notice-lease", type=click.FloatRange(min=0.1), default=None,
              help="The executors' notice lease, seconds (default: the library's, 15): the"
              " recovery target's lease is the longer of it and --lease.")  # fmt: skip
@click.option("--engine-retry", type=click.FloatRange(min=0), default=None,
              help="The engine's retry interval as it fires, seconds, for the recovery target"
              " (default 5: a first retry of 2 s plus the engine's 3-s timer poll).")  # fmt: skip
@click.option("--enforce-target", is_flag=True,
              help="Exit 1 when a fault kind's recovery misses the target, as for a failed"
              " check.")  # fmt: skip
@click.option("--logs", metavar="DIR", default=None, help="Append each executor's output here.")
@click.option("--svg", "svg_path", metavar="FILE", default=None,
              help="Write the drill's timeline picture here.")  # fmt: skip
@output_option
def drill(
    command: str,
    processes: int,
    store: str | None,
    own_redis: bool,
    keep_redis: bool,
    outputs: str | None,
    namespace: str,
    handler: str,
    workload_ref: str | None,
    path: str,
    segments: int,
    outputs_per_key: int | None,
    duration: float,
    seed: int,
    faults: str,
    rate: str,
    each_kind: bool,
    submit_every: float,
    lease: float,
    settle: float,
    notice_lease: float | None,
    engine_retry: float | None,
    enforce_target: bool,
    logs: str | None,
    svg_path: str | None,
    output: str,
) -> None:
    """Run your executor's processes under a seeded random fault schedule, then check the
    engine's records, the store and the outputs: every task SUCCEED with the committed
    result, no stale or doubled callback, no dangling job, audit clean, orphans collected,
    re-executions explained by the faults. Reports the recovery time and success rate per
    fault kind, against a target (--enforce-target: a miss fails the drill). The same seed
    gives the same schedule. Exits 1 if a check fails, 6 if
    stopped from outside (SIGTERM, SIGINT, SIGHUP, its parent's death); every process it
    started ends with it."""
    try:
        from ..testing.drill import (
            DrillConfig,
            FaultKind,
            SegmentWorkload,
            parse_rate,
            summarise,
        )
        from ._drill_svg import drill_svg
    except ImportError as exc:  # pragma: no cover - an install without the extras
        raise ConfigError(
            f"the drill needs the rillflow and testing extras ({exc.name} is missing):"
            " pip install 'rill-executor[cli,rillflow,testing]'"
        ) from exc
    try:
        kinds = tuple(FaultKind(k.strip()) for k in faults.split(",") if k.strip())
    except ValueError as exc:
        raise CliError(f"{exc}; the menu is {MENU}", ExitCode.USAGE) from exc
    target = None if svg_path is None else Path(svg_path)
    if target is not None and not target.parent.is_dir():
        raise CliError(f"no folder {str(target.parent)!r} to write {svg_path!r} in", ExitCode.USAGE)
    if own_redis and store:
        raise CliError("give --store or --own-redis, not both", ExitCode.USAGE)
    if keep_redis and not own_redis:
        raise CliError("--keep-redis keeps the folder of --own-redis: give both", ExitCode.USAGE)
    say = None if output == "json" else (lambda line: click.echo(line, err=True))
    workload: Workload = (
        SegmentWorkload(
            seed=seed,
            path=path,
            segments=segments,
            namespace=namespace,
            handler=handler,
            outputs_per_key=outputs_per_key,
        )
        if workload_ref is None
        else _workload(workload_ref, seed)
    )
    config = DrillConfig(
        command=command, store=store, processes=processes, outputs=outputs, duration=duration,
        seed=seed, faults=kinds, every=parse_rate(rate), submit_every=submit_every,
        lease=lease, settle=settle, log_dir=None if logs is None else Path(logs),
        progress=say, each_kind=each_kind,
    )  # fmt: skip
    if notice_lease is not None:
        config = replace(config, notice_lease=notice_lease)
    if engine_retry is not None:
        config = replace(config, engine_retry=engine_retry)
    record, checks = _run(config, workload, own_redis=own_redis, keep_redis=keep_redis)
    result = summarise(record, checks)
    if target is not None:
        target.write_text(drill_svg(record, result), encoding="utf-8")
    if output == "json":
        echo_json(result.model_dump(mode="json") | {"ok": result.ok, "missed": result.missed})
    else:
        _print(result)
    failed = _failures(result, enforce_target=enforce_target)
    if failed:
        raise CliError(f"the drill failed {', '.join(failed)}", ExitCode.CHECK_FAILED)


def _failures(result: DrillResult, *, enforce_target: bool) -> list[str]:
    """What fails the drill: each failed check, and with ``enforce_target`` a missed
    recovery target (a drill's exit 1 says a check failed; this is one more check)."""
    failed = [c.name for c in result.checks if not c.ok]
    if enforce_target and result.missed:
        failed.append(f"the recovery target for {', '.join(result.missed)}")
    return failed
