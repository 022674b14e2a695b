"""Request parsing and content negotiation for the API (issue 4 §3).

Bodies are parsed strictly (SPEC §7): a submission is hashed (``submission_hash``) and a rubric is hashed
(``rubric_hash``), so the bytes received must mean exactly one thing: duplicate keys, NaN/Infinity, lone
surrogates and integers outside ±(2^53−1) are refused with their own codes. A body larger than
``REVIEWPORTAL_API_MAX_BODY_BYTES`` is refused with 413 before it is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import IO, Any

from django.conf import settings
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

from verification.api.errors import ApiError
from verification.kernel.canonical import loads_strict
from verification.kernel.errors import StrictJSONError
from verification.kernel.reasons import Reason


def max_body_bytes() -> int:
    return int(settings.REVIEWPORTAL_API_MAX_BODY_BYTES)


def declared_length(meta: Mapping[str, Any]) -> int | None:
    """The request's ``Content-Length`` as an int, or None when absent or unreadable."""
    raw = meta.get("CONTENT_LENGTH")
    try:
        return int(raw) if raw not in (None, "") else None
    except (TypeError, ValueError):
        return None


def refuse_oversize(meta: Mapping[str, Any]) -> None:
    limit = max_body_bytes()
    length = declared_length(meta)
    if length is not None and length > limit:
        raise ApiError(
            Reason.PAYLOAD_TOO_LARGE,
            f"the body has {length} bytes; the limit is {limit}",
            details={"limit_bytes": limit, "length_bytes": length},
        )


class StrictJSONParser(BaseParser):
    """``application/json`` through the kernel's strict parser, bounded in size."""

    media_type = "application/json"

    def parse(
        self, stream: IO[bytes] | None, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        request = (parser_context or {}).get("request")
        meta = getattr(request, "META", {}) if request is not None else {}
        refuse_oversize(meta)
        limit = max_body_bytes()
        data = stream.read(limit + 1) if stream is not None else b""
        if len(data) > limit:  # a body without Content-Length (chunked) is bounded here
            raise ApiError(Reason.PAYLOAD_TOO_LARGE, f"the body exceeds {limit} bytes", details={"limit_bytes": limit})
        try:
            return loads_strict(data)
        except StrictJSONError as exc:
            raise ApiError(exc.reason, exc.detail, status=400) from None


class JsonOnly(BaseContentNegotiation):
    """The API speaks JSON whatever the ``Accept`` header asks for: an error is still readable, never a 406."""

    def select_parser(self, request: Request, parsers: Sequence[BaseParser]) -> BaseParser | None:
        content_type = request.content_type.split(";", 1)[0].strip().lower()
        for parser in parsers:
            if content_type == parser.media_type:
                return parser
        return None

    def select_renderer(
        self, request: Request, renderers: Sequence[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = renderers[0]
        return renderer, renderer.media_type
