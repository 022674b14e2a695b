"""The portal's error pages (issue 14): 403 and 404 as portal pages with navigation, the user's roles and what the
page needed; a 403 is logged as one line, not a traceback."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import Client

from reviewportal.logfilters import OneLineForbidden
from tests.portal.conftest import Queue

pytestmark = pytest.mark.django_db


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_403_is_a_portal_page_naming_the_roles_and_what_the_page_needed(
    reviewer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = _client(reviewer).get("/admin/")
    assert response.status_code == 403
    page = response.content.decode()
    assert 'data-error-page="403"' in page and 'class="site-nav"' in page  # the navigation is there
    assert "signed in as <strong>rita</strong>, with the role: reviewer" in page
    assert "This page needs the admin role" in page
    forbidden = [r for r in caplog.records if r.name == "django.request" and r.levelno == logging.WARNING]
    assert len(forbidden) == 1 and forbidden[0].getMessage() == "Forbidden (Permission denied): /admin/"
    console = [h for h in logging.getLogger().handlers if any(isinstance(f, OneLineForbidden) for f in h.filters)]
    assert len(console) == 1  # the console handler of settings.LOGGING dropped the traceback Django attached
    assert forbidden[0].exc_info is None
    assert console[0].format(forbidden[0]).endswith("django.request: Forbidden (Permission denied): /admin/")


def test_the_filter_drops_the_traceback_of_a_403_only() -> None:
    try:
        raise PermissionError("denied")
    except PermissionError:
        import sys

        info = sys.exc_info()
    records = {}
    for status in (403, 500):
        record = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "status %s", (status,), info)
        record.status_code = status
        assert OneLineForbidden().filter(record)
        records[status] = record
    assert records[403].exc_info is None and records[500].exc_info is info


def test_a_user_without_a_role_is_told_so(make_user: Any) -> None:
    page = _client(make_user("nora", None)).get("/queue/").content.decode()
    assert "none (ask an admin to give you one)" in page and "reviewer, manager or admin role" in page


def test_a_404_is_a_portal_page_with_a_way_back(manager: Any, queue: Queue) -> None:
    response = _client(manager).get("/review/00000000-0000-0000-0000-000000000000/")
    assert response.status_code == 404
    page = response.content.decode()
    assert 'data-error-page="404"' in page and 'href="/queue/"' in page and "role: manager" in page


def test_a_404_for_someone_signed_out_offers_the_sign_in() -> None:
    response = Client().get("/no-such-page/")
    assert response.status_code == 404
    assert 'href="/accounts/login/?next=/no-such-page/"' in response.content.decode()
