"""Settings from the environment: safe defaults, one clear line for a bad value, the bootstrap step."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from reviewportal import bootstrap
from reviewportal.config import ConfigurationError, database_from_url, env_bool, env_list, read_secret_key, var_dir
from tests.conftest import DATABASE_VARIABLES

REPO_ROOT = Path(__file__).resolve().parents[1]

# Variables a subprocess must not inherit from this test run (or from the CI pass it runs in).
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
    "DJANGO_SETTINGS_MODULE",
)


def _run(args: list[str], tmp_path: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    """Run a command in the repository with a clean configuration: var dir in tmp_path, then the overrides."""
    env = {key: value for key, value in os.environ.items() if key not in _CONFIG_VARIABLES}
    env["REVIEWPORTAL_VAR_DIR"] = str(tmp_path / "var")
    env.update(overrides)
    return subprocess.run(
        args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL
    )


@pytest.fixture
def bootstrapped(tmp_path: Path) -> Path:
    var = tmp_path / "var"
    assert bootstrap.ensure_var_dir(var) is True
    assert bootstrap.ensure_secret_key(var) is True
    return var


def _assert_one_line(proc: subprocess.CompletedProcess[str], variable: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"reviewportal: configuration error: {variable}: "), lines[0]
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


# --- entry points: one line, exit 2 ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DATABASE_URL", "bogus://somewhere/db"),
        ("DATABASE_URL", "postgres://user:secret@host:notaport/db"),
        ("DATABASE_URL", "not a url"),
        ("REVIEWPORTAL_DEBUG", "maybe"),
        ("REVIEWPORTAL_ALLOWED_HOSTS", " , "),
        ("CELERY_BROKER_URL", "localhost"),
    ],
)
def test_manage_check_refuses_a_bad_value_with_one_line(
    bootstrapped: Path, tmp_path: Path, variable: str, value: str
) -> None:
    proc = _run([sys.executable, "manage.py", "check"], tmp_path, **{variable: value})
    _assert_one_line(proc, variable)
    assert "secret" not in proc.stderr  # a database URL's password is never echoed


@pytest.mark.slow
def test_manage_check_refuses_a_missing_secret_key(tmp_path: Path) -> None:
    proc = _run([sys.executable, "manage.py", "check"], tmp_path)
    _assert_one_line(proc, "SECRET_KEY")
    assert "reviewportal.bootstrap" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "code",
    [
        "import reviewportal.wsgi",
        "import reviewportal.asgi",
        "from reviewportal.celery import app; app.conf.broker_url",
    ],
)
def test_other_entry_points_refuse_with_one_line(bootstrapped: Path, tmp_path: Path, code: str) -> None:
    proc = _run([sys.executable, "-c", code], tmp_path, DATABASE_URL="mysql://x/y")
    _assert_one_line(proc, "DATABASE_URL")


@pytest.mark.slow
def test_manage_check_passes_after_bootstrap(tmp_path: Path) -> None:
    proc = _run([sys.executable, "-m", "reviewportal.bootstrap"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = _run([sys.executable, "manage.py", "check"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no issues" in proc.stdout


@pytest.mark.slow
def test_check_deploy_refuses_test_mode(bootstrapped: Path, tmp_path: Path) -> None:
    proc = _run([sys.executable, "manage.py", "check", "--deploy"], tmp_path, REVIEWPORTAL_TESTING="1")
    assert proc.returncode == 1
    assert "reviewportal.E002" in proc.stderr


# --- the parsers -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"), [("1", True), ("true", True), ("TRUE", True), ("0", False), ("false", False)]
)
def test_env_bool_accepts_the_four_spellings(raw: str, expected: bool) -> None:
    assert env_bool("X", default=not expected, environ={"X": raw}) is expected


@pytest.mark.parametrize("default", [True, False])
def test_env_bool_unset_or_empty_is_the_default(default: bool) -> None:
    assert env_bool("X", default=default, environ={}) is default
    assert env_bool("X", default=default, environ={"X": ""}) is default


@pytest.mark.parametrize("raw", ["yes", "on", "2", "tru"])
def test_env_bool_refuses_anything_else(raw: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        env_bool("REVIEWPORTAL_DEBUG", default=False, environ={"REVIEWPORTAL_DEBUG": raw})
    assert info.value.variable == "REVIEWPORTAL_DEBUG"
    assert repr(raw) in info.value.why


def test_env_list_defaults_and_refuses_empty() -> None:
    assert env_list("H", default="127.0.0.1,localhost", environ={}) == ["127.0.0.1", "localhost"]
    assert env_list("H", default="x", environ={"H": " a.example , b.example "}) == ["a.example", "b.example"]
    with pytest.raises(ConfigurationError):
        env_list("H", default="x", environ={"H": ","})


def test_database_url_postgres_and_sqlite() -> None:
    pg = database_from_url("postgres://postgres@127.0.0.1:5432/portal")
    assert (pg["ENGINE"], pg["NAME"], pg["HOST"], pg["PORT"]) == (
        "django.db.backends.postgresql",
        "portal",
        "127.0.0.1",
        5432,
    )
    lite = database_from_url("sqlite:////srv/portal/db.sqlite3")
    assert (lite["ENGINE"], lite["NAME"]) == ("django.db.backends.sqlite3", "/srv/portal/db.sqlite3")


@pytest.mark.parametrize("url", ["mysql://u@h/db", "postgres://u@h:5432/", "://", "postgres://u:pw@h:port/db"])
def test_database_url_refusals_name_the_variable(url: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        database_from_url(url)
    assert info.value.variable == "DATABASE_URL"
    assert "pw" not in str(info.value)


def test_var_dir_default_and_relative(tmp_path: Path) -> None:
    assert var_dir({}) == REPO_ROOT / "var"
    assert var_dir({"REVIEWPORTAL_VAR_DIR": "elsewhere"}) == REPO_ROOT / "elsewhere"
    assert var_dir({"REVIEWPORTAL_VAR_DIR": str(tmp_path)}) == tmp_path


# --- the secret key and bootstrap ------------------------------------------------------------------------------------


def test_bootstrap_creates_a_private_key_once(tmp_path: Path) -> None:
    var = tmp_path / "var"
    assert bootstrap.ensure_var_dir(var) is True
    assert bootstrap.ensure_secret_key(var) is True
    key_file = var / "secret_key"
    first = key_file.read_text()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(var.stat().st_mode) == 0o700
    assert len(first.strip()) >= 50
    # idempotent: the second run keeps the key, and leaves no temporary file behind
    assert bootstrap.ensure_var_dir(var) is False
    assert bootstrap.ensure_secret_key(var) is False
    assert key_file.read_text() == first
    assert sorted(p.name for p in var.iterdir()) == ["secret_key"]
    assert read_secret_key(var, environ={}) == first.strip()


def test_secret_key_environment_wins(tmp_path: Path) -> None:
    assert read_secret_key(tmp_path, environ={"SECRET_KEY": "from-env"}) == "from-env"


def test_secret_key_file_readable_by_others_is_refused(bootstrapped: Path) -> None:
    (bootstrapped / "secret_key").chmod(0o644)
    with pytest.raises(ConfigurationError) as info:
        read_secret_key(bootstrapped, environ={})
    assert info.value.variable == "SECRET_KEY"
    assert "644" in info.value.why


def test_secret_key_empty_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret_key").touch(mode=0o600)
    with pytest.raises(ConfigurationError, match="is empty"):
        read_secret_key(tmp_path, environ={})


# --- the settings this process runs with -----------------------------------------------------------------------------


def test_settings_under_pytest() -> None:
    from django.conf import settings

    assert settings.TESTING is True
    assert settings.DEBUG is False
    assert settings.USE_TZ is True and settings.TIME_ZONE == "UTC"
    assert settings.LOGIN_URL == "/accounts/login/"
    assert settings.DEFAULT_AUTO_FIELD == "django.db.models.BigAutoField"
    assert settings.PASSWORD_HASHERS == ["django.contrib.auth.hashers.MD5PasswordHasher"]
    assert "django_htmx.middleware.HtmxMiddleware" in settings.MIDDLEWARE
    assert "django.contrib.admin" not in settings.INSTALLED_APPS
    assert settings.CELERY_TASK_ACKS_LATE is True
    assert settings.CELERY_TASK_REJECT_ON_WORKER_LOST is True
    assert settings.CELERY_WORKER_PREFETCH_MULTIPLIER == 1


def test_celery_is_eager_exactly_when_no_broker_is_set() -> None:
    from django.conf import settings

    from reviewportal import celery_app

    broker = os.environ.get("CELERY_BROKER_URL") or None
    assert broker == settings.CELERY_BROKER_URL
    assert settings.CELERY_TASK_ALWAYS_EAGER is (broker is None)
    assert celery_app.conf.task_always_eager is (broker is None)
    assert celery_app.conf.task_eager_propagates is True
    assert celery_app.conf.task_acks_late is True
    assert celery_app.conf.worker_prefetch_multiplier == 1


@pytest.mark.postgres
@pytest.mark.django_db
def test_postgres_pass_really_uses_postgres() -> None:
    from django.db import connection

    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('server_version_num')::int")
        (version,) = cursor.fetchone()
    assert version >= 120000


@pytest.mark.broker
def test_broker_answers() -> None:
    from reviewportal import celery_app

    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=2, interval_start=0.2, interval_step=0.2)
        assert conn.connected


@pytest.mark.slow
def test_reviewportal_migrations_are_complete(bootstrapped: Path, tmp_path: Path) -> None:
    proc = _run([sys.executable, "manage.py", "makemigrations", "reviewportal", "--check", "--dry-run"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- the service markers (tests/conftest.py) -------------------------------------------------------------------------

_MARKED_TESTS = """
import pytest

@pytest.mark.broker
def test_needs_broker():
    pass

@pytest.mark.broker
def test_skips_itself():
    pytest.skip("decided at run time")
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("broker", "required", "returncode", "outcome", "message"),
    [
        ("", "", 0, "2 skipped", "needs a Celery broker"),
        ("", "1", 1, "2 errors", "REVIEWPORTAL_REQUIRE_SERVICES=1 but this broker test cannot run"),
        ("redis://127.0.0.1:1/0", "", 0, "1 passed, 1 skipped", "decided at run time"),
        ("redis://127.0.0.1:1/0", "1", 1, "1 failed, 1 passed", "forbids skipping a service test"),
    ],
    ids=["missing-skips", "missing-required-fails", "self-skip-allowed", "self-skip-required-fails"],
)
def test_service_markers_skip_or_fail(
    tmp_path: Path, broker: str, required: str, returncode: int, outcome: str, message: str
) -> None:
    (tmp_path / "test_marked.py").write_text(_MARKED_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    broker: b\n")
    args = [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:django", "-p", "no:cacheprovider"]
    args += ["-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), "-rA", str(tmp_path / "test_marked.py")]
    env = {"PYTHONPATH": str(REPO_ROOT), "REVIEWPORTAL_REQUIRE_SERVICES": required, "CELERY_BROKER_URL": broker}
    proc = _run(args, tmp_path, **env)
    assert proc.returncode == returncode, proc.stdout
    assert outcome in proc.stdout
    assert message in proc.stdout


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_portals_postgresql_connections_do_not_jit() -> None:
    """Issue 15: JIT compilation cost more than the queue counts' statement at 1,000,000 verifications."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"
