"""Run schedules of the simulation: ``python -m tests.simulation --seeds 0:100000``.

Prints how many ran and how fast; on the first broken invariant, the seed, the invariant and
the schedule, and exits 1. ``--seed N`` replays one schedule and prints it. ``--jobs N``
runs the range in N processes (one a CPU by default): each seed's schedule is the same in
any process, and the failure reported is the lowest seed that fails, as with one process.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Iterator

from .world import Settings, Violation, run

CHUNK = 500  # seeds a process runs between reports: small enough to share the range evenly


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation", description=__doc__)
    parser.add_argument("--seeds", default="0:10000", help="a range START:STOP (default 0:10000)")
    parser.add_argument("--seed", type=int, help="replay this one seed and print its schedule")
    parser.add_argument("--steps", type=int, default=Settings.steps, help="actions per schedule")
    parser.add_argument("--callers", type=int, default=Settings.callers)
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: one a CPU)"
    )
    args = parser.parse_args(argv)
    settings = Settings(steps=args.steps, callers=args.callers)
    if args.seed is not None:
        try:
            world = run(args.seed, settings)
        except Violation as exc:
            print(exc)
            return 1
        print(world.written())
        return 0
    start, _, stop = args.seeds.partition(":")
    seeds = range(int(start), int(stop))
    jobs = max(1, min(args.jobs, -(-len(seeds) // CHUNK)))
    began = time.perf_counter()
    for failure in _failures(seeds, settings, jobs):
        if failure is not None:
            print(failure)
            return 1
    took = time.perf_counter() - began
    print(
        f"{len(seeds)} schedules in {took:.1f} s ({len(seeds) / took:.0f}/s,"
        f" {jobs} process{'es' if jobs > 1 else ''}): every invariant held"
    )
    return 0


def _failures(seeds: range, settings: Settings, jobs: int) -> Iterator[str | None]:
    """Each chunk's first failure (None if it had none), in the order of the seeds."""
    chunks = [(seeds[i : i + CHUNK], settings) for i in range(0, len(seeds), CHUNK)]
    if jobs == 1:
        yield from map(_chunk, chunks)
        return
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        yield from pool.imap(_chunk, chunks)  # in order: the lowest failing seed comes first


def _chunk(task: tuple[range, Settings]) -> str | None:
    """Run a chunk of seeds up to its first failure: the seed, what broke and the schedule,
    or the traceback of an error of the simulation itself, with its seed to replay."""
    seeds, settings = task
    for seed in seeds:
        try:
            run(seed, settings)
        except Violation as exc:
            return str(exc)
        except Exception:  # reported with the seed that replays it
            return f"seed {seed}: the simulation raised\n{traceback.format_exc()}"
    return None


if __name__ == "__main__":
    sys.exit(main())
