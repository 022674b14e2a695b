"""The security log (issue 7 §4): what goes on it, once per event; filterable and exportable by admins; append-only in
code and in the database."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import IntegrityError, connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.conftest import owner_cursor
from tests.portal.conftest import PASSWORD, Queue
from verification.actors.services.actors import actor_for_user
from verification.db_guards import AppendOnlyError, installed_triggers
from verification.reviews.models import Finding, FindingAction, FindingEvent
from verification.reviews.services.claims import review_claim, review_release
from verification.reviews.services.decisions import new_request_key, review_decide
from verification.trust.models import SecurityLogEntry
from verification.trust.services.security_log import security_log_record

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


def _kinds() -> list[str]:
    return list(SecurityLogEntry.objects.order_by("id").values_list("kind", flat=True))


def test_a_sign_in_and_a_sign_out_are_recorded_with_the_address(reviewer: Any) -> None:
    client = Client(REMOTE_ADDR="203.0.113.9")
    assert client.post(LOGIN, {"username": reviewer.username, "password": PASSWORD}).status_code == 302
    client.post("/accounts/logout/")
    login, logout = SecurityLogEntry.objects.order_by("id")
    assert (login.kind, login.user, login.target, login.ip_address) == ("login", reviewer, "rita", "203.0.113.9")
    assert (logout.kind, logout.user) == ("logout", reviewer)


def test_each_failed_sign_in_is_recorded_once_without_the_password(reviewer: Any) -> None:
    client = Client(REMOTE_ADDR="198.51.100.4")
    for _ in range(3):
        client.post(LOGIN, {"username": reviewer.username, "password": "wrong password!"})
    failed = SecurityLogEntry.objects.filter(kind="login-failed")
    assert failed.count() == 3  # not double-counted beside django-axes' own records
    entry = failed.first()
    assert entry is not None
    assert (entry.target, entry.actor_label, entry.ip_address, entry.user) == (
        "rita", "anonymous: rita", "198.51.100.4", None
    )
    assert "wrong password" not in str(entry.detail)


def test_a_lockout_is_recorded(reviewer: Any) -> None:
    client = Client(REMOTE_ADDR="198.51.100.5")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post(LOGIN, {"username": reviewer.username, "password": "wrong password!"})
    assert SecurityLogEntry.objects.filter(kind="login-failed").count() == settings.AXES_FAILURE_LIMIT
    assert SecurityLogEntry.objects.filter(kind="login-locked-out", target="rita").exists()


def test_claims_releases_and_decisions_are_recorded(queue: Queue, reviewer: Any) -> None:
    first = queue.unknown("one")
    review_claim(user=reviewer, verification=first)
    review_release(user=reviewer, verification=first)
    review_claim(user=reviewer, verification=first)
    evidence_id = Queue.evidence_ids(first)[0]
    review_decide(
        user=reviewer, verification=first, verdict="PASS", rationale="checked by hand",
        cited_evidence_ids=[evidence_id], request_key=new_request_key(),
    )
    decision = SecurityLogEntry.objects.get(kind="decision")
    assert decision.user == reviewer and decision.target == str(first.pk) and decision.detail["action"] == "PASS"
    claims = SecurityLogEntry.objects.filter(kind__in=["claim", "release"]).order_by("id")
    assert [(e.kind, e.user, e.target) for e in claims] == [
        ("claim", reviewer, str(first.pk)), ("release", reviewer, str(first.pk)), ("claim", reviewer, str(first.pk))
    ]


def test_finding_acknowledgements_and_closures_are_recorded(manager: Any) -> None:
    from verification.actors.services.actors import portal_service_actor

    finding = Finding(kind="tamper", reason="tamper", refs=["x"], dedupe_key="f" * 64)
    finding.save()
    FindingEvent(finding=finding, action=FindingAction.RAISED, actor=portal_service_actor()).save()
    actor = actor_for_user(manager)
    FindingEvent(finding=finding, action=FindingAction.ACKNOWLEDGED, actor=actor, rationale="looking").save()
    FindingEvent(finding=finding, action=FindingAction.CLOSED, actor=actor, rationale="restored from backup").save()
    assert _kinds() == ["finding-acknowledge", "finding-close"]
    closed = SecurityLogEntry.objects.get(kind="finding-close")
    assert closed.user == manager and closed.detail["rationale"] == "restored from backup"


def test_key_and_token_events_from_any_path_are_recorded(signing_key: Any, admin_user: Any) -> None:
    from verification.actors.services.actors import token_issue, token_revoke
    from verification.trust.services.keys import signing_key_rotate

    signing_key_rotate()  # the command's path, not the admin page's
    token, _ = token_issue(actor=actor_for_user(admin_user), boundary="laptop", scopes=["events:read"])
    token_revoke(token=token, by=admin_user)
    token_revoke(token=token, by=admin_user)  # idempotent: no second revocation
    assert _kinds() == ["key-create", "key-rotate", "token-issue", "token-revoke"]
    rotate = SecurityLogEntry.objects.get(kind="key-rotate")
    assert rotate.actor_label == "system: rotate_signing_key" and rotate.user is None


# --- the page, its filters, the export ------------------------------------------------------------------------------


@pytest.fixture
def admin(admin_user: Any) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def test_the_log_is_filterable_and_answers_htmx_with_the_rows(admin: Client, admin_user: Any, reviewer: Any) -> None:
    security_log_record(kind="user-roles", user=admin_user, target="rita", detail={"after": ["reviewer"]})
    security_log_record(kind="key-pin", user=admin_user, target="ed25519-00aa")
    old = security_log_record(kind="key-pin", user=admin_user, target="ed25519-00bb",
                              at=timezone.now() - timedelta(days=10))
    url = reverse("adminportal:security-log")
    page = admin.get(url, {"kind": "key-pin"}).content.decode()
    assert page.count('data-kind="key-pin"') == 2 and 'data-kind="user-roles"' not in page
    page = admin.get(url, {"target": "00aa"}).content.decode()
    assert page.count("data-log-entry=") == 1
    since = (timezone.now() - timedelta(days=2)).date().isoformat()
    page = admin.get(url, {"kind": "key-pin", "since": since}).content.decode()
    assert f'data-log-entry="{old.pk}"' not in page and page.count('data-kind="key-pin"') == 1
    page = admin.get(url, {"who": "ada", "kind": "user-roles"}).content.decode()
    assert page.count("data-log-entry=") == 1
    fragment = admin.get(url, {"kind": "key-pin"}, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="security-log">') and "<html" not in fragment
    bad = admin.get(url, {"since": "yesterday"}).content.decode()
    assert 'data-refusal="invalid-request"' in bad


def test_the_log_pages_by_keyset(admin: Client, admin_user: Any, settings: Any) -> None:
    settings.REVIEWPORTAL_ADMIN_PAGE_SIZE = 2
    entries = [security_log_record(kind="key-pin", user=admin_user, target=f"k{i}") for i in range(3)]
    url = reverse("adminportal:security-log")
    first = admin.get(url, {"kind": "key-pin"}).content.decode()
    assert f'data-log-entry="{entries[2].pk}"' in first and f'data-log-entry="{entries[0].pk}"' not in first
    second = admin.get(url, {"kind": "key-pin", "cursor": str(entries[1].pk)}).content.decode()
    assert f'data-log-entry="{entries[0].pk}"' in second


def test_the_export_is_csv_of_the_filtered_log_safe_for_spreadsheets(admin: Client, admin_user: Any) -> None:
    Client(REMOTE_ADDR="192.0.2.1").post(LOGIN, {"username": "=HYPERLINK(\"http://x\")", "password": "nope"})
    security_log_record(kind="key-pin", user=admin_user, target="ed25519-00aa", detail={"channel": "phone"})
    response = admin.get(reverse("adminportal:security-log-csv"), {"kind": "login-failed"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0] == ["id", "created_at", "kind", "actor", "username", "target", "ip_address", "detail"]
    assert len(rows) == 2 and rows[1][2] == "login-failed"
    assert rows[1][5] == "'=HYPERLINK(\"http://x\")"  # a formula is never a formula in the export
    assert rows[1][6] == "192.0.2.1"
    assert admin.get(reverse("adminportal:security-log-csv"), {"since": "bad"}).status_code == 400


# --- append-only --------------------------------------------------------------------------------------------------


def test_entries_cannot_be_edited_or_deleted_in_code(admin_user: Any) -> None:
    entry = security_log_record(kind="key-pin", user=admin_user, target="k")
    with pytest.raises(AppendOnlyError):
        SecurityLogEntry.objects.filter(pk=entry.pk).update(target="other")
    with pytest.raises(AppendOnlyError):
        SecurityLogEntry.objects.filter(pk=entry.pk).delete()
    with pytest.raises(AppendOnlyError):
        entry.delete()
    entry.target = "other"
    with pytest.raises(AppendOnlyError):
        entry.save()


#: The append-only tables of the audit block (all of them in ``db_guards.APPEND_ONLY_TABLES``, the one registry).
AUDIT_APPEND_ONLY_TABLES = ("verification_securitylogentry", "verification_auditleaf", "verification_auditrun")


@pytest.mark.parametrize("table", AUDIT_APPEND_ONLY_TABLES)
def test_the_database_refuses_to_edit_or_delete_them(table: str, admin_user: Any, signing_key: Any) -> None:
    from verification.runs.models import Verification
    from verification.trust.models import AuditLeaf, AuditRun

    if table == "verification_securitylogentry":
        security_log_record(kind="key-pin", user=admin_user, target="k")
        column, value = "target", "'other'"
    elif table == "verification_auditleaf":
        verification = Verification.objects.create(rubric_hash="1" * 64, submission_hash="2" * 64)
        AuditLeaf(position=0, verification=verification, seq=0, content_hash="a" * 64).save()
        column, value = "content_hash", "'" + "b" * 64 + "'"
    else:
        AuditRun(started_at=timezone.now(), finished_at=timezone.now()).save()
        column, value = "ok", "false"
    names = installed_triggers(connection)
    assert any(name.startswith(table) for name in names)
    for sql in (f'UPDATE "{table}" SET "{column}" = {value}', f'DELETE FROM "{table}"'):  # noqa: S608
        with pytest.raises(IntegrityError), owner_cursor() as cursor:  # the trigger, past the app role's grants
            cursor.execute(sql)


def test_the_export_reads_every_page(admin: Client, admin_user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from verification.trust import selectors as trust_selectors

    monkeypatch.setattr(trust_selectors, "EXPORT_PAGE", 2)
    made = [security_log_record(kind="key-pin", user=admin_user, target=f"k{i}") for i in range(5)]
    response = admin.get(reverse("adminportal:security-log-csv"), {"kind": "key-pin"})
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [int(r[0]) for r in rows[1:]] == [e.pk for e in reversed(made)]
