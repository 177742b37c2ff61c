"""The transcode workflow as a fault-drill workload: ``rill-executor drill --workload
examples.transcode.drill:workload`` (see docs/drills.md).

Each execution is one video through ``transcode.yaml`` (split, a transcode per segment,
merge); the drill watches every function task under the key the executor gives its job,
and checks each job's committed outputs: one per segment source for split, one for each
transcoded segment and for the merged video.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rill_executor.testing.drill import DagWorkload, TaskKey

from .app import NAMESPACE, segment_key

DESCRIPTOR = Path(__file__).with_name("transcode.yaml")


def workload(
    seed: int, *, segments: int = 4, profile: str = "h264", version: str = "v2"
) -> DagWorkload:
    """Videos named ``{run}-{seed}-v{serial}`` of ``segments`` segments each."""
    run = uuid.uuid4().hex[:6]

    def context(serial: int) -> Mapping[str, Any]:
        video = f"{run}-{seed}-v{serial}"
        return {"video": video, "count": segments, "profile": profile, "version": version}

    def keys(task: str, given: Mapping[str, Any]) -> TaskKey | None:
        if task == "split":
            return TaskKey(given["video"], "split", outputs=int(given["count"]))
        if task == "transcode":
            key = segment_key(given["video"], given["segment"], given["profile"], given["version"])
            return TaskKey(key, "transcode", outputs=1)
        if task == "merge":
            return TaskKey(f"{given['video']}:{given['profile']}-{given['version']}", "merge", 1)
        return None

    return DagWorkload(DESCRIPTOR, context, keys, NAMESPACE)
