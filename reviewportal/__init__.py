"""The Django project: settings, URLs, the Celery app, and the portal people use."""

from reviewportal.celery import app as celery_app

__all__ = ("celery_app",)
