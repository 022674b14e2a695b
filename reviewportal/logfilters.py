"""Logging filters named in settings.LOGGING (no Django imports: logging is configured before the apps load)."""

from __future__ import annotations

import logging


class OneLineForbidden(logging.Filter):
    """Django logs every 403 with the PermissionDenied traceback; a refusal is expected, so keep its one line
    (issue 14). Other statuses, 500s above all, keep their traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "django.request" and getattr(record, "status_code", None) == 403:
            record.exc_info = None
            record.exc_text = None
        return True
