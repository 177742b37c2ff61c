"""What the ledger reports: the parts of a job's status (``JobStatus``), a page of a
namespace's jobs, and the reports of its audit (``drill``), of purging and of orphan
collection; what tells a resolution (``is_resolution``, ``default_actor``, ``NO_RESULT``
for ``resolve`` without a result) and a refused token (``TOKEN_REFUSED``) on a record."""

from ._housekeeping import AuditEntry, CollectReport, ObjectState, OutputAudit
from ._listing import JobList, JobSummary
from ._namespace_audit import DrillFinding, DrillReport
from ._records import AttemptInfo, ErrorInfo, EventInfo, NoticeInfo, OutputInfo, OwnerInfo
from ._rules.events import TOKEN_REFUSED
from ._rules.purge import PurgeReport
from ._rules.resolution import NO_RESULT, default_actor, is_resolution

__all__ = [
    "AttemptInfo",
    "AuditEntry",
    "CollectReport",
    "DrillFinding",
    "DrillReport",
    "ErrorInfo",
    "EventInfo",
    "JobList",
    "JobSummary",
    "NoticeInfo",
    "ObjectState",
    "OutputAudit",
    "OutputInfo",
    "OwnerInfo",
    "NO_RESULT",
    "PurgeReport",
    "TOKEN_REFUSED",
    "default_actor",
    "is_resolution",
]
