"""The review loop's session state (issue 14): what this reviewer skipped, and a refused form kept across a redirect
(Post/Redirect/Get) so reload and back never resubmit or meet a 405. How many they decided is read from their
decisions (``reviews.selectors.reviewer_progress``), not kept here: a decision writes no session.

Only pks and the reviewer's own form text live in the session (signed cookie or database: settings).
"""

from __future__ import annotations

from typing import Any, Final

from django.http import HttpRequest

from reviewportal import prg

SKIPPED: Final = "portal.skipped"
NOTHING_LEFT: Final = "portal.nothing_left"
#: A session remembers at most this many skipped items (the oldest are forgotten first).
MAX_SKIPPED: Final = 200


def skipped(request: HttpRequest) -> list[str]:
    """The items this reviewer skipped in this session: kept out of their next claims."""
    value = request.session.get(SKIPPED, [])
    return [str(v) for v in value] if isinstance(value, list) else []


def skip(request: HttpRequest, verification_id: Any) -> None:
    items = [v for v in skipped(request) if v != str(verification_id)]
    items.append(str(verification_id))
    request.session[SKIPPED] = items[-MAX_SKIPPED:]


def mark_nothing_left(request: HttpRequest) -> None:
    """"Next item" found nothing this reviewer may claim: the next queue page shows the empty state."""
    request.session[NOTHING_LEFT] = True


def nothing_left(request: HttpRequest) -> bool:
    """Once: whether the last "Next item" found nothing (the queue page after it shows the empty state)."""
    return bool(request.session.pop(NOTHING_LEFT, False))


def keep_form(request: HttpRequest, verification_id: Any, state: dict[str, Any]) -> None:
    """A refused decision form (its fields, the refusal, its request key) for the next GET of the review page
    (the portal's one Post/Redirect/Get store, ``reviewportal.prg``)."""
    prg.keep(request, f"review:{verification_id}", state)


def kept_form(request: HttpRequest, verification_id: Any) -> dict[str, Any] | None:
    """The kept form: the page after the redirect shows it, and so does a reload, until the item is decided,
    skipped or released (``drop_form``)."""
    return prg.kept(request, f"review:{verification_id}")


def drop_form(request: HttpRequest, verification_id: Any) -> None:
    prg.drop(request, f"review:{verification_id}")
