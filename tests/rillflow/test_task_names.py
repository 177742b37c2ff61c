"""A mounted task's default name is the handler's qualified name, as for the decorator: two
different handlers that would share it on one executor are refused."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from rill_executor import AsyncLedger, ConfigError
from rill_executor.rillflow import RillFlowExecutor

SOURCE = """
def encode(job: dict) -> str:
    return job["video"]

def mount(executor, path, **options):
    return executor.task(path, key=lambda job: job["video"], **options)(encode)
"""


def _module(name: str, file: Path) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(SOURCE, str(file), "exec"), module.__dict__)
    return module


def test_two_handlers_with_one_default_name_are_refused(tmp_path: Path) -> None:
    executor = RillFlowExecutor(AsyncLedger("memory://", namespace="segments"))
    encode = _module("encoders", tmp_path / "encoders.py")
    encode.mount(executor, "/encode")
    _module("app", tmp_path / "encoders.py").mount(executor, "/encode-again")  # one function
    with pytest.raises(ConfigError, match=r"'encode'.*idempotent\(name=\.\.\.\)"):
        _module("thumbnails", tmp_path / "thumbnails.py").mount(executor, "/thumbnail")
    _module("thumbnails", tmp_path / "thumbnails.py").mount(executor, "/thumb", name="thumb")
    assert [r.name for r in executor.router.routes] == [  # type: ignore[attr-defined]
        *["encode"] * 4,  # two paths, POST and GET each
        *["thumb"] * 2,
    ]


def test_each_task_route_is_one_openapi_operation_per_method(
    recwarn: pytest.WarningsRecorder,
) -> None:
    from fastapi import FastAPI

    executor = RillFlowExecutor(AsyncLedger("memory://", namespace="segments"))
    for path in ("/encode", "/thumbnail"):
        _module("encoders", Path("encoders.py")).mount(executor, path, name=path.strip("/"))
    app = FastAPI()
    app.include_router(executor.router)
    paths = app.openapi()["paths"]
    ids = [paths[p][m]["operationId"] for p in ("/encode", "/thumbnail") for m in ("post", "get")]
    assert len(set(ids)) == 4, ids
    assert not [w for w in recwarn if "Duplicate Operation ID" in str(w.message)]
