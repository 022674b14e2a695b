"""No 5xx from any page or API endpoint, whatever a query string holds (issue 13 item 3, SPEC §3).

First the reproduced faults: ``?until=9999-12-31`` on the history and security-log pages and exports, and a NUL
byte (``%00``) in every text filter — a 500 on PostgreSQL before (run this file with DATABASE_URL=postgres://…
too). Then a walk over every URL pattern the resolver knows, signed in with every role and with an API token,
with a NUL byte, far dates, a negative number and a ~10 MB query string: each answers 2xx, 3xx or 4xx.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.portal.conftest import PASSWORD, ensure_roles
from verification.actors.services.actors import SCOPES, actor_create, token_issue

pytestmark = pytest.mark.django_db

NUL = "a\x00b"
FAR_DATES = ("9999-12-31", "0001-01-01", "9999-12-31T23:59:59-12:00")
BAD_VALUES = (NUL, *FAR_DATES, "-1", "-9007199254740993", "1e308")
#: Every filter and paging parameter a page or endpoint reads.
PARAMETERS = (
    "subject", "q", "actor", "who", "target", "kind", "since", "until", "cursor", "limit", "after", "page",
    "verdict", "determination", "flagged", "state", "reason", "reviewer", "authority", "task", "cycle", "status",
    "submitted_by", "rubric_hash", "age", "period", "format", "next", "status_filter", "role", "purpose",
)
TEN_MB = 10 * 1024 * 1024


@pytest.fixture
def everyone(django_user_model: Any) -> Client:
    """A person with every role (admin, manager, reviewer), signed in."""
    ensure_roles()
    user = django_user_model.objects.create_user(username="ada", password=PASSWORD)
    user.groups.add(*Group.objects.filter(name__in=["admin", "manager", "reviewer"]))
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.fixture
def bearer(db: None) -> str:
    actor = actor_create(name="walker", kind="agent")
    _, raw = token_issue(actor=actor, boundary="walk-host", scopes=sorted(SCOPES))
    return f"Bearer {raw}"


def _consume(response: Any) -> int:
    """The status, after reading a streamed body to its end (a fault while streaming is a 5xx too)."""
    if getattr(response, "streaming", False):
        try:
            b"".join(response.streaming_content)
        except Exception as exc:  # the stream broke: as bad as a 500
            pytest.fail(f"streamed body raised {type(exc).__name__}: {exc}")
    return int(response.status_code)


# --- the reproduced faults ---------------------------------------------------------------------------------------

PAGES_WITH_DATES = ("/history/", "/history/export.csv", "/admin/security-log/", "/admin/security-log.csv")
TEXT_FILTERS = (
    ("/history/", "subject"),
    ("/queue/", "subject"),
    ("/admin/evidence/", "q"),
    ("/admin/tokens/", "actor"),
    ("/admin/security-log/", "who"),
    ("/admin/security-log/", "target"),
)


@pytest.mark.parametrize("path", PAGES_WITH_DATES)
@pytest.mark.parametrize("until", ["9999-12-31", "0001-01-01", "10000-01-01"])
def test_a_far_until_is_a_page_level_answer(everyone: Client, path: str, until: str) -> None:
    response = everyone.get(path, {"until": until})
    status = _consume(response)
    assert status in (200, 400), status
    if status == 200 and until != "9999-12-31" and not getattr(response, "streaming", False):
        assert "between 1970-01-01 and 9999-12-31" in response.content.decode() or "YYYY-MM-DD" in (
            response.content.decode()
        )


@pytest.mark.parametrize(("path", "name"), TEXT_FILTERS)
def test_a_nul_byte_in_a_text_filter_is_refused_with_400(everyone: Client, path: str, name: str) -> None:
    response = everyone.get(f"{path}?{name}=a%00b")
    assert _consume(response) == 400


def test_a_nul_byte_in_an_api_filter_is_the_api_error(everyone: Client, bearer: str) -> None:
    from tests.api.conftest import assert_error

    response = Client().get("/v1/verifications?submitted_by=a%00b", HTTP_AUTHORIZATION=bearer)
    assert_error(response, 400, "invalid-request")


# --- every URL pattern -----------------------------------------------------------------------------------------------


def _sample(pattern: Any) -> str | None:
    """A concrete path for a pattern: each converter's argument filled with a well-formed value."""
    route = getattr(pattern, "_route", None)
    if route is None:  # a regex pattern: its literal prefix is enough to reach the view or its 404
        regex = str(pattern.regex.pattern).lstrip("^").rstrip("$")
        return regex.split("(")[0].replace("\\", "")
    for name, converter in getattr(pattern, "converters", {}).items():
        kind = type(converter).__name__
        value = {"UUIDConverter": str(uuid.uuid4()), "IntConverter": "1"}.get(kind, "x")
        route = route.replace(f"<{kind.removesuffix('Converter').lower()}:{name}>", value)
        route = route.replace(f"<{name}>", value)
    return route


def _walk(patterns: list[Any], prefix: str = "") -> Iterator[str]:
    for p in patterns:
        part = _sample(p.pattern)
        if part is None:
            continue
        if isinstance(p, URLResolver):
            yield from _walk(list(p.url_patterns), prefix + part)
        elif isinstance(p, URLPattern):
            yield "/" + (prefix + part).lstrip("/")


def all_paths() -> list[str]:
    return sorted(set(_walk(list(get_resolver().url_patterns))))


def test_the_walk_reaches_the_pages_named_in_the_issue() -> None:
    paths = all_paths()
    assert {"/history/", "/history/export.csv", "/admin/security-log/", "/queue/", "/v1/verifications"} <= set(
        paths
    ), paths


def test_every_url_answers_bad_query_strings_without_a_5xx(everyone: Client, bearer: str) -> None:
    failures: list[str] = []
    reached = 0
    for path in all_paths():
        headers = {"HTTP_AUTHORIZATION": bearer} if path.startswith("/v1/") else {}
        plain = _consume(everyone.get(path, **headers))
        reached += plain < 400
        # A 503 that the plain request answers too is a dependency's signal (/healthz without a broker), not a fault.
        allowed = {plain} if plain == 503 else set()
        for value in BAD_VALUES:
            status = _consume(everyone.get(path, dict.fromkeys(PARAMETERS, value), **headers))
            if status >= 500 and status not in allowed:
                failures.append(f"{status} GET {path} with {value!r}")
        status = _consume(everyone.get(path, {"subject": "s" * TEN_MB}, **headers))
        if status >= 500 and status not in allowed:
            failures.append(f"{status} GET {path} with a 10 MB query string")
    assert failures == [], "\n".join(failures)
    assert reached >= 20  # the walk reached real pages, not only refusals
