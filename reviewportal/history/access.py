"""Who may see and do what here (issue 6; roles in ``verification/actors/roles.py``).

- ``view_history`` (reviewers, managers, admins): the history, timelines, exports, proof bundles and dashboards. The
  dashboards are aggregates of the same rows the history shows one by one, so they need nothing more.
- ``view_findings`` (managers, admins): the findings list and each finding.
- ``close_finding`` (managers, admins): acknowledging or closing a finding, with a rationale. Reviewers may not.

Each view states its requirement with one decorator: anonymous users go to the login page (302), signed-in users
without the permission get 403. The services check again (``verification.reviews.services.findings``, ``…exports``).
"""

from __future__ import annotations

from typing import Any, Final

from reviewportal.access import has_permission, requiring
from verification.actors.roles import CLOSE_FINDING, INSPECT_CHAINS, VIEW_FINDINGS, VIEW_HISTORY

HISTORY_PERMISSION: Final = VIEW_HISTORY
FINDINGS_PERMISSION: Final = VIEW_FINDINGS
CLOSE_PERMISSION: Final = CLOSE_FINDING
CHAIN_PERMISSION: Final = INSPECT_CHAINS


def can_view_history(user: Any) -> bool:
    return has_permission(user, HISTORY_PERMISSION)


def can_view_findings(user: Any) -> bool:
    return has_permission(user, FINDINGS_PERMISSION)


def can_close_findings(user: Any) -> bool:
    return has_permission(user, FINDINGS_PERMISSION) and has_permission(user, CLOSE_PERMISSION)


def can_inspect_chains(user: Any) -> bool:
    return has_permission(user, CHAIN_PERMISSION)


history_required = requiring(can_view_history)
findings_required = requiring(can_view_findings)
closer_required = requiring(can_close_findings)
