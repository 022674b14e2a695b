"""What the records' selectors share: the refusal of a bad filter or page size, a day's local midnight."""

from __future__ import annotations

from datetime import date, datetime, time
from typing import Final

from django.utils import timezone

from verification.errors import ServiceError
from verification.kernel.reasons import Reason, explain

#: The most rows one page of the history or the findings may ask for.
MAX_PAGE: Final = 200


def bad_request(detail: str) -> ServiceError:
    """A filter, a page size or a cursor the page cannot take (``invalid-request``, SPEC §11)."""
    return ServiceError(Reason.INVALID_REQUEST, detail)


def check_limit(limit: object) -> int:
    """``limit`` if it is a page size (1..``MAX_PAGE``), else ``invalid-request``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise bad_request(f"limit is 1-{MAX_PAGE}")
    return limit


def reason_text_of(code: str | None) -> str:
    """The registry's sentence for ``code`` (empty for none or an unregistered code)."""
    try:
        return explain(Reason(code)) if code else ""
    except ValueError:
        return ""


def start_of_day(day: date) -> datetime:
    """Midnight at the start of ``day`` in the current time zone."""
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())
