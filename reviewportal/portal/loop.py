"""The review loop's session state (issue 14): what this reviewer skipped, how many they decided, and a refused
form kept across a redirect (Post/Redirect/Get) so reload and back never resubmit or meet a 405.

Only pks, counts and the reviewer's own form text live in the session (signed cookie or database: settings).
"""

from __future__ import annotations

from typing import Any, Final

from django.http import HttpRequest

from reviewportal import prg

SKIPPED: Final = "portal.skipped"
DECIDED: Final = "portal.decided"
LAST_DECIDED: Final = "portal.last_decided"
#: The last decided item's task title, kept with it (a task's title never changes): the progress line needs no query.
LAST_TITLE: Final = "portal.last_title"
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


def decided(request: HttpRequest) -> int:
    value = request.session.get(DECIDED, 0)
    return value if isinstance(value, int) and value >= 0 else 0


def count_decision(request: HttpRequest, verification_id: Any, title: str = "") -> None:
    """One more decided in this session; a replayed form (the same item again at once) is not counted twice.
    ``title``: the item's task title, shown with the link to it."""
    if last_decided(request) == str(verification_id):
        return
    request.session[DECIDED] = decided(request) + 1
    request.session[LAST_DECIDED] = str(verification_id)
    request.session[LAST_TITLE] = title


def last_decided(request: HttpRequest) -> str | None:
    value = request.session.get(LAST_DECIDED)
    return str(value) if value else None


def last_title(request: HttpRequest) -> str:
    """The last decided item's task title ("" when none was kept)."""
    value = request.session.get(LAST_TITLE)
    return value if isinstance(value, str) else ""


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
