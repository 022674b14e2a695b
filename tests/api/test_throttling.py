"""Per-token API throttling (issue 13 item 6): over the rate, 429 ``rate-limited`` with ``Retry-After``.

The suite runs with a rate far above what it sends (reviewportal/settings_test.py); here a low rate is set. Counts
are per token: another token is not slowed by the first one's requests.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache

from tests.api.conftest import Api, Cast, assert_error
from verification.runs.models import Rubric

pytestmark = pytest.mark.django_db


@pytest.fixture
def low_rate(settings: Any) -> None:
    cache.clear()
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "3/minute"}}
    yield
    cache.clear()


def test_a_token_over_its_rate_gets_429_rate_limited_with_retry_after(low_rate: None, api: Api, cast: Cast) -> None:
    for _ in range(3):
        assert api.get("/v1/events", caller=cast.agent).status_code == 200
    refused = api.get("/v1/events", caller=cast.agent)
    error = assert_error(refused, 429, "rate-limited")
    assert error["details"] == {}
    assert 1 <= int(refused["Retry-After"]) <= 60


def test_a_refused_write_writes_nothing(low_rate: None, api: Api, cast: Cast) -> None:
    for _ in range(3):
        api.get("/v1/events", caller=cast.owner)
    body = {"name": "r", "criteria": [{"id": "scan", "kind": "imported"}]}
    assert_error(api.post("/v1/rubrics", body, caller=cast.owner), 429, "rate-limited")
    assert not Rubric.objects.exists()


def test_the_count_is_per_token(low_rate: None, api: Api, cast: Cast, make_caller: Any) -> None:
    for _ in range(3):
        api.get("/v1/events", caller=cast.agent)
    assert_error(api.get("/v1/events", caller=cast.agent), 429, "rate-limited")
    assert api.get("/v1/events", caller=cast.collector).status_code == 200


def test_the_suite_runs_unthrottled_by_default() -> None:
    from rest_framework.settings import api_settings

    count, _, period = api_settings.DEFAULT_THROTTLE_RATES["token"].partition("/")
    assert int(count) >= 100_000 and period == "second"
