"""What an engine integration builds on (``rill_executor.rillflow`` is one): a handler's
``IdempotentSpec``, built from the options ``idempotent`` takes by ``Ledger.spec``, run for a
dispatch by ``AsyncLedger.run`` (with the dispatch's attempt id and origin) or under a claim
already granted by ``AsyncLedger.run_claimed``; the ``RunSpan`` a run is traced under; a
claim known by reference only, from ``AsyncLedger.resume``, ended with ``finish`` of a
``commit_of`` / ``failure_of`` the integration checked first."""

from ._idempotent import IdempotentOptions, IdempotentSpec
from ._store import Completion
from ._telemetry import RunSpan

__all__ = ["Completion", "IdempotentOptions", "IdempotentSpec", "RunSpan"]
