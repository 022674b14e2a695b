"""Signing in, the three roles, the demo seeder, and /healthz."""

from __future__ import annotations

import re
import stat
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Group
from django.core.management import call_command
from django.test import Client

from reviewportal.models import PORTAL_PERMISSIONS
from verification.actors.roles import ROLE_PERMISSIONS, role_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def var_dir(tmp_path: Path, settings) -> Path:  # type: ignore[no-untyped-def]
    settings.VAR_DIR = tmp_path
    return tmp_path


def _seed(var_dir: Path) -> tuple[str, dict[str, str]]:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    lines = (var_dir / "demo-passwords.txt").read_text().splitlines()
    return out.getvalue(), dict(line.split(":", 1) for line in lines)


@pytest.fixture
def demo_passwords(var_dir: Path) -> dict[str, str]:
    return _seed(var_dir)[1]


# --- roles ---------------------------------------------------------------------------------------------------------


def test_role_groups_have_exactly_their_permissions() -> None:
    for role, codenames in ROLE_PERMISSIONS.items():
        group = Group.objects.get(name=role)
        granted = set(group.permissions.values_list("content_type__app_label", "codename"))
        assert granted == {("reviewportal", codename) for codename in codenames}, role
    all_codenames = {codename for codename, _ in PORTAL_PERMISSIONS}
    assert set(ROLE_PERMISSIONS["admin"]) == all_codenames
    assert "close_finding" not in ROLE_PERMISSIONS["reviewer"]
    assert "decide_verification" not in ROLE_PERMISSIONS["manager"]


def test_role_of() -> None:
    user_model = get_user_model()
    assert role_of(AnonymousUser()) is None
    nobody = user_model.objects.create_user("nobody", password="x" * 16)
    assert role_of(nobody) is None
    both = user_model.objects.create_user("both", password="x" * 16)
    both.groups.add(Group.objects.get(name="reviewer"), Group.objects.get(name="manager"))
    assert role_of(both) == "manager"  # the highest role wins
    both.is_active = False
    assert role_of(both) is None
    boss = user_model.objects.create_superuser("boss", password="x" * 16)
    assert role_of(boss) == "admin"


def test_permissions_reach_the_users(demo_passwords: dict[str, str]) -> None:
    user_model = get_user_model()
    reviewer = user_model.objects.get(username="reviewer")
    manager = user_model.objects.get(username="manager")
    admin = user_model.objects.get(username="admin")
    assert reviewer.has_perm("reviewportal.decide_verification")
    assert not reviewer.has_perm("reviewportal.close_finding")
    assert manager.has_perm("reviewportal.close_finding")
    assert not manager.has_perm("reviewportal.decide_verification")
    assert all(admin.has_perm(f"reviewportal.{codename}") for codename, _ in PORTAL_PERMISSIONS)


# --- seed_demo -------------------------------------------------------------------------------------------------------


def test_seed_demo_is_idempotent(var_dir: Path) -> None:
    first_output, first = _seed(var_dir)
    second_output, second = _seed(var_dir)
    assert set(first) == {"reviewer", "reviewer2", "manager", "admin"}  # a second reviewer (issue 14)
    assert first == second
    assert first_output == second_output
    assert len(set(first.values())) == 4
    for username, password in first.items():
        assert f"password {password}" in first_output
        users = get_user_model().objects.filter(username=username)
        assert users.count() == 1
        assert users.get().groups.filter(name=username.rstrip("2")).exists()
        assert users.get().check_password(password)
    assert "http://127.0.0.1:8000/" in first_output
    assert stat.S_IMODE((var_dir / "demo-passwords.txt").stat().st_mode) == 0o600


def test_seed_demo_restores_a_password_it_recorded(var_dir: Path) -> None:
    _, passwords = _seed(var_dir)
    user = get_user_model().objects.get(username="reviewer")
    user.set_password("changed-elsewhere-123")
    user.save()
    _, again = _seed(var_dir)
    assert again == passwords
    user.refresh_from_db()
    assert user.check_password(passwords["reviewer"])


# --- signing in ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["reviewer", "manager", "admin"])
def test_each_demo_role_signs_in_and_sees_its_role(demo_passwords: dict[str, str], role: str) -> None:
    client = Client()
    response = client.post("/accounts/login/", {"username": role, "password": demo_passwords[role]})
    assert response.status_code == 302
    assert response["Location"] == "/"
    page = client.get("/")
    assert page.status_code == 200
    assert f"Signed in as {role} — role: {role}" in page.content.decode()


def test_anonymous_home_redirects_to_login() -> None:
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"


def test_wrong_password_is_refused(demo_passwords: dict[str, str]) -> None:
    client = Client()
    response = client.post("/accounts/login/", {"username": "reviewer", "password": demo_passwords["reviewer"] + "x"})
    assert response.status_code == 200
    assert "didn't match" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert client.get("/").status_code == 302


def test_login_requires_csrf(demo_passwords: dict[str, str]) -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post("/accounts/login/", {"username": "admin", "password": demo_passwords["admin"]})
    assert response.status_code == 403


def test_logout_is_post_only(demo_passwords: dict[str, str]) -> None:
    client = Client()
    client.post("/accounts/login/", {"username": "manager", "password": demo_passwords["manager"]})
    assert client.get("/accounts/logout/").status_code == 405
    assert client.get("/").status_code == 200
    response = client.post("/accounts/logout/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/"
    assert client.get("/").status_code == 302


def test_base_template_has_no_inline_script_or_style(demo_passwords: dict[str, str]) -> None:
    client = Client()
    client.post("/accounts/login/", {"username": "admin", "password": demo_passwords["admin"]})
    for url in ("/", "/accounts/login/"):
        html = client.get(url).content.decode() if url == "/" else Client().get(url).content.decode()
        # Scripts come from our static files only, never inline (the CSP would block them anyway).
        tags = re.findall(r"<script\b[^>]*>(.*?)</script>", html, flags=re.S)
        assert len(tags) == len(re.findall(r"<script\b", html)) == 2
        assert all(body == "" for body in tags)
        assert re.findall(r'<script src="([^"]+)"', html) == ["/static/vendor/htmx/htmx.min.js", "/static/js/portal.js"]
        assert "<style" not in html
        assert " style=" not in html
        assert 'hx-headers=\'{"X-CSRFToken": "' in html


def test_stylesheet_is_served() -> None:
    response = Client().get("/static/css/portal.css")
    assert response.status_code == 200
    assert b"no inline styles" in b"".join(response.streaming_content)  # type: ignore[attr-defined]


# --- /healthz --------------------------------------------------------------------------------------------------------


def test_healthz_reports_the_database() -> None:
    response = Client().get("/healthz")  # broker and signing key: tests/api/test_health.py
    assert response.json()["database"] == "ok"
    assert "no-cache" in response["Cache-Control"]
