"""The Celery app: ``celery -A reviewportal worker`` / ``celery -A reviewportal beat``.

Configuration comes from Django settings under the CELERY_ namespace (see settings.py).
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_init

from reviewportal.config import ConfigurationError, exit_on_configuration_error

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewportal.settings")

app = Celery("reviewportal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_configure.connect
def _load_django_settings(sender: Any = None, **kwargs: Any) -> None:
    """Read the settings before Celery does, so a bad value gives the one-line error and exit 2, not a traceback.

    Celery swallows ``Exception`` from signal receivers; SystemExit passes through.
    """
    from django.conf import settings

    try:
        settings.INSTALLED_APPS  # noqa: B018 - forces the settings module to load
    except ConfigurationError as exc:
        exit_on_configuration_error(exc)


@task_prerun.connect
@task_postrun.connect
def close_old_connections(sender: Any = None, **kwargs: Any) -> None:
    """Before and after each task, what Django does around each request (``django.db.close_old_connections``): a
    connection that is unusable (an error since its last commit or rollback, autocommit left off) or older than
    ``CONN_MAX_AGE`` is closed, any other kept for the next task (checked before reuse when ``CONN_HEALTH_CHECKS``).
    Not around an eager task: it runs inside its caller's request or transaction (``CELERY_DB_REUSE_MAX`` keeps
    Celery's own fixup from closing every connection)."""
    from django.db import close_old_connections as close_unusable_or_old

    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    close_unusable_or_old()


@worker_init.connect
def _require_signing_key(sender: Any = None, **kwargs: Any) -> None:
    """SPEC §8: a worker signs receipts, so it refuses to start without a usable signing key (one line, exit 3)."""
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
    from verification.trust.signing import require_signing_key

    require_signing_key()
