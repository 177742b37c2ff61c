"""What the ledger reports: the parts of a job's status (``JobStatus``), a page of a
namespace's jobs, and the reports of its audit (``drill``), of purging and of orphan
collection."""

from ._drill import DrillFinding, DrillReport
from ._housekeeping import AuditEntry, CollectReport, ObjectState, OutputAudit
from ._listing import JobList, JobSummary
from ._purge import PurgeReport
from ._records import AttemptInfo, ErrorInfo, EventInfo, NoticeInfo, OutputInfo, OwnerInfo

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
    "PurgeReport",
]
