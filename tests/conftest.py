"""Shared fixtures for the whole suite, and the service markers.

Markers (registered in pyproject.toml, ``--strict-markers``):
- ``postgres``: runs only when the default database is PostgreSQL (DATABASE_URL=postgres://...);
- ``broker``: runs only when CELERY_BROKER_URL is set;
- ``browser``: runs only when Chromium and Playwright are installed.
Otherwise the test is skipped with the reason. With REVIEWPORTAL_REQUIRE_SERVICES=1 (the second pass of .ci/run)
a missing service, or any skip of such a test, is a failure instead.

Nothing here imports Django at module level: ``pytest -p no:django tests/kernel`` works.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings

# No timing in unit tests (performance is measured in bench/): Hypothesis's per-example deadline (200 ms) failed a
# property test whose first example took 825 ms on a loaded 2-CPU machine, and CI runs its two passes at once.
hypothesis_settings.register_profile("portal", deadline=None)
hypothesis_settings.load_profile("portal")

REPO_ROOT = Path(__file__).resolve().parents[1]

SERVICE_MARKERS = ("postgres", "broker", "browser")

#: The variables that name a database: a subprocess that sets its own DATABASE_URL must inherit neither (a SQLite
#: URL beside an inherited owner URL is a configuration error, and a PostgreSQL one would reach this run's database).
DATABASE_VARIABLES = ("DATABASE_URL", "REVIEWPORTAL_MIGRATE_DATABASE_URL")


def vectors_root() -> Path:
    """Where the public test vectors live: ``../shared/vectors`` beside the clone (or $REVIEWPORTAL_VECTORS)."""
    override = os.environ.get("REVIEWPORTAL_VECTORS")
    return Path(override) if override else REPO_ROOT.parent / "shared" / "vectors"


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    root = vectors_root()
    if not root.is_dir():
        reason = f"public test vectors not found at {root} (set REVIEWPORTAL_VECTORS or place shared/ beside the clone)"
        if vectors_required():
            pytest.fail(f"{reason}; under CI=true or REVIEWPORTAL_REQUIRE_SERVICES=1 a missing folder is a failure")
        pytest.skip(reason)
    return root


def vectors_required() -> bool:
    """Under CI (or the services pass) the vectors and SPEC.md must be there: a missing folder fails, never skips."""
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"} or require_services()


def require_services() -> bool:
    return os.environ.get("REVIEWPORTAL_REQUIRE_SERVICES", "") == "1"


def _postgres_missing() -> str | None:
    try:
        from django.conf import settings

        if not settings.configured:
            return "needs PostgreSQL: Django is not configured in this run (-p no:django?)"
        vendor = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    except Exception as exc:  # any failure to read the settings means "not available"
        return f"needs PostgreSQL: cannot read the database settings ({type(exc).__name__})"
    if vendor != "postgresql":
        return "needs PostgreSQL: set DATABASE_URL to a postgres:// URL"
    return None


def _broker_missing() -> str | None:
    if not os.environ.get("CELERY_BROKER_URL"):
        return "needs a Celery broker: set CELERY_BROKER_URL (e.g. redis://127.0.0.1:6379/0)"
    return None


def _browser_missing() -> str | None:
    # tests/browser launch Debian's Chromium at this path (never a browser downloaded by `playwright install`).
    if not Path("/usr/bin/chromium").exists():
        return "needs Chromium at /usr/bin/chromium: apt-get install chromium"
    if importlib.util.find_spec("playwright") is None:
        return "needs Playwright: pip install playwright"
    return None


_AVAILABILITY: dict[str, Callable[[], str | None]] = {
    "postgres": _postgres_missing,
    "broker": _broker_missing,
    "browser": _browser_missing,
}


def _service_markers(item: pytest.Item) -> list[str]:
    return [name for name in SERVICE_MARKERS if item.get_closest_marker(name) is not None]


def pytest_runtest_setup(item: pytest.Item) -> None:
    for name in _service_markers(item):
        reason = _AVAILABILITY[name]()
        if reason is None:
            continue
        if require_services():
            pytest.fail(f"REVIEWPORTAL_REQUIRE_SERVICES=1 but this {name} test cannot run: {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    """Under REVIEWPORTAL_REQUIRE_SERVICES=1 a service-marked test may not skip itself either."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and require_services() and _service_markers(item) and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"REVIEWPORTAL_REQUIRE_SERVICES=1 forbids skipping a service test: {report.longrepr}"


# --- least privilege on PostgreSQL (SPEC §8; verification/db_roles.py) -----------------------------------------------
# With REVIEWPORTAL_MIGRATE_DATABASE_URL set (the PostgreSQL pass of .ci/run), the test database is created and
# migrated by the owner role, the application role gets its grants, and the default alias then connects to the test
# database as the application role: the whole suite runs with the rights production has.


def split_roles() -> bool:
    """True when the suite runs with a separate owner role (the application role owns nothing)."""
    return bool(os.environ.get("REVIEWPORTAL_MIGRATE_DATABASE_URL"))


if split_roles():

    @pytest.fixture(scope="session")
    def django_db_setup(
        request: pytest.FixtureRequest,
        django_test_environment: None,
        django_db_blocker: Any,
        django_db_keepdb: bool,
    ) -> Generator[None, None, None]:
        from django.conf import settings
        from django.db import connections

        from verification import db_roles

        owner, default = connections[db_roles.OWNER_ALIAS], connections["default"]
        app, owner_name = db_roles.app_role(), db_roles.owner_role()
        assert app and owner_name, "the split needs DATABASE_URL and REVIEWPORTAL_MIGRATE_DATABASE_URL as two roles"
        old_name = default.settings_dict["NAME"]
        with django_db_blocker.unblock():
            # Created and migrated as the owner (the post_migrate receiver of db_roles grants the app role its rights).
            test_name = owner.creation.create_test_db(
                verbosity=request.config.option.verbose, autoclobber=True, keepdb=django_db_keepdb, serialize=False
            )
            default.close()
            default.settings_dict["NAME"] = settings.DATABASES["default"]["NAME"] = test_name
            db_roles.apply_grants(owner, app)
            # The test seam of ``as_owner()``: membership without inheritance (the app role is NOINHERIT), so the app
            # role has none of the owner's rights unless a test says SET ROLE. Revoked again at teardown.
            with owner.cursor() as cursor:
                cursor.execute(f'GRANT "{owner_name}" TO "{app}"')
        try:
            yield
        finally:
            with django_db_blocker.unblock():
                # A connection of its own: a run stopped early (--maxfail) may still have a test's database
                # restrictions on the alias objects here.
                raw = owner.get_new_connection(owner.get_connection_params())
                try:
                    raw.autocommit = True
                    raw.execute(f'REVOKE "{owner_name}" FROM "{app}"')
                finally:
                    raw.close()
                default.close()
                default.settings_dict["NAME"] = settings.DATABASES["default"]["NAME"] = old_name
                if not django_db_keepdb:
                    owner.creation.destroy_test_db(old_name, verbosity=0, keepdb=False)


@contextmanager
def as_owner() -> Iterator[None]:
    """Run the block on the default connection as the tables' owner (what a database administrator can do).

    Under the split the connection says ``SET ROLE <owner>`` inside a savepoint and ``RESET ROLE`` after it (an error
    in the block rolls the savepoint back, and with it the role); otherwise the default connection is the owner
    already (SQLite, or a single PostgreSQL role). The append-only triggers still fire for the owner: a test that means
    to get past them lifts them too (``tests/adminportal/conftest.guards_lifted``)."""
    from django.db import connection, transaction

    from verification import db_roles

    owner = db_roles.owner_role() if connection.vendor == "postgresql" else None
    with transaction.atomic():
        if owner is None:
            yield
            return
        with connection.cursor() as cursor:
            cursor.execute(f"SET ROLE {connection.ops.quote_name(owner)}")
        yield
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")


@contextmanager
def owner_cursor() -> Iterator[Any]:
    """A cursor of the default connection acting as the tables' owner (``as_owner``)."""
    from django.db import connection

    with as_owner(), connection.cursor() as cursor:
        yield cursor


# --- round trips (issue 15) ---------------------------------------------------------------------------------------


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What the connection sends in one round trip each: a statement outside a pipeline (the test transaction's
    savepoints left out: in production they are the transaction's BEGIN, sent with its first statement, and COMMIT),
    a whole pipeline (``pgwire.exchange``: ``"pipeline"``, or the statement it carries when it carries one alone, with
    no BEGIN or COMMIT), or a COMMIT sent on its own (``"COMMIT"``: in a test with ``transaction=True``; a commit that
    finds the transaction closed sends nothing and is not counted)."""
    import psycopg

    made: list[str] = []
    execute, commit = psycopg.Cursor.execute, psycopg.Connection.commit

    from verification import pgwire

    exchange = pgwire.exchange

    def counted_exchange(pg: Any, statements: Any, **kwargs: Any) -> Any:
        idle = pg.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        opens = idle and (kwargs.get("begin", False) or not pg.autocommit)
        alone = len(statements) == 1 and not opens and not kwargs.get("commit", False)
        made.append(statements[0].sql[:60] if alone else "pipeline")
        return exchange(pg, statements, **kwargs)

    def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        text = str(query)
        if self.connection._pipeline is None and not text.startswith(("SAVEPOINT", "RELEASE SAVEPOINT")):
            made.append(text[:60])
        return execute(self, query, *args, **kwargs)

    def counted_commit(self: Any) -> None:
        if self.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            made.append("COMMIT")
        commit(self)

    monkeypatch.setattr(pgwire, "exchange", counted_exchange)
    monkeypatch.setattr(psycopg.Cursor, "execute", counted_execute)
    monkeypatch.setattr(psycopg.Connection, "commit", counted_commit)
    yield made
