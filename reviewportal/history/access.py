"""Who may see and do what here (issue 6; roles in ``verification/actors/roles.py``).

- ``view_history`` (reviewers, managers, admins): the history, timelines, exports, proof bundles and dashboards. The
  dashboards are aggregates of the same rows the history shows one by one, so they need nothing more.
- ``view_findings`` (managers, admins): the findings list and each finding.
- ``close_finding`` (managers, admins): acknowledging or closing a finding, with a rationale. Reviewers may not.

Each view states its requirement with one decorator: anonymous users go to the login page (302), signed-in users
without the permission get 403. The services check again (``verification.reviews.services.findings``, ``…exports``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, Final, TypeVar

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

HISTORY_PERMISSION: Final = "reviewportal.view_history"
FINDINGS_PERMISSION: Final = "reviewportal.view_findings"
CLOSE_PERMISSION: Final = "reviewportal.close_finding"
CHAIN_PERMISSION: Final = "reviewportal.inspect_chains"

View = TypeVar("View", bound=Callable[..., HttpResponse])


def _has(user: Any, permission: str) -> bool:
    return bool(user.is_authenticated and user.is_active and user.has_perm(permission))


def can_view_history(user: Any) -> bool:
    return _has(user, HISTORY_PERMISSION)


def can_view_findings(user: Any) -> bool:
    return _has(user, FINDINGS_PERMISSION)


def can_close_findings(user: Any) -> bool:
    return _has(user, FINDINGS_PERMISSION) and _has(user, CLOSE_PERMISSION)


def can_inspect_chains(user: Any) -> bool:
    return _has(user, CHAIN_PERMISSION)


def _requiring(check: Callable[[Any], bool]) -> Callable[[View], View]:
    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not check(request.user):
                raise PermissionDenied
            return view(request, *args, **kwargs)

        return login_required(wrapped)  # type: ignore[return-value]

    return decorator


history_required = _requiring(can_view_history)
findings_required = _requiring(can_view_findings)
closer_required = _requiring(can_close_findings)
