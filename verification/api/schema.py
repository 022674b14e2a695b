"""The OpenAPI schema (``/api/schema/``) and its docs page (``/api/docs/``), assets served locally (no CDN).

Only the API under ``/v1/`` is described. The security schemes are the bearer token (machines) and the portal
session cookie (reads by logged-in portal users).
"""

from __future__ import annotations

from typing import Any, Final

from django.http import HttpResponse
from django.utils.html import format_html
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object, set_query_parameters
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request

BEARER_PREFIX = "Bearer"  # noqa: S105 - the HTTP auth scheme's name, not a secret


def only_the_api(endpoints: list[tuple[str, str, str, Any]], **kwargs: Any) -> list[tuple[str, str, str, Any]]:
    """drf-spectacular preprocessing hook: describe ``/v1/`` and the well-known key endpoints only (not the schema
    and docs views themselves)."""
    return [endpoint for endpoint in endpoints if endpoint[0].startswith(("/v1/", "/.well-known/acretix-verify/"))]


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "verification.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        definition: dict[str, Any] = build_bearer_security_scheme_object(
            header_name="Authorization", token_prefix=BEARER_PREFIX
        )
        definition["description"] = "An API token `rpt_...` bound to one actor and its execution boundary, with scopes."
        return definition


class PortalSessionScheme(OpenApiAuthenticationExtension):
    target_class = "verification.api.authentication.PortalSessionAuthentication"
    name = "portalSession"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        from django.conf import settings

        return {
            "type": "apiKey",
            "in": "cookie",
            "name": settings.SESSION_COOKIE_NAME,
            "description": "A logged-in portal user (reviewer, manager, admin) may use the GET endpoints.",
        }


class SchemaView(SpectacularAPIView):
    """The schema as YAML, or JSON with ``?format=json`` (standard negotiation, unlike the API's JSON-only)."""

    content_negotiation_class = DefaultContentNegotiation


class DocsView(SpectacularSwaggerSplitView):
    """Swagger UI from drf-spectacular-sidecar's static files; its init script is served from this URL too.

    The page itself is built here rather than from drf-spectacular's template, which carries an inline ``<style>``
    that the portal's Content-Security-Policy (no inline anything) refuses: every asset is a same-origin file.
    """

    url_name = "api-schema"

    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.GET.get("script") is not None:
            response: HttpResponse = super().get(request, *args, **kwargs)
            return response
        page = format_html(
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{}</title>\n'
            '<link rel="icon" href="{}">\n<link rel="stylesheet" href="{}">\n</head>\n<body>\n'
            '<div id="swagger-ui"></div>\n<script src="{}"></script>\n<script src="{}"></script>\n'
            '<script src="{}"></script>\n</body>\n</html>\n',
            self.title or "Review portal API",
            self._swagger_ui_favicon(),
            self._swagger_ui_resource("swagger-ui.css"),
            self._swagger_ui_resource("swagger-ui-bundle.js"),
            self._swagger_ui_resource("swagger-ui-standalone-preset.js"),
            set_query_parameters(url=request.get_full_path(), script=""),
        )
        return HttpResponse(page, content_type="text/html; charset=utf-8")


# --- what the generator cannot see: the errors every view may give, the headers, the links (issue 13 item 4) --------

#: Any text without a NUL character (what every CharField accepts), as a JSON Schema pattern.
NO_NUL: Final = "^[^\\u0000]*$"
ERROR_REF: Final = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
RETRY_AFTER: Final = {
    "Retry-After": {
        "description": "whole seconds to wait before sending the same request again",
        "schema": {"type": "integer", "minimum": 1},
        "required": True,
    }
}
#: Errors any view of the API may answer, whatever its own documentation lists (``api.errors``).
COMMON_ERRORS: Final = {
    "405": "method-not-allowed",
    "406": "invalid-request: the API answers application/json only",
    "429": "rate-limited: this token sent more requests than its rate allows (REVIEWPORTAL_API_RATE); Retry-After",
    "503": "service-unavailable (the database or the broker) or no-signing-key; Retry-After when it will pass",
}
#: The public key endpoints do not go through the API's throttle or negotiation (the proof endpoints do).
UNTHROTTLED: Final = ("/.well-known/",)
LOCATION: Final = {
    "Location": {
        "description": "the verification to poll: /v1/verifications/{id}",
        "schema": {"type": "string", "pattern": r"^/v1/verifications/[0-9a-f-]{36}$"},
        "required": True,
    }
}
REPLAYED: Final = {
    "Idempotent-Replayed": {
        "description": "present (true) when an Idempotency-Key replay gave back the verification it made before",
        "schema": {"type": "string", "enum": ["true"]},
    }
}
ETAG: Final = {
    "ETag": {"description": "the head entry's content hash, quoted", "schema": {"type": "string"}, "required": True}
}
WWW_AUTH: Final = {"WWW-Authenticate": {"description": "the bearer challenge (RFC 6750)", "schema": {"type": "string"}}}


def _links(parameter: str, expression: str, *operations: str) -> dict[str, Any]:
    return {operation: {"operationId": operation, "parameters": {parameter: expression}} for operation in operations}


#: OpenAPI links (schemathesis follows them in its stateful phase): from a created record to what reads or acts on it.
LINKS: Final = {
    ("tasks_create", "201"): _links(
        "task_id", "$response.body#/id", "tasks_claim", "tasks_accept_contract", "tasks_reopen", "tasks_freeze_case"
    ),
    **{
        (operation, status): _links(
            "verification_id",
            "$response.body#/id",
            "verifications_get",
            "verifications_proof",
            "verifications_proof_envelope",
            "verifications_deliver_result",
            "verifications_add_evidence",
        )
        for operation in ("verifications_submit", "verifications_add_evidence", "verifications_deliver_result")
        for status in ("200", "202")
    },
}


def complete_schema(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the common errors, the response headers and the links; request bodies
    refuse unknown fields (``StrictSerializer``: 400 ``unknown-field``), so their schemas say so."""
    for name, component in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request") and component.get("type") == "object":
            component["additionalProperties"] = False
            for prop in component.get("properties", {}).values():
                if prop.get("type") == "string" and "pattern" not in prop and "enum" not in prop:
                    prop["pattern"] = NO_NUL  # REST framework's CharField refuses a NUL character
    for path, item in result.get("paths", {}).items():
        for operation in item.values():
            responses = operation.setdefault("responses", {})
            for status, words in COMMON_ERRORS.items():
                if status in ("406", "429") and any(part in path for part in UNTHROTTLED):
                    continue
                responses.setdefault(status, {"description": words, "content": ERROR_REF})
            if "429" in responses:
                responses["429"]["headers"] = dict(RETRY_AFTER)
            if "503" in responses:  # no-signing-key does not pass by waiting: no Retry-After then
                responses["503"]["headers"] = {"Retry-After": {**RETRY_AFTER["Retry-After"], "required": False}}
            if "401" in responses:
                responses["401"]["headers"] = dict(WWW_AUTH)
            name = operation.get("operationId", "")
            for status, response in responses.items():
                if name in ("verifications_submit", "verifications_add_evidence") and status in ("200", "202"):
                    response["headers"] = {**LOCATION, **(REPLAYED if name == "verifications_submit" else {})}
                if name == "verifications_proof_envelope" and status == "200":
                    response["headers"] = dict(ETAG)
                links = LINKS.get((name, status))
                if links:
                    response["links"] = links
    return result
