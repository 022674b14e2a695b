"""``GET /healthz``: database, broker and signing key, each reported; 503 when one is down (issue 4 §3)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def parts(response: Any) -> dict[str, Any]:
    """The component statuses (``detail`` is tested in tests/verification/test_recovery.py)."""
    return {k: v for k, v in response.json().items() if k != "detail"}


def test_healthy_with_a_signing_key_and_the_embedded_eager_default(signing_key: Any, settings: Any) -> None:
    settings.CELERY_BROKER_URL = None
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert parts(response) == {"database": "ok", "broker": "eager", "signing_key": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_without_a_signing_key_it_is_503(var_dir: Any, settings: Any) -> None:
    settings.CELERY_BROKER_URL = None
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert parts(response) == {"database": "ok", "broker": "eager", "signing_key": "unavailable"}


def test_an_unreachable_broker_is_503(signing_key: Any, settings: Any) -> None:
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert parts(response) == {"database": "ok", "broker": "unavailable", "signing_key": "ok"}


@pytest.mark.broker
def test_a_reachable_broker_is_ok(signing_key: Any, settings: Any) -> None:
    settings.CELERY_BROKER_URL = os.environ["CELERY_BROKER_URL"]
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json()["broker"] == "ok"


def test_a_database_that_is_down_is_503(signing_key: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from django.db import OperationalError

    from reviewportal import views

    def down() -> Any:
        raise OperationalError("connection refused")

    monkeypatch.setattr(views.connection, "cursor", down)
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["database"] == "unavailable" and response.json()["signing_key"] == "unavailable"


def test_only_get_and_head(signing_key: Any) -> None:
    assert Client().post("/healthz").status_code == 405
