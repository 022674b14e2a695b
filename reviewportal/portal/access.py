"""Who may do what in the portal (issue 5 §1): reviewers and admins decide; managers read everything, decide nothing.

Each view states its requirement with one decorator. Anonymous users are sent to the login page (302), signed-in
users without the permission get 403. The services check again (``verification.reviews.services``).
"""

from __future__ import annotations

from typing import Any, Final

from reviewportal.access import has_permission, requiring
from verification.actors.roles import DECIDE_VERIFICATION, REVIEW_QUEUE, VIEW_HISTORY

#: Either one lets a user read the queue and every review page (reviewers hold the first, managers the second).
READ_PERMISSIONS: Final = (REVIEW_QUEUE, VIEW_HISTORY)
#: Claiming, releasing, renewing and deciding.
DECIDE_PERMISSION: Final = DECIDE_VERIFICATION


def can_read(user: Any) -> bool:
    return any(has_permission(user, p) for p in READ_PERMISSIONS)


def can_decide(user: Any) -> bool:
    return has_permission(user, DECIDE_PERMISSION)


reader_required = requiring(can_read)
reviewer_required = requiring(can_decide)
