"""Start-up checks (``manage.py check``; ``check --deploy`` adds the deploy ones)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, register


@register(Tags.database)
def sqlite_directory_exists(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """SQLite cannot create its file in a directory that is missing; say how to fix it instead of a cryptic error."""
    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.sqlite3" or str(db["NAME"]) == ":memory:":
        return []
    directory = Path(db["NAME"]).parent
    if directory.is_dir():
        return []
    return [
        Error(
            f"the SQLite database directory {directory} does not exist",
            hint="run `python -m reviewportal.bootstrap` (make run does), or set DATABASE_URL",
            id="reviewportal.E001",
        )
    ]


@register()
def time_zone_is_utc(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """The dashboards' rollups count per UTC day
    (``verification.records.rollups``) and show days in the portal's time zone:
    the two must be the same."""
    if settings.TIME_ZONE == "UTC":
        return []
    return [
        Error(
            f"TIME_ZONE is {settings.TIME_ZONE!r}; the dashboards count per UTC day",
            hint="keep TIME_ZONE = 'UTC' (dates are shown in UTC throughout the portal)",
            id="reviewportal.E003",
        )
    ]


@register(Tags.security, deploy=True)
def not_in_test_mode(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """REVIEWPORTAL_TESTING weakens password hashing and allows a throwaway key: never in a deployment."""
    if not settings.TESTING:
        return []
    return [
        Error(
            "REVIEWPORTAL_TESTING is on: test-only password hasher and possibly a throwaway SECRET_KEY",
            hint="unset REVIEWPORTAL_TESTING; it is for the test suite only",
            id="reviewportal.E002",
        )
    ]
