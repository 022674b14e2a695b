"""Issue 14: evidence search finds an item by the 8-character id every page shows (and by any longer start)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.portal.conftest import Queue
from verification.evidence.models import Evidence

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(admin_user: Any, signing_key: Any) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def test_the_short_id_shown_everywhere_finds_its_item(admin: Client, queue: Queue) -> None:
    item = Evidence.objects.get(pk=Queue.evidence_ids(queue.unknown("one"))[0])
    other = Evidence.objects.get(pk=Queue.evidence_ids(queue.unknown("two"))[0])
    url = reverse("adminportal:evidence")
    for q in (str(item.pk)[:8], str(item.pk)[:8].upper(), str(item.pk)[:13], str(item.pk)):
        page = admin.get(url, {"q": q}).content.decode()
        assert f'data-evidence-row="{item.pk}"' in page, q
        if str(other.pk)[:8] != str(item.pk)[:8]:
            assert f'data-evidence-row="{other.pk}"' not in page, q
    nothing = admin.get(url, {"q": "zzzzzzzz"}).content.decode()
    assert "data-evidence-row=" not in nothing
