"""Who may do what in the portal (issue 5 §1): reviewers and admins decide; managers read everything, decide nothing.

Each view states its requirement with one decorator. Anonymous users are sent to the login page (302), signed-in
users without the permission get 403. The services check again (``verification.reviews.services.reviews``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, Final, TypeVar

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

#: Either one lets a user read the queue and every review page (reviewers hold the first, managers the second).
READ_PERMISSIONS: Final = ("reviewportal.review_queue", "reviewportal.view_history")
#: Claiming, releasing, renewing and deciding.
DECIDE_PERMISSION: Final = "reviewportal.decide_verification"

View = TypeVar("View", bound=Callable[..., HttpResponse])


def can_read(user: Any) -> bool:
    return bool(user.is_authenticated and user.is_active and any(user.has_perm(p) for p in READ_PERMISSIONS))


def can_decide(user: Any) -> bool:
    return bool(user.is_authenticated and user.is_active and user.has_perm(DECIDE_PERMISSION))


def _requiring(check: Callable[[Any], bool]) -> Callable[[View], View]:
    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not check(request.user):
                raise PermissionDenied
            return view(request, *args, **kwargs)

        return login_required(wrapped)  # type: ignore[return-value]

    return decorator


reader_required = _requiring(can_read)
reviewer_required = _requiring(can_decide)
