"""WSGI entry point: ``gunicorn reviewportal.wsgi``."""

import os

from django.core.wsgi import get_wsgi_application

from reviewportal.config import ConfigurationError, exit_on_configuration_error

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewportal.settings")

try:
    application = get_wsgi_application()
except ConfigurationError as exc:
    exit_on_configuration_error(exc)

# SPEC §8: the web process refuses to start without a usable signing key (one line on stderr, exit 3). runserver
# loads this module too (WSGI_APPLICATION), so `make run` gets the same gate.
from verification.trust.signing import require_signing_key  # noqa: E402

require_signing_key()
