"""The OpenAPI schema (``/api/schema/``) and its docs page (``/api/docs/``), assets served locally (no CDN).

Only the API under ``/v1/`` is described. The security schemes are the bearer token (machines) and the portal
session cookie (reads by logged-in portal users).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.negotiation import DefaultContentNegotiation

BEARER_PREFIX = "Bearer"  # noqa: S105 - the HTTP auth scheme's name, not a secret


def only_the_api(endpoints: list[tuple[str, str, str, Any]], **kwargs: Any) -> list[tuple[str, str, str, Any]]:
    """drf-spectacular preprocessing hook: describe ``/v1/`` only (not the schema and docs views themselves)."""
    return [endpoint for endpoint in endpoints if endpoint[0].startswith("/v1/")]


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
    """Swagger UI from drf-spectacular-sidecar's static files; its init script is served from this URL too."""

    url_name = "api-schema"
