"""The OpenAPI schema (``/api/schema/``) and the docs page (``/api/docs/``) with locally served assets (issue 4 §3)."""

from __future__ import annotations

import json
import re
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

OPERATIONS = {
    ("post", "/v1/rubrics"),
    ("post", "/v1/tasks"),
    ("post", "/v1/tasks/{task_id}/claims"),
    ("post", "/v1/tasks/{task_id}/contract"),
    ("post", "/v1/tasks/{task_id}/reopen"),
    ("post", "/v1/tasks/{task_id}/cases"),
    ("post", "/v1/links"),
    ("post", "/v1/manifests"),
    ("post", "/v1/baselines"),
    ("post", "/v1/evidence"),
    ("post", "/v1/verifications"),
    ("get", "/v1/verifications"),
    ("get", "/v1/verifications/{verification_id}"),
    ("post", "/v1/verifications/{verification_id}/results"),
    ("post", "/v1/verifications/{verification_id}/evidence"),
    ("get", "/v1/events"),
}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    response = Client().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return dict(json.loads(response.content))


def test_the_schema_is_public_and_describes_every_endpoint(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.")
    found = {(method, path) for path, item in document["paths"].items() for method in item}
    assert found == OPERATIONS
    schemes = document["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {**schemes["bearerAuth"], "type": "http", "scheme": "bearer"}


def test_a_bad_token_does_not_hide_the_schema() -> None:
    response = Client().get("/api/schema/", HTTP_AUTHORIZATION="Bearer nonsense")
    assert response.status_code == 200 and b"openapi" in response.content


def _free_form(node: Any, path: str, out: list[str]) -> None:
    """Objects with no named properties (free-form), wherever they are."""
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" not in node and "$ref" not in node:
            out.append(path)
        for key, value in node.items():
            _free_form(value, f"{path}/{key}", out)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _free_form(value, f"{path}/{index}", out)


def test_every_body_has_named_typed_fields(document: dict[str, Any]) -> None:
    """No free-form objects, except the error's details (context that varies by code)."""
    free: list[str] = []
    _free_form(document["components"]["schemas"], "", free)
    _free_form(document["paths"], "", free)
    assert free == ["/ErrorBody/properties/details"]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                content = response.get("content", {})
                assert "application/json" in content, (method, path, status)
            if method == "post" and not path.endswith(("/claims", "/reopen")):  # those two take no body
                assert "application/json" in operation["requestBody"]["content"], (method, path)


def test_every_operation_documents_its_errors_and_security(document: dict[str, Any]) -> None:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert {"400", "401", "403", "404"} <= set(operation["responses"]), (method, path)
            names = {name for requirement in operation["security"] for name in requirement}
            assert "bearerAuth" in names, (method, path)
            if method == "post":
                assert {"413", "415"} <= set(operation["responses"]), (method, path)
                assert names == {"bearerAuth"}, (method, path)  # writes need a token


def test_the_schema_generates_without_warnings() -> None:
    out = StringIO()
    call_command("spectacular", "--fail-on-warn", "--validate", "--format", "openapi-json", stdout=out)
    assert json.loads(out.getvalue())["info"]["title"] == "Review portal API"


def test_the_docs_page_uses_only_local_assets() -> None:
    client = Client()
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "swagger-ui" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "no asset from another origin"
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
    assert any("swagger-ui-bundle.js" in a for a in assets)
    for asset in assets:
        response = client.get(asset)
        assert response.status_code == 200, asset
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert body, asset
    script = client.get("/api/docs/", {"script": ""})
    assert script.status_code == 200 and "/api/schema/" in script.content.decode()
