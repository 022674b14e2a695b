"""The security baseline on every page (issue 5 §1): an enforced CSP, htmx without eval, CSRF through hx-headers,
cookie and session settings with an idle timeout, login throttling, and ``check --deploy`` clean in production."""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.sessions.backends.base import UpdateError
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from reviewportal.portal import loop
from reviewportal.sessions import SessionStore
from tests.conftest import DATABASE_VARIABLES
from tests.portal.conftest import PASSWORD, Queue

pytestmark = pytest.mark.django_db

REPO_ROOT = Path(__file__).resolve().parents[2]
_CONFIG_VARIABLES = (
    *DATABASE_VARIABLES,
    "CELERY_BROKER_URL",
    "CELERY_RESULT_BACKEND",
    "SECRET_KEY",
    "REVIEWPORTAL_DEBUG",
    "REVIEWPORTAL_ALLOWED_HOSTS",
    "REVIEWPORTAL_VAR_DIR",
    "REVIEWPORTAL_TESTING",
    "REVIEWPORTAL_HTTPS",
    "REVIEWPORTAL_SESSION_IDLE_SECONDS",
    "DJANGO_SETTINGS_MODULE",
)


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _policy(response: Any) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    directives: dict[str, list[str]] = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            directives[words[0]] = words[1:]
    return directives


# --- Content-Security-Policy ------------------------------------------------------------------------------------


def test_every_page_carries_an_enforced_strict_csp(queue: Queue, reviewer: Any) -> None:
    verification = queue.unknown()
    client = _client(reviewer)
    for url in ("/", "/queue/", f"/review/{verification.pk}/", "/queue/awaiting-evidence/"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert "Content-Security-Policy-Report-Only" not in response  # enforced, not report-only
        policy = _policy(response)
        header = response["Content-Security-Policy"]
        assert "'unsafe-inline'" not in header and "'unsafe-eval'" not in header
        assert policy["default-src"] == ["'self'"]
        assert policy["script-src"] == ["'self'"]
        assert policy["style-src"] == ["'self'"]
        assert policy["frame-ancestors"] == ["'none'"]
        assert policy["form-action"] == ["'self'"]
        assert policy["object-src"] == ["'none'"]
        assert policy["report-uri"] == ["/csp-report/"]
        assert response["X-Frame-Options"] == "DENY"
    assert "Content-Security-Policy" in Client().get("/accounts/login/")


def test_pages_configure_htmx_without_eval_and_send_csrf_in_hx_headers(reviewer: Any) -> None:
    html = _client(reviewer).get("/queue/").content.decode()
    meta = re.search(r"<meta name=\"htmx-config\" content='([^']+)'>", html)
    assert meta is not None
    config = json.loads(meta.group(1))
    assert config["allowEval"] is False and config["includeIndicatorStyles"] is False
    assert config["allowScriptTags"] is False and config["historyCacheSize"] == 0
    assert re.search(r"<body hx-headers='\{\"X-CSRFToken\": \"[A-Za-z0-9]{64}\"\}'", html)
    # No inline behaviour anywhere: no hx-on, no inline event handlers, no trigger filters (they need eval).
    assert (
        "hx-on" not in html
        and not re.search(r"\son[a-z]+=", html)
        and "[" not in "".join(re.findall(r'hx-trigger="([^"]*)"', html))
    )
    assert " style=" not in html and "<style" not in html


def test_htmx_is_vendored_with_its_licence() -> None:
    client = Client()
    script = b"".join(client.get("/static/vendor/htmx/htmx.min.js").streaming_content)  # type: ignore[attr-defined]
    assert b'version:"2.0.11"' in script
    licence = (REPO_ROOT / "static/vendor/htmx/LICENSE").read_text()
    assert "Zero-Clause BSD" in licence
    portal_js = b"".join(client.get("/static/js/portal.js").streaming_content)  # type: ignore[attr-defined]
    assert b"visibilitychange" in portal_js and b"htmx:confirm" in portal_js


def test_violation_reports_are_logged_and_answered_204(caplog: pytest.LogCaptureFixture) -> None:
    report = {
        "csp-report": {
            "document-uri": "http://testserver/queue/",
            "violated-directive": "script-src-elem",
            "blocked-uri": "inline",
        }
    }
    with caplog.at_level(logging.WARNING, logger="reviewportal.csp"):
        response = Client().post("/csp-report/", json.dumps(report), content_type="application/csp-report")
        junk = Client().post("/csp-report/", b"\xff not json", content_type="application/csp-report")
    assert response.status_code == junk.status_code == 204
    assert "csp violation: script-src-elem blocked inline on http://testserver/queue/" in caplog.text
    too_big = Client().post("/csp-report/", b"x" * 20_000, content_type="application/csp-report")
    assert too_big.status_code == 413


# --- cookies and the idle timeout ---------------------------------------------------------------------------------


def test_session_and_csrf_cookies_are_httponly_and_samesite_lax(reviewer: Any) -> None:
    client = Client()
    login = client.post("/accounts/login/", {"username": reviewer.username, "password": PASSWORD})
    assert login.status_code == 302
    session = login.cookies[settings.SESSION_COOKIE_NAME]
    assert session["httponly"] and session["samesite"] == "Lax"
    assert int(session["max-age"]) == settings.SESSION_COOKIE_AGE == 1800
    csrf = (
        client.get("/accounts/login/").cookies.get(settings.CSRF_COOKIE_NAME)
        or client.cookies[settings.CSRF_COOKIE_NAME]
    )
    assert csrf["httponly"] and csrf["samesite"] == "Lax"


def _session_writes(client: Client, url: str) -> tuple[Any, int]:
    """The response to GET ``url`` and how many statements wrote the session row."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    writes = [q["sql"] for q in captured.captured_queries if q["sql"].startswith(("UPDATE", "INSERT"))]
    return response, sum('"django_session"' in sql for sql in writes)


def test_a_used_session_is_renewed_without_a_write_per_request_and_an_idle_one_ends(reviewer: Any) -> None:
    """The idle timeout (reviewportal/sessions.py): a page right after the session was saved reads it and writes
    nothing (no cookie either); once a save would move its end by more than SESSION_RENEW_AFTER_SECONDS, a page saves
    it and sends its cookie again; a session idle past its end is over."""
    assert not settings.SESSION_SAVE_EVERY_REQUEST and settings.SESSION_RENEW_AFTER_SECONDS == 60
    client = _client(reviewer)
    response, writes = _session_writes(client, "/queue/")
    assert response.status_code == 200 and writes == 0
    assert settings.SESSION_COOKIE_NAME not in response.cookies  # not renewed: its end would move by seconds
    stored = Session.objects.get()
    near = timezone.now() + timedelta(seconds=settings.SESSION_IDLE_SECONDS - 50)  # used 50 s ago: not yet due
    Session.objects.update(expire_date=near)
    response, writes = _session_writes(client, "/queue/")
    assert writes == 0 and Session.objects.get().expire_date == near
    due = timezone.now() + timedelta(seconds=settings.SESSION_IDLE_SECONDS - 70)  # used 70 s ago: due
    Session.objects.update(expire_date=due)
    response, writes = _session_writes(client, "/queue/")
    assert response.status_code == 200 and writes == 1
    assert int(response.cookies[settings.SESSION_COOKIE_NAME]["max-age"]) == 1800  # renewed on this request
    renewed = Session.objects.get()
    assert renewed.session_key == stored.session_key
    assert renewed.expire_date >= timezone.now() + timedelta(seconds=settings.SESSION_IDLE_SECONDS - 5)
    Session.objects.update(expire_date=timezone.now() - timedelta(seconds=1))  # idle for longer than the timeout
    response = client.get("/queue/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_changed_session_is_saved_at_once(queue: Queue, reviewer: Any) -> None:
    """A request that changes the session (here the review loop's skip list) saves it whatever its renewal."""
    item = queue.unknown("to skip")
    client = _client(reviewer)
    with CaptureQueriesContext(connection) as captured:
        response = client.post(f"/review/{item.pk}/skip", {"reason": "not mine"})
    assert response.status_code == 302
    assert any(q["sql"].startswith("UPDATE") and '"django_session"' in q["sql"] for q in captured.captured_queries)
    assert str(item.pk) in Session.objects.get().get_decoded()[loop.SKIPPED]


def test_a_stored_session_is_saved_by_one_update_and_a_deleted_one_is_not_brought_back(reviewer: Any) -> None:
    """reviewportal.sessions.SessionStore.save: an existing session's UPDATE alone (no transaction of its own: no
    savepoint inside the test's), its data and end written; a session deleted meanwhile is Django's UpdateError."""
    client = _client(reviewer)
    key = client.cookies[settings.SESSION_COOKIE_NAME].value
    store = SessionStore(key)
    store["note"] = "kept"
    with CaptureQueriesContext(connection) as captured:
        store.save()
    assert [q["sql"].split()[0] for q in captured.captured_queries] == ["UPDATE"]  # loaded already: the write alone
    stored = Session.objects.get(session_key=key)
    assert stored.get_decoded()["note"] == "kept"
    assert abs((stored.expire_date - store.get_expiry_date()).total_seconds()) < 5
    Session.objects.filter(session_key=key).delete()
    store["note"] = "again"
    with pytest.raises(UpdateError):
        store.save()
    assert not Session.objects.filter(session_key=key).exists()


def test_the_renewal_is_at_most_a_tenth_of_a_short_idle_timeout(tmp_path: Path) -> None:
    base = {"DJANGO_SETTINGS_MODULE": "reviewportal.settings", "SECRET_KEY": secrets.token_urlsafe(50)}
    code = "import django; django.setup(); from django.conf import settings as s; print(s.SESSION_RENEW_AFTER_SECONDS)"
    short = _run(tmp_path, ["-c", code], **base, REVIEWPORTAL_SESSION_IDLE_SECONDS="300")
    assert short.returncode == 0, short.stderr
    assert short.stdout.strip() == "30"


def _run(tmp_path: Path, code_or_args: list[str], **overrides: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in _CONFIG_VARIABLES}
    var = tmp_path / "var"
    var.mkdir(exist_ok=True)
    env["REVIEWPORTAL_VAR_DIR"] = str(var)
    env.update(overrides)
    return subprocess.run(
        [sys.executable, *code_or_args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


_PRINT_SETTINGS = (
    "import django, json; django.setup(); from django.conf import settings as s; "
    "print(json.dumps([s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, "
    "s.SESSION_COOKIE_AGE, s.SESSION_SAVE_EVERY_REQUEST, s.AXES_FAILURE_LIMIT, s.AXES_COOLOFF_TIME.total_seconds(), "
    "s.REVIEWPORTAL_LEASE_SECONDS]))"
)


@pytest.mark.slow
def test_settings_follow_the_environment(tmp_path: Path) -> None:
    base = {"DJANGO_SETTINGS_MODULE": "reviewportal.settings", "SECRET_KEY": secrets.token_urlsafe(50)}
    plain = _run(tmp_path, ["-c", _PRINT_SETTINGS], **base)
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout) == [False, False, False, 0, 1800, False, 5, 900.0, 900]
    tuned = _run(
        tmp_path,
        ["-c", _PRINT_SETTINGS],
        **base,
        REVIEWPORTAL_HTTPS="1",
        REVIEWPORTAL_SESSION_IDLE_SECONDS="600",
        REVIEWPORTAL_LOGIN_FAILURE_LIMIT="3",
        REVIEWPORTAL_LOGIN_COOLOFF_SECONDS="60",
        REVIEWPORTAL_LEASE_SECONDS="300",
    )
    assert tuned.returncode == 0, tuned.stderr
    assert json.loads(tuned.stdout) == [True, True, True, 31_536_000, 600, False, 3, 60.0, 300]
    bad = _run(tmp_path, ["-c", _PRINT_SETTINGS], **base, REVIEWPORTAL_SESSION_IDLE_SECONDS="half an hour")
    assert bad.returncode != 0 and "REVIEWPORTAL_SESSION_IDLE_SECONDS: expected a whole number" in bad.stderr


@pytest.mark.slow
def test_check_deploy_is_clean_with_production_settings(tmp_path: Path) -> None:
    production = {
        "DJANGO_SETTINGS_MODULE": "reviewportal.settings",
        "SECRET_KEY": secrets.token_urlsafe(64),
        "REVIEWPORTAL_DEBUG": "0",
        "REVIEWPORTAL_HTTPS": "1",
        "REVIEWPORTAL_ALLOWED_HOSTS": "portal.example.org",
    }
    proc = _run(tmp_path, ["manage.py", "check", "--deploy", "--fail-level", "WARNING"], **production)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "System check identified no issues (0 silenced)." in proc.stdout
    assert "WARNING" not in proc.stderr
    # The check can fail: the same deployment over plain HTTP is reported.
    over_http = {**production, "REVIEWPORTAL_HTTPS": "0"}
    plain = _run(tmp_path, ["manage.py", "check", "--deploy", "--fail-level", "WARNING"], **over_http)
    assert plain.returncode == 1
    # The session cookie without Secure: W010 (Django names W012 only for its own SessionMiddleware's path; the
    # portal's is reviewportal.sessions.IdleSessionMiddleware).
    assert "security.W010" in plain.stderr and "security.W016" in plain.stderr and "security.W008" in plain.stderr


# --- login throttling ------------------------------------------------------------------------------------------------


def test_five_failed_sign_ins_lock_the_account_from_that_address_for_the_cool_off(reviewer: Any) -> None:
    client = Client()
    for _ in range(4):
        response = client.post("/accounts/login/", {"username": reviewer.username, "password": "wrong-password!"})
        assert response.status_code == 200 and "didn't match" in response.content.decode()
    locked = client.post("/accounts/login/", {"username": reviewer.username, "password": "wrong-password!"})
    assert locked.status_code == 429
    assert "Too many failed sign-ins" in locked.content.decode()
    assert "Content-Security-Policy" in locked
    # Locked out: even the right password is refused now.
    right = client.post("/accounts/login/", {"username": reviewer.username, "password": PASSWORD})
    assert right.status_code == 429 and "_auth_user_id" not in client.session
    # Another account from the same address is not locked.
    other = Client().post("/accounts/login/", {"username": "someone-else", "password": "wrong-password!"})
    assert other.status_code == 200
    # After the cool-off the right password works again.
    AccessAttempt.objects.update(attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(seconds=1))
    again = client.post("/accounts/login/", {"username": reviewer.username, "password": PASSWORD})
    assert again.status_code == 302
    assert client.get("/queue/").status_code == 200
