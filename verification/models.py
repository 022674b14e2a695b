"""The app's model registry: Django loads ``verification.models``, which imports every feature package's models.

Each model lives in its feature (``verification.<feature>.models``) and is imported from there; this module only
makes Django discover them (the app label stays ``verification``, so tables and migrations are unchanged).
"""

from __future__ import annotations

from verification.actors.models import (  # noqa: F401 - registered with Django by this import
    Actor,
    ActorKind,
    ApiToken,
)
from verification.evidence.models import (  # noqa: F401 - registered with Django by this import
    Baseline,
    ChangeManifest,
    Evidence,
    FrozenCase,
    VerificationEvidence,
)
from verification.records.models import (  # noqa: F401 - registered with Django by this import
    DecisionDayCount,
    DecisionDelay,
    FindingDayCount,
    OpenFindingCount,
    QueueBacklogCount,
    QueueBacklogMember,
    QueueReasonCount,
    VerificationDayCount,
)
from verification.reviews.models import (  # noqa: F401 - registered with Django by this import
    Finding,
    FindingAction,
    FindingEvent,
    ReviewAction,
    ReviewDecision,
    ReviewLease,
)
from verification.runs.models import (  # noqa: F401 - registered with Django by this import
    ArrivedResult,
    Claim,
    ContractAcceptance,
    Event,
    Link,
    ReadPhase,
    Rubric,
    Task,
    TaskCycle,
    Verification,
)
from verification.trust.models import (  # noqa: F401 - registered with Django by this import
    AuditLeaf,
    AuditRecordLeaf,
    AuditRun,
    PinAction,
    PinEntry,
    PinPurpose,
    Receipt,
    ReceiptKind,
    SecurityEventKind,
    SecurityLogEntry,
    SigningKey,
)
