"""What an engine integration builds on (``rill_executor.rillflow`` is one): a handler's
``IdempotentSpec``, built from the options ``idempotent`` takes by ``Ledger.spec``, run for a
dispatch by ``AsyncLedger.run`` (with the dispatch's attempt id and origin) or under a claim
already granted by ``AsyncLedger.run_claimed``; the ``RunSpan`` a run is traced under; a
claim known by reference only, from ``AsyncLedger.resume``, ended with ``finish`` of a
``commit_of`` / ``failure_of`` the integration checked first. Also the parts an integration
shares with the ledger: durations (``Seconds``, ``to_us``, ``check_lease``), the result codec
(``adapter_for``, ``encode_result``), the text check (``printable``) and the telemetry
scope (``tracer``, ``meter``, ``Scope``)."""

from ._codec import adapter_for, encode_result
from ._config import Seconds, check_lease, to_us
from ._idempotent import IdempotentOptions, IdempotentSpec
from ._store import Completion
from ._telemetry import RunSpan, Scope, meter, tracer
from ._text import printable

__all__ = [
    "Completion",
    "IdempotentOptions",
    "IdempotentSpec",
    "RunSpan",
    "Scope",
    "Seconds",
    "adapter_for",
    "check_lease",
    "encode_result",
    "meter",
    "printable",
    "to_us",
    "tracer",
]
