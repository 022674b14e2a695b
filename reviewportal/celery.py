"""The Celery app: ``celery -A reviewportal worker`` / ``celery -A reviewportal beat``.

Configuration comes from Django settings under the CELERY_ namespace (see settings.py).
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import worker_init

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


@worker_init.connect
def _require_signing_key(sender: Any = None, **kwargs: Any) -> None:
    """SPEC §8: a worker signs receipts, so it refuses to start without a usable signing key (one line, exit 3)."""
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
    from verification.trust.signing import require_signing_key

    require_signing_key()
