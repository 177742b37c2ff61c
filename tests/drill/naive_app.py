"""An executor that behaves like the engine's own sample executors (Rill Flow's
``executors/fastapi/main.py``): the baseline the drill must catch.

An async dispatch is handed to a thread pool and answered ``{"result_type": "SUCCESS"}`` at
once; the work then POSTs its result to ``X-Callback-Url`` once. Nothing is deduplicated or
persisted, a failed callback is never retried, and a failure is reported with
``result_type: FAILED`` in the body, which the engine's ``trigger.json`` ignores.

Each run writes an output of its own (a new object name), as a real transcoder writing a
file does. An input with ``"fail": "once"`` fails the first run of its segment in this
process (a transient failure).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from fastapi import FastAPI, Request

app = FastAPI()
pool = ThreadPoolExecutor(8)
failed_once: set[str] = set()
lock = threading.Lock()


def work(body: dict[str, Any]) -> dict[str, Any]:
    time.sleep(float(body.get("seconds", 0)))
    segment = f"{body.get('video')}:{body.get('segment')}:{body.get('profile')}"
    if body.get("fail") == "once":
        with lock:
            first = segment not in failed_once
            failed_once.add(segment)
        if first:
            raise RuntimeError(f"encoder crashed on {segment}")
    return {"uri": f"s3://segments/{segment}/{uuid.uuid4().hex}.mp4", "frames": 250}


def run_and_call_back(body: dict[str, Any], callback_url: str) -> None:
    try:
        result = {"result_type": "SUCCESS", **work(body)}
    except Exception as exc:
        result = {"result_type": "FAILED", "error_msg": str(exc)}
    with contextlib.suppress(httpx.HTTPError):  # the sample never retries
        httpx.post(callback_url, json=result, timeout=5)


@app.post("/segments")
async def segments(request: Request) -> dict[str, Any]:
    body = await request.json()
    callback = request.headers.get("X-Callback-Url")
    if request.headers.get("X-Mode") == "async" and callback:
        pool.submit(run_and_call_back, body, callback)
        return {"result_type": "SUCCESS"}
    return {"result_type": "SUCCESS", **work(body)}
