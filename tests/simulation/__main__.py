"""Run schedules of the simulation: ``python -m tests.simulation --seeds 0:100000``.

Prints how many ran and how fast; on the first broken invariant, the seed, the invariant and
the schedule, and exits 1. ``--seed N`` replays one schedule and prints it.
"""

from __future__ import annotations

import argparse
import sys
import time

from .world import Settings, Violation, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation", description=__doc__)
    parser.add_argument("--seeds", default="0:10000", help="a range START:STOP (default 0:10000)")
    parser.add_argument("--seed", type=int, help="replay this one seed and print its schedule")
    parser.add_argument("--steps", type=int, default=Settings.steps, help="actions per schedule")
    parser.add_argument("--callers", type=int, default=Settings.callers)
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
    began = time.perf_counter()
    for seed in seeds:
        try:
            run(seed, settings)
        except Violation as exc:
            print(exc)
            return 1
    took = time.perf_counter() - began
    print(
        f"{len(seeds)} schedules in {took:.1f} s ({len(seeds) / took:.0f}/s): every invariant held"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
