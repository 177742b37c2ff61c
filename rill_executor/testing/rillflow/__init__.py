"""A Rill Flow engine simulator to test an executor against, over real HTTP.

Needs the ``rillflow`` and ``testing`` extras (FastAPI, httpx, uvicorn)::

    pip install 'rill-executor[rillflow,testing]'

``EngineSimulator`` serves the engine's callback endpoints (``/flow/trigger.json``,
``/flow/finish.json``) on 127.0.0.1 (``port=``, or a free one) and dispatches to your executor the
way the engine does, one by one (``submit`` with ``Task`` s) or as a DAG loaded from the
engine's own YAML descriptor (``Dag.load``, ``submit_dag``): its headers and query
parameters, its client timeouts and one identical resend, sync and async patterns, the
retry policy, async timeouts, redo, input and output mappings through the execution's
context, foreach. It records every dispatch and callback. ``serve_app`` runs an ASGI app
(your executor) the same way, in-process.
"""

from ._dag import Dag
from ._dispatch import Transport
from ._engine import EngineSimulator
from ._model import (
    CallbackRecord,
    DagStatus,
    DispatchRecord,
    Pattern,
    Task,
    TaskStatus,
    TaskView,
    Transition,
)
from ._policy import Retry
from ._server import serve_app
from ._sign import callback_sign, verify_callback_sign

__all__ = [
    "CallbackRecord",
    "Dag",
    "DagStatus",
    "DispatchRecord",
    "EngineSimulator",
    "Pattern",
    "Retry",
    "Task",
    "TaskStatus",
    "TaskView",
    "Transition",
    "Transport",
    "callback_sign",
    "serve_app",
    "verify_callback_sign",
]
