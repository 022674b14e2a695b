"""``/v1/events``: the ordered feed of state changes."""

from __future__ import annotations

from typing import Final

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from verification.api.permissions import credentials
from verification.api.serializers.events import EventPageSerializer, EventsQuerySerializer
from verification.api.views.common import READ_ERRORS, ApiView, error_responses, scopes_text
from verification.runs import selectors as run_selectors

DEFAULT_EVENTS: Final = 100


class EventsView(ApiView):
    required_scopes = {"GET": "events:read"}

    @extend_schema(
        operation_id="events_list",
        summary="The ordered feed of state changes",
        description=(
            "Events after the cursor `after` (an event id), oldest first: `verification.finished`, "
            "`verification.pending`, `verification.failed`, `verification.decided`, `result.received`, "
            "`finding.raised`. Pass `next_after` back as `after` to continue; it stays put when nothing is new. "
            + scopes_text("events:read")
        ),
        parameters=[EventsQuerySerializer],
        responses={200: EventPageSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request: Request) -> Response:
        credentials(request)
        query = EventsQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        after = query.validated_data.get("after")
        limit = query.validated_data.get("limit", DEFAULT_EVENTS)
        events = run_selectors.events_after(cursor=after, limit=limit)
        page = {
            "events": [
                {
                    "id": e.id,
                    "kind": e.kind,
                    "verification_id": e.verification_id,
                    "created_at": e.created_at,
                    "payload": e.payload,
                }
                for e in events
            ],
            "next_after": events[-1].id if events else (after or 0),
        }
        return Response(EventPageSerializer(page).data)
