"""The OpenAPI schema (``/api/schema/``) and its docs page (``/api/docs/``), assets served locally (no CDN).

Only the API under ``/v1/`` is described. The security schemes are the bearer token (machines) and the portal
session cookie (reads by logged-in portal users).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.utils.html import format_html
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object, set_query_parameters
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request

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
