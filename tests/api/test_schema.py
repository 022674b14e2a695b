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
    ("get", "/v1/verifications/{verification_id}/proof"),
    ("get", "/v1/verifications/{verification_id}/proof/envelope"),
    ("get", "/.well-known/acretix-verify/keys.json"),
    ("get", "/.well-known/acretix-verify/revoked.json"),
}
#: No credentials at all: the public keys.
PUBLIC = {"/.well-known/acretix-verify/keys.json", "/.well-known/acretix-verify/revoked.json"}


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
    """No free-form objects, except the error's details (context that varies by code) and a signed envelope's
    payload (what was signed, fields a verifier does not know included: SPEC §7)."""
    free: list[str] = []
    _free_form(document["components"]["schemas"], "", free)
    _free_form(document["paths"], "", free)
    assert free == ["/Envelope/properties/payload", "/ErrorBody/properties/details"]
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
            assert {"405", "503"} <= set(operation["responses"]), (method, path)
            if path in PUBLIC:
                assert operation.get("security") in (None, [], [{}]), path
                continue
            expected = {"401", "403", "404"} if path.endswith(("/proof", "/envelope")) else {"400", "401", "403", "404"}
            assert expected <= set(operation["responses"]), (method, path)
            if not path.endswith(("/proof", "/envelope")):  # the throttled API: 429 with Retry-After
                assert operation["responses"]["429"]["headers"]["Retry-After"]["required"] is True, (method, path)
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


def test_every_error_is_the_one_shape_with_a_registered_code(document: dict[str, Any]) -> None:
    from verification.kernel.reasons import Reason

    error_body = document["components"]["schemas"]["ErrorBody"]["properties"]["code"]
    ref = error_body["allOf"][0]["$ref"]
    enum = document["components"]["schemas"][ref.rsplit("/", 1)[1]]["enum"]
    assert set(enum) == {reason.value for reason in Reason}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorResponse"}, (method, path, status)


def test_the_headers_the_api_sends_are_documented(document: dict[str, Any]) -> None:
    submit = document["paths"]["/v1/verifications"]["post"]["responses"]
    for status in ("200", "202"):
        assert submit[status]["headers"]["Location"]["required"] is True
        assert submit[status]["headers"]["Idempotent-Replayed"]["schema"] == {"type": "string", "enum": ["true"]}
    more = document["paths"]["/v1/verifications/{verification_id}/evidence"]["post"]["responses"]
    assert more["202"]["headers"]["Location"]["required"] is True
    envelope = document["paths"]["/v1/verifications/{verification_id}/proof/envelope"]["get"]["responses"]
    assert "ETag" in envelope["200"]["headers"]


def test_links_lead_from_what_was_made_to_what_reads_it(document: dict[str, Any]) -> None:
    operations = {op["operationId"] for item in document["paths"].values() for op in item.values()}
    made = document["paths"]["/v1/verifications"]["post"]["responses"]["202"]["links"]
    assert {"verifications_get", "verifications_proof", "verifications_proof_envelope"} <= set(made)
    task = document["paths"]["/v1/tasks"]["post"]["responses"]["201"]["links"]
    assert task["tasks_claim"]["parameters"] == {"task_id": "$response.body#/id"}
    for item in document["paths"].values():
        for operation in item.values():
            for response in operation["responses"].values():
                for link in response.get("links", {}).values():
                    assert link["operationId"] in operations


def test_the_limits_in_the_schema_are_the_limits_the_api_applies(document: dict[str, Any]) -> None:
    """Numbers at the boundary (SPEC §3): the schema's bounds come from kernel.limits, not a copy."""
    from verification.kernel import limits

    schemas = document["components"]["schemas"]
    deadline = schemas["PendingCriterionRequest"]["properties"]["deadline_seconds"]
    assert (deadline["minimum"], deadline["maximum"]) == (limits.DURATION_MIN_SECONDS, limits.DURATION_MAX_SECONDS)
    weight = schemas["DigestCriterionRequest"]["properties"]["weight"]
    assert (weight["minimum"], weight["exclusiveMinimum"], weight["maximum"]) == (0, True, limits.WEIGHT_MAX)
    for name, component in schemas.items():  # every number a client sends is bounded
        for field, prop in component.get("properties", {}).items():
            if name.endswith("Request") and prop.get("type") in ("integer", "number"):
                assert "minimum" in prop and "maximum" in prop, (name, field)
            if name.endswith("Request") and prop.get("type") == "string" and "enum" not in prop:
                assert "maxLength" in prop or "pattern" in prop or "format" in prop, (name, field)
