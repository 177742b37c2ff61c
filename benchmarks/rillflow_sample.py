"""The baseline of ``bench_rillflow.py``: Rill Flow's own FastAPI sample executor.

A copy of ``executors/fastapi/main.py`` in weibocom/rill-flow (the file as of commit
``c49ff01``, read at ``5cded0b``), typed and trimmed of its shell path (``language_type:
shell`` runs the body's ``data`` as a bash script; the benchmark never asks for it). The rest
is the sample's: one route, ``/executor.json``; a thread pool of 8; an async dispatch
(``X-Mode: async`` with an ``X-Callback-Url``) is submitted to the pool and answered
``{"result_type": "SUCCESS"}`` at once, and the pool's thread echoes the body back with
``executor_tag`` and posts it to the callback URL with ``requests.post`` (a new connection
each time, the answer only logged); a sync dispatch is run on the pool and its result is the
answer. It deduplicates nothing and persists nothing.

One difference: the sample configures logging at DEBUG and logs every dispatch and every
callback at INFO. Here the level is ``SAMPLE_LOG_LEVEL`` (WARNING unless set), so by default
the baseline skips that logging and is as fast as the sample's code can be;
``SAMPLE_LOG_LEVEL=DEBUG`` runs it as shipped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests
from fastapi import FastAPI, Request

logging.basicConfig(
    format="%(asctime)s - %(pathname)s[line:%(lineno)d] - %(levelname)s: %(message)s",
    level=os.environ.get("SAMPLE_LOG_LEVEL", "WARNING"),
)

app = FastAPI()
executor = ThreadPoolExecutor(max_workers=8)


@app.post("/executor.json")
async def executor_api(request: Request) -> dict[str, Any]:
    body_raw: dict[str, Any] = {}
    try:
        body_raw = await request.json()
        logging.info("header:%s, request body:%s", request.headers.items(), body_raw)

        mode = request.headers.get("X-Mode")
        callback_url = request.headers.get("X-Callback-Url")
        if mode is not None and mode == "async" and callback_url is not None:
            executor.submit(async_processor, body_raw, request)
            return {"result_type": "SUCCESS"}
        loop = asyncio.get_event_loop()
        result = await loop.run_in_executor(executor, processor, body_raw, request)
        logging.info("executor response:%s", result)
        return result
    except Exception as e:
        logging.error("executor processing failed. request body:%s %s", body_raw, e)
        return {"result_type": "FAILED", "error_msg": "Executor processing failed"}


def async_processor(request_body: dict[str, Any], request: Request) -> None:
    result_type = "SUCCESS"
    executor_response: Any
    try:
        executor_response = processor(request_body, request)
    except Exception as e:
        executor_response = "executor processor is failed"
        result_type = "FAILED"
        logging.error("executor processor is failed. request body:%s %s", request_body, e)
    finally:
        executor_response["result_type"] = result_type  # the sample's: a str on failure
        callback(executor_response, request.headers.get("X-Callback-Url"))


def processor(request_body: dict[str, Any], request: Request) -> dict[str, Any]:
    if len(request_body) == 0:
        raise Exception("request body is empty")
    request_body["executor_tag"] = "executor"
    return request_body


def callback(executor_response: dict[str, Any], callback_url: str | None) -> None:
    headers = {"Content-Type": "application/json"}
    payload = json.dumps(executor_response)

    try:
        response = requests.post(callback_url or "", headers=headers, data=payload)
        logging.info(
            "callback rill flow is success. callback url:%s, callback body:%s, response:%s",
            callback_url,
            payload,
            response,
        )
    except Exception as e:
        logging.error(
            "callback rill flow is failed. callback url:%s, callback body:%s %s",
            callback_url,
            payload,
            e,
        )
