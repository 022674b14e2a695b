"""Keyset cursors, one helper for every paged list (issue 12: the four copies became this one).

A cursor names the last row a page showed, as the values of the page's ordering columns; the next page seeks past
it (``(a, b, c) > (x, y, z)``) instead of counting rows. On the wire it is opaque: the values joined by ``|``, in
url-safe base64 without padding. ``decode`` takes the types the page expects and refuses anything else with
``invalid-request`` (a cursor is never trusted: it arrives in a URL).
"""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime
from typing import Any, Final

from verification.errors import ServiceError
from verification.kernel.reasons import Reason

#: The longest cursor accepted (a cursor is a few dozen bytes; anything longer did not come from a page of ours).
MAX_CURSOR_CHARS: Final = 512


def encode(*values: int | datetime | uuid.UUID | str) -> str:
    """The opaque cursor for a row whose ordering columns hold ``values`` (times must be aware)."""
    parts = []
    for value in values:
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError("a cursor's time must be aware")
            parts.append(value.isoformat())
        else:
            text = str(value)
            if "|" in text:
                raise ValueError("a cursor value cannot hold '|'")
            parts.append(text)
    return base64.urlsafe_b64encode("|".join(parts).encode("utf-8")).decode("ascii").rstrip("=")


def _parse(kind: type, text: str) -> Any:
    if kind is datetime:
        parsed = datetime.fromisoformat(text)
        if parsed.tzinfo is None:
            raise ValueError("naive time")
        return parsed
    if kind is int:
        if not text.lstrip("-").isdigit() or len(text) > 20:
            raise ValueError("not an integer")
        return int(text)
    if kind is uuid.UUID:
        return uuid.UUID(text)
    if kind is str:
        return text
    raise TypeError(f"a cursor holds int, datetime, UUID or str, not {kind!r}")


def decode(raw: str, *kinds: type) -> tuple[Any, ...]:
    """The values of the cursor ``raw``, one of each of ``kinds`` in order; ``invalid-request`` if it is not one."""
    try:
        if not raw or len(raw) > MAX_CURSOR_CHARS:
            raise ValueError("length")
        text = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("utf-8")
        parts = text.split("|")
        if len(parts) != len(kinds):
            raise ValueError("arity")
        return tuple(_parse(kind, part) for kind, part in zip(kinds, parts, strict=True))
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise ServiceError(Reason.INVALID_REQUEST, "cursor is not one this server issued") from None
