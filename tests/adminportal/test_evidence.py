"""Evidence (issue 7 §2): the artifact text with every citation highlighted (escaped), each quote hash and whether it
resolves, the verdicts that cite it; redaction with a reason (bytes gone, digest kept, accessibility ``redacted``),
after which the citing verdicts show it and rechecks answer ``evidence-redacted``."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.portal.conftest import Queue
from verification.evidence import storage
from verification.evidence.models import Evidence
from verification.kernel.errors import KernelError
from verification.kernel.reasons import Reason
from verification.reviews.services.claims import review_claim
from verification.reviews.services.decisions import new_request_key, review_decide
from verification.trust.models import SecurityLogEntry
from verification.trust.services import security_log

pytestmark = pytest.mark.django_db

LOG = b"tests: 212 passed, 0 failed\n<script>alert('x')</script> & more\n"
QUOTE = "212 passed, 0 failed"


@pytest.fixture
def admin(admin_user: Any, signing_key: Any) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def _item(queue: Queue) -> tuple[Any, Evidence]:
    verification = queue.cited_conflict("claims every test passed", log=LOG, quote=QUOTE)
    return verification, Evidence.objects.get(pk=Queue.evidence_ids(verification)[0])


def test_the_artifact_is_shown_escaped_with_its_citations_marked(admin: Client, queue: Queue) -> None:
    verification, evidence = _item(queue)
    page = admin.get(reverse("adminportal:evidence-detail", args=[evidence.pk])).content.decode()
    assert f"<mark>{QUOTE}</mark>" in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; more" in page
    assert "<script>alert" not in page
    assert 'data-quote-hash="resolves"' in page
    from verification.kernel.evidence import quote_hash

    assert quote_hash(QUOTE) in page
    assert f'data-citing-verdict="{verification.pk}" data-recheck="intact"' in page
    assert 'data-accessibility="accessible"' in page


def test_a_citation_that_does_not_resolve_is_shown_with_its_code_and_not_marked(admin: Client, queue: Queue) -> None:
    verification = queue.cited_conflict("bad hash", log=LOG, quote=QUOTE, hash_of="something else")
    evidence = Evidence.objects.get(pk=Queue.evidence_ids(verification)[0])
    page = admin.get(reverse("adminportal:evidence-detail", args=[evidence.pk])).content.decode()
    assert "<mark>" not in page
    assert 'data-quote-hash="does-not-resolve"' in page and "citation-hash-mismatch" in page


def test_redaction_removes_the_bytes_keeps_the_digest_and_the_citing_verdicts_show_it(
    admin: Client, queue: Queue, admin_user: Any
) -> None:
    verification, evidence = _item(queue)
    url = reverse("adminportal:evidence-redact", args=[evidence.pk])
    page = admin.get(url).content.decode()
    assert "data-consequences" in page and "evidence-redacted" in page
    assert admin.post(url, {"reason": "personal data"}).status_code == 200  # unconfirmed: nothing happens
    assert Evidence.objects.get(pk=evidence.pk).redacted_at is None

    response = admin.post(url, {"reason": "personal data in the log", "confirm": "on"})

    assert response.status_code == 302
    redacted = Evidence.objects.get(pk=evidence.pk)
    assert redacted.redacted_at is not None and redacted.redaction_reason == "personal data in the log"
    assert redacted.digest == evidence.digest
    assert storage.read(evidence.digest) is None
    page = admin.get(reverse("adminportal:evidence-detail", args=[evidence.pk])).content.decode()
    assert 'data-accessibility="redacted"' in page and "data-no-text" in page and "<mark>" not in page
    assert f'data-citing-verdict="{verification.pk}" data-recheck="redacted"' in page
    assert "<code data-recheck-code>evidence-redacted</code>" in page
    # the citation into it can no longer be checked, and says why
    assert 'data-quote-hash="does-not-resolve"' in page and "cannot be checked" in page
    assert evidence.digest in page
    entry = SecurityLogEntry.objects.get(kind="evidence-redact")
    assert entry.user == admin_user and entry.target == str(evidence.pk)
    assert entry.detail["reason"] == "personal data in the log"


def test_a_later_recheck_answers_evidence_redacted(queue: Queue, admin_user: Any, reviewer: Any) -> None:
    """A reviewer's PASS citing the redacted item is refused with the code (SPEC §2: never a PASS without it)."""
    verification = queue.unknown("redacted config")
    evidence = Evidence.objects.get(pk=Queue.evidence_ids(verification)[0])
    security_log.evidence_redact_as_admin(user=admin_user, evidence=evidence, reason="secret in the file")
    review_claim(user=reviewer, verification=verification)
    with pytest.raises(KernelError) as refused:
        review_decide(
            user=reviewer, verification=verification, verdict="PASS", rationale="looks fine",
            cited_evidence_ids=[str(evidence.pk)], request_key=new_request_key(),
        )
    assert refused.value.reason is Reason.EVIDENCE_REDACTED


def test_only_an_evidence_admin_may_redact(queue: Queue, reviewer: Any) -> None:
    verification = queue.unknown("not yours")
    evidence = Evidence.objects.get(pk=Queue.evidence_ids(verification)[0])
    with pytest.raises(KernelError) as refused:
        security_log.evidence_redact_as_admin(user=reviewer, evidence=evidence, reason="no")
    assert refused.value.reason is Reason.PERMISSION_DENIED
    assert Evidence.objects.get(pk=evidence.pk).redacted_at is None


def test_a_redaction_needs_a_reason(admin: Client, queue: Queue) -> None:
    _, evidence = _item(queue)
    url = reverse("adminportal:evidence-redact", args=[evidence.pk])
    assert admin.post(url, {"reason": "   ", "confirm": "on"}).status_code == 200
    assert Evidence.objects.get(pk=evidence.pk).redacted_at is None


def test_the_list_filters_and_answers_htmx_with_the_rows_only(admin: Client, queue: Queue, admin_user: Any) -> None:
    _, evidence = _item(queue)
    other = queue.unknown("other")
    other_item = Evidence.objects.get(pk=Queue.evidence_ids(other)[0])
    security_log.evidence_redact_as_admin(user=admin_user, evidence=other_item, reason="gone")
    url = reverse("adminportal:evidence")
    page = admin.get(url, {"state": "redacted"}).content.decode()
    assert f'data-evidence-row="{other_item.pk}"' in page and f'data-evidence-row="{evidence.pk}"' not in page
    by_digest = admin.get(url, {"q": evidence.digest[7:20]}).content.decode()
    assert f'data-evidence-row="{evidence.pk}"' in by_digest
    fragment = admin.get(url, {"state": "accessible"}, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="evidence-rows">') and "<html" not in fragment
    bad = admin.get(url, {"state": "nonsense"}).content.decode()
    assert 'data-refusal="invalid-request"' in bad
