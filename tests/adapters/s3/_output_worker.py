"""A child process that writes an output under a claim and is killed or paused midway.

    python -m tests.adapters.s3._output_worker STORE_URL OUTPUTS_URL NAMESPACE KEY LEASE MODE

MODE: ``kill-before-upload`` (announce, then block inside the upload's first read),
``kill-before-commit`` (upload, announce, block), ``zombie`` (block inside the upload's first
read until a line arrives on stdin, then finish the upload and try to commit).
Announcements and the final report are JSON lines on stdout.
"""

from __future__ import annotations

import io
import json
import sys
import time

from rill_executor import Claim, Ledger, StaleAttempt

PAYLOAD = b"segment bytes from the first attempt " * 1000


class Gate(io.RawIOBase):
    """A payload whose first read announces itself and then waits."""

    def __init__(self, announce: dict[str, object], wait_for_stdin: bool) -> None:
        self._announce = announce
        self._wait = wait_for_stdin
        self._body = io.BytesIO(PAYLOAD)
        self._opened = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if not self._opened:
            self._opened = True
            print(json.dumps({"event": "uploading", **self._announce}), flush=True)
            if self._wait:
                sys.stdin.readline()
            else:
                time.sleep(3600)
        return self._body.readinto(buffer)


def main(store_url: str, outputs_url: str, namespace: str, key: str, lease: str, mode: str) -> None:
    ledger = Ledger(store_url, namespace=namespace, lease=float(lease), outputs=outputs_url)
    claim = ledger.claim(key)
    assert isinstance(claim, Claim)
    who = {"attempt_id": claim.attempt_id, "fence": claim.fence}
    if mode == "kill-before-commit":
        ref = claim.outputs.put("segment.mp4", PAYLOAD)
        print(json.dumps({"event": "uploaded", "key": ref.key, **who}), flush=True)
        time.sleep(3600)
    ref = claim.outputs.put("segment.mp4", io.BufferedReader(Gate(who, mode == "zombie")))
    try:
        claim.commit({"video": ref.uri})
        report = "committed"
    except StaleAttempt as exc:
        report = f"StaleAttempt:{exc.reason}"
    print(json.dumps({"event": "done", "commit": report, "key": ref.key}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
