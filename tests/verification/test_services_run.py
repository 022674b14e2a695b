"""Running verifications from stored facts (issue 4 §2): each acceptance item at the service level.

Every test goes submit → ``verification_run`` → the signed receipt, and asserts the rows in the database (receipt,
caches, findings, events) and the reason codes. The facts (claims, baselines, manifests, tokens' boundaries) are
recorded through their services, never declared in a body.
"""

from __future__ import annotations

import base64
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.verification.service_world import (
    CONFIG_AFTER,
    CONFIG_BEFORE,
    LOG,
    MANIFEST,
    NOTES,
    NOTES_DIGEST,
    OTHER_DIGEST,
    World,
    digest_entry,
    head_payload,
    imported_entry,
    inline,
    result_for,
    semantic_entry,
    unchanged_entry,
    view_of,
)
from verification.actors.services.actors import actor_create, token_issue
from verification.errors import ServiceError
from verification.evidence import storage
from verification.evidence.services import evidence_admit
from verification.kernel.digests import sha256_digest
from verification.kernel.evidence import quote_hash
from verification.kernel.keys import PrivateKey, sign_evidence_digest
from verification.kernel.reasons import Reason
from verification.kernel.verifier import verify_strict
from verification.reviews.models import Finding, FindingEvent
from verification.reviews.selectors import review_queue
from verification.runs.models import ContractAcceptance, Event, Verification
from verification.runs.selectors import verification_status
from verification.runs.services.results import result_deliver
from verification.runs.services.submit import NO_CONTRACT_HASH
from verification.runs.services.tasks import (
    baseline_capture,
    case_freeze,
    contract_accept,
    manifest_report,
    task_create,
)
from verification.trust.models import Receipt
from verification.trust.selectors import head_of, proof_for, trusted_keys
from verification.trust.services.keys import key_pin

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(signing_key: Any) -> World:
    return World.build()


def only_receipt(verification: Verification) -> Receipt:
    receipts = list(Receipt.objects.filter(verification=verification))
    assert len(receipts) == 1 and receipts[0].seq == 0 and receipts[0].kind == "run"
    return receipts[0]


# --- digest (SPEC §5) -------------------------------------------------------------------------------------------


def test_a_matching_digest_is_met_and_its_proof_verifies_against_the_pinned_key(world: World) -> None:
    world.contract(digest_entry())
    verification, receipt = world.submit_and_run({"evidence": [inline("notes", NOTES)]})

    assert only_receipt(verification) == receipt
    view = view_of(verification, timezone.now())
    assert (view["status"], view["determination"], view["flagged"], view["flag_reason"]) == (
        "succeeded",
        "met",
        False,
        None,
    )
    assert (view["score"], view["confidence"], view["kernel_verdict"]) == (1.0, 1.0, "PASS")
    result = result_for(view, "notes-digest")
    assert (result["primitive"], result["determination"]) == ("content_digest@1", "met")
    assert result["reason"] == "digest-match"
    assert result["evidence_spans"][0]["trust_tier"] == "claimant" and result["flagged"] is False
    # The caches follow the signed head; the payload carries the integrity proof recomputed over the stored bytes.
    assert (verification.verdict, verification.determination, verification.flagged) == ("PASS", "met", False)
    payload = head_payload(verification)
    assert payload["integrity_proof"] == [
        {"evidence_id": payload["evidence"][0]["id"], "recorded": NOTES_DIGEST, "recomputed": NOTES_DIGEST}
    ]
    assert payload["actor"] == {"id": "portal", "kind": "service"} and payload["authority"] == "deterministic"
    assert payload["checks"][0]["reason"] == "digest-match"
    # The proof passes the strict verifier with the key pinned by fingerprint (create_signing_key pins it).
    report = verify_strict(
        proof_for(verification),
        keys=trusted_keys("proof-signing"),
        trusted_head=receipt.content_hash,
        expected_verification_id=str(verification.pk),
        expected_submission_hash=verification.submission_hash,
    )
    assert report.entries_verified == 1
    assert list(Event.objects.values_list("kind", flat=True)) == ["verification.finished"]
    assert verification not in review_queue(now=timezone.now())


def test_a_differing_digest_is_not_met_and_not_flagged(world: World) -> None:
    world.contract(digest_entry(literal=OTHER_DIGEST))
    verification, _ = world.submit_and_run({"evidence": [inline("notes", NOTES)]})
    view = view_of(verification, timezone.now())
    assert (view["determination"], view["kernel_verdict"], view["reason"], view["flagged"]) == (
        "not_met",
        "FAIL",
        "digest-differs",
        False,
    )
    assert view["score"] == 0.0 and verification.awaiting_evidence is True


# --- unchanged: the oracle seam and baselines (SPEC §2, §5, rail 5) -------------------------------------------------


def test_unchanged_against_a_collectors_baseline_with_changed_bytes_is_a_flagged_mismatch(world: World) -> None:
    world.contract(unchanged_entry(), claim=False)
    baseline_capture(
        actor=world.collector.actor,
        token=world.collector.token,
        task=world.task,
        artifact_key="config",
        digest=sha256_digest(CONFIG_BEFORE),
    )
    world.claim()  # the work starts after the baseline
    verification, _ = world.submit_and_run({"evidence": [inline("config", CONFIG_AFTER)]})
    view = view_of(verification, timezone.now())
    assert (view["determination"], view["kernel_verdict"], view["flagged"], view["flag_reason"]) == (
        "not_met",
        "MISMATCH",
        True,
        "mismatch: baseline-changed",
    )
    assert result_for(view, "config-unchanged")["primitive"] == "baseline_unchanged@1"
    assert verification in review_queue(now=timezone.now())


def test_unchanged_bytes_against_the_same_baseline_pass(world: World) -> None:
    world.contract(unchanged_entry(), claim=False)
    baseline_capture(
        actor=world.collector.actor,
        token=world.collector.token,
        task=world.task,
        artifact_key="config",
        digest=sha256_digest(CONFIG_BEFORE),
    )
    world.claim()
    verification, _ = world.submit_and_run({"evidence": [inline("config", CONFIG_BEFORE)]})
    assert (verification.verdict, verification.reason, verification.flagged) == ("PASS", "baseline-unchanged", False)


def test_unchanged_without_a_baseline_is_unknown_missing_baseline(world: World) -> None:
    world.contract(unchanged_entry())
    verification, _ = world.submit_and_run({"evidence": [inline("config", CONFIG_AFTER)]})
    view = view_of(verification, timezone.now())
    assert (view["determination"], view["kernel_verdict"], view["reason"], view["flag_reason"]) == (
        "cannot_determine",
        "UNKNOWN",
        "missing-baseline",
        "needs_review: missing-baseline",
    )
    assert view["score"] is None and view["confidence"] == 0.0


@pytest.mark.parametrize(
    ("reporter", "cause"),
    [
        pytest.param("collector-in-producer-boundary", "baseline-not-independent", id="collector-shares-boundary"),
        pytest.param("producer", "baseline-not-independent", id="reported-by-the-producer"),
        pytest.param("after-claim", "baseline-after-first-claim", id="captured-after-the-work-started"),
    ],
)
def test_a_baseline_that_is_not_authoritative_is_treated_as_missing(world: World, reporter: str, cause: str) -> None:
    world.contract(unchanged_entry(), claim=False)
    if reporter == "after-claim":
        world.claim()
        actor, token = world.collector.actor, world.collector.token
    elif reporter == "producer":
        actor, token = world.agent.actor, world.agent.token
    else:
        actor = actor_create(name="collector-in-worker", kind="collector")
        token, _ = token_issue(actor=actor, boundary="ctr-worker", scopes=["baselines:write"])  # the agent's boundary
    digest = sha256_digest(CONFIG_BEFORE)
    baseline_capture(actor=actor, token=token, task=world.task, artifact_key="config", digest=digest)
    if reporter != "after-claim":
        world.claim()
    verification, _ = world.submit_and_run({"evidence": [inline("config", CONFIG_AFTER)]})
    assert (verification.verdict, verification.reason) == ("UNKNOWN", "missing-baseline")
    check = head_payload(verification)["checks"][0]
    assert check["detail"].startswith(cause)


# --- evidence policy and tiers (SPEC §4) ---------------------------------------------------------------------------


def test_claimant_evidence_below_the_required_tier_is_unknown_below_trust_tier(world: World) -> None:
    world.contract(digest_entry(policy={"min_trust_tier": "source_attested"}))
    verification, _ = world.submit_and_run({"evidence": [inline("notes", NOTES)]})
    view = view_of(verification, timezone.now())
    assert (view["determination"], view["reason"], view["flag_reason"]) == (
        "cannot_determine",
        "below-trust-tier",
        "needs_review: below-trust-tier",
    )
    assert result_for(view, "notes-digest")["evidence_spans"][0]["trust_tier"] == "claimant"


def test_source_signed_evidence_under_a_pinned_key_is_t1_and_meets_the_policy(world: World, key_admin: Any) -> None:
    source = PrivateKey.generate()
    key_pin(
        actor_user=key_admin,
        jwk_or_pem_text=source.public_key.to_pem(),
        purpose="evidence-source",
        typed_fingerprint=source.public_key.fingerprint,
        channel="phone call with the release manager",
    )
    world.contract(digest_entry(policy={"min_trust_tier": "source_attested"}))
    signed = evidence_admit(
        actor=world.agent.actor,
        token=world.agent.token,
        content=NOTES,
        source_signature=sign_evidence_digest(source, NOTES_DIGEST),
        source_key_id=source.public_key.key_id,
        task=world.task,
    )
    assert (signed.trust_tier, signed.source_verified) == ("source_attested", True)
    verification, _ = world.submit_and_run({"evidence": [{"symbol": "notes", "evidence_id": str(signed.pk)}]})
    assert (verification.determination, verification.flagged) == ("met", False)
    assert head_payload(verification)["evidence"][0]["trust_tier"] == "source_attested"


def test_a_bad_source_signature_is_refused_at_admission(world: World) -> None:
    stranger = PrivateKey.generate()  # not pinned
    with pytest.raises(ServiceError) as exc:
        evidence_admit(
            actor=world.agent.actor,
            token=world.agent.token,
            content=NOTES,
            source_signature=sign_evidence_digest(stranger, NOTES_DIGEST),
            source_key_id=stranger.public_key.key_id,
        )
    assert exc.value.reason is Reason.SOURCE_SIGNATURE_INVALID and exc.value.http_status == 422


def test_collector_evidence_is_third_party(world: World) -> None:
    world.contract(digest_entry(policy={"min_trust_tier": "third_party"}))
    collected = evidence_admit(actor=world.collector.actor, token=world.collector.token, content=NOTES, task=world.task)
    assert (collected.trust_tier, collected.admission_source) == ("third_party", "collector")
    verification, _ = world.submit_and_run({"evidence": [{"symbol": "notes", "evidence_id": str(collected.pk)}]})
    assert verification.determination == "met"
    independence = head_payload(verification)["evidence"][0]["independence"]
    assert independence["actor_distinct"] == {"value": True, "basis": ["actor:agent-w", "actor:collector-c"]}
    assert independence["independence"] == "independent"


# --- semantic judgments (SPEC §6) ------------------------------------------------------------------------------------


def test_a_grounded_cited_support_is_cannot_determine_flagged_and_queued(world: World) -> None:
    world.contract(semantic_entry(deadline_seconds=600))
    case = case_freeze(actor=world.owner.actor, task=world.task, content="do the release notes say tests passed?")
    verification, receipt = world.submit_and_run({"evidence": [inline("log", LOG)]})
    assert receipt.verdict == "PENDING" and verification.verdict == "PENDING"
    assert view_of(verification, timezone.now())["status"] == "running"
    log_id = head_payload(verification)["evidence"][0]["id"]
    quote = "212 passed, 0 failed"
    start = LOG.decode().index(quote)
    result = result_deliver(
        actor=world.semantic.actor,
        token=world.semantic.token,
        verification=verification,
        criterion_id="tests-green",
        body={
            "outcome": "cited_support",
            "typed_predicate": "tests-pass",
            "case_digest": case.digest,
            "citations": [
                {"evidence_id": log_id, "start": start, "end": start + len(quote), "quote": quote,
                 "quote_hash": quote_hash(quote)}
            ],
            "rationale": "the log shows every test passing",
        },
    )
    assert (result.seq, result.kind, result.supersedes_receipt_id) == (1, "result", receipt.content_hash)
    verification.refresh_from_db()
    view = view_of(verification, timezone.now())
    assert (view["status"], view["determination"], view["flagged"], view["flag_reason"]) == (
        "succeeded",
        "cannot_determine",
        True,
        "needs_review: cited-support",
    )
    entry = result_for(view, "tests-green")
    assert (entry["primitive"], entry["authority"], entry["reason"]) == ("llm_judge@1", "semantic", "cited-support")
    assert entry["evidence_spans"][0]["quote_hash"] == quote_hash(quote)
    assert verification in review_queue(now=timezone.now())
    assert head_payload(verification)["actor"] == {"id": "sem-1", "kind": "semantic_worker"}


def test_a_judgment_not_bound_to_a_frozen_case_is_ungrounded(world: World) -> None:
    world.contract(semantic_entry(deadline_seconds=3600))
    verification, _ = world.submit_and_run({"evidence": [inline("log", LOG)]})
    # Delivered by the semantic worker, who is not a worker of the cycle (a submitter would be: SPEC §1).
    result_deliver(
        actor=world.semantic.actor,
        token=world.semantic.token,
        verification=verification,
        criterion_id="tests-green",
        body={"outcome": "cited_conflict", "typed_predicate": "tests-pass", "case_digest": "sha256:" + "c" * 64,
              "citations": []},
    )
    verification.refresh_from_db()
    assert (verification.verdict, verification.reason, verification.flagged) == ("UNKNOWN", "ungrounded", True)


def test_a_semantic_worker_that_submits_the_verification_is_a_worker_of_the_cycle(world: World) -> None:
    # SPEC §1: a submitter is a worker of the cycle, so the judgment it brings in its own submission is not independent.
    world.contract(semantic_entry())
    verification, _ = world.submit_and_run(
        {
            "evidence": [inline("log", LOG)],
            "judgments": [
                {"criterion": "tests-green", "outcome": "cited_conflict", "typed_predicate": "tests-pass",
                 "case_digest": "sha256:" + "c" * 64, "citations": []}
            ],
        },
        party=world.semantic,
    )
    assert (verification.verdict, verification.reason, verification.flagged) == (
        "UNKNOWN", "worker-self-verification", True
    )


def test_only_a_semantic_workers_token_may_bring_judgments(world: World) -> None:
    world.contract(semantic_entry())
    with pytest.raises(ServiceError) as exc:
        world.submit({"judgments": [{"criterion": "tests-green", "outcome": "cited_support"}]})
    assert exc.value.reason is Reason.ACTOR_CANNOT_AUTHOR_RESULT and exc.value.http_status == 403
    assert Verification.objects.count() == 0


# --- the rails (SPEC §9) ---------------------------------------------------------------------------------------------


def test_an_external_verifier_that_claimed_the_task_is_refused_as_self_verification(world: World) -> None:
    world.contract(imported_entry())
    world.claim(world.external)  # the verifier also claimed the task in this cycle
    verification, _ = world.submit_and_run(
        {"results": [{"criterion": "ext-scan", "verdict": "FAIL", "detail": "scanner found 2 issues"}]},
        party=world.external,
    )
    view = view_of(verification, timezone.now())
    assert (view["kernel_verdict"], view["reason"], view["flag_reason"]) == (
        "UNKNOWN",
        "worker-self-verification",
        "needs_review: worker-self-verification",
    )
    assert result_for(view, "ext-scan")["authority"] == "imported"


def test_an_external_verifier_that_committed_the_work_is_refused(world: World) -> None:
    from verification.runs.services.tasks import link_record

    world.contract(imported_entry())
    link_record(
        actor=world.collector.actor,
        token=world.collector.token,
        task=world.task,
        commit_id="c0ffee1",
        committing_actor="ext-v",
        superseded=True,
    )
    verification, _ = world.submit_and_run(
        {"results": [{"criterion": "ext-scan", "verdict": "FAIL"}]}, party=world.external
    )
    assert verification.reason == "verifier-authored-work"


def test_without_an_accepted_contract_every_check_is_unknown(world: World) -> None:
    world.rubric(digest_entry())  # registered, never accepted
    world.claim()
    verification, _ = world.submit_and_run({"evidence": [inline("notes", NOTES)]})
    assert verification.rubric is None and verification.rubric_hash == NO_CONTRACT_HASH
    view = view_of(verification, timezone.now())
    assert (view["determination"], view["kernel_verdict"], view["reason"], view["flag_reason"]) == (
        "cannot_determine",
        "UNKNOWN",
        "no-accepted-contract",
        "needs_review: no-accepted-contract",
    )
    assert head_payload(verification)["contract"] is None


def test_the_claiming_agent_cannot_accept_the_contract(world: World) -> None:
    rubric = world.rubric(digest_entry())
    world.task = task_create(actor=world.agent.actor, title="the agent's own task")  # an owner may accept...
    world.claim()
    with pytest.raises(ServiceError) as exc:  # ...but not once it claimed the cycle
        contract_accept(actor=world.agent.actor, task=world.task, rubric_hash=rubric.rubric_hash)
    assert exc.value.reason is Reason.SELF_CONTRACT_ACCEPTANCE and exc.value.http_status == 403
    assert ContractAcceptance.objects.count() == 0


def test_a_contract_of_an_earlier_cycle_does_not_count_after_a_reopen(world: World) -> None:
    from verification.runs.services.tasks import task_reopen

    world.contract(digest_entry())
    task_reopen(actor=world.owner.actor, task=world.task)
    verification, _ = world.submit_and_run({"evidence": [inline("notes", NOTES)]})
    assert (verification.cycle, verification.reason) == (2, "no-accepted-contract")


def test_a_claimed_authority_on_an_imported_result_is_ignored(world: World) -> None:
    world.contract(imported_entry(deadline_seconds=3600))
    verification, _ = world.submit_and_run({})
    result_deliver(  # by an external verifier that is not a worker of the cycle
        actor=world.external.actor,
        token=world.external.token,
        verification=verification,
        criterion_id="ext-scan",
        body={"criterion": "ext-scan", "verdict": "PASS", "authority": "deterministic"},
    )
    view = view_of(verification, timezone.now())
    entry = result_for(view, "ext-scan")
    assert (entry["authority"], entry["verdict"], entry["reason"]) == (
        "imported",
        "UNKNOWN",
        "authority-not-trusted-for-pass",
    )
    assert view["determination"] == "cannot_determine" and view["kernel_verdict"] != "PASS"
    received = head_payload(verification)["results_received"]
    assert received == [
        {
            "criterion": "ext-scan",
            "actor": {"id": "ext-v", "kind": "external_verifier"},
            "authority": "imported",
            "declared_authority": "deterministic",
            "received_at": received[0]["received_at"],
        }
    ]


def test_an_imported_result_cannot_bring_a_mismatch(world: World) -> None:
    world.contract(imported_entry())
    with pytest.raises(ServiceError) as exc:
        world.submit({"results": [{"criterion": "ext-scan", "verdict": "MISMATCH"}]}, party=world.external)
    assert exc.value.reason is Reason.MISMATCH_NOT_FROM_ORACLE and exc.value.http_status == 422


# --- change manifests (SPEC §1, rail 4) ------------------------------------------------------------------------------


def manifest_rubric(world: World) -> None:
    world.contract(digest_entry("manifest-digest", literal=sha256_digest(MANIFEST), symbol="manifest"))


def test_a_manifest_the_producer_binds_as_its_own_is_not_evidence(world: World) -> None:
    manifest_rubric(world)
    verification, _ = world.submit_and_run({"evidence": [inline("manifest", MANIFEST, as_manifest=True)]})
    assert (verification.verdict, verification.reason, verification.flag_reason) == (
        "UNKNOWN",
        "change-manifest-not-independently-observed",
        "needs_review: change-manifest-not-independently-observed",
    )


def test_a_manifest_reported_by_the_producers_token_is_not_evidence(world: World) -> None:
    manifest_rubric(world)
    item = evidence_admit(actor=world.agent.actor, token=world.agent.token, content=MANIFEST, task=world.task)
    manifest_report(actor=world.agent.actor, token=world.agent.token, task=world.task, evidence=item)
    verification, _ = world.submit_and_run({"evidence": [{"symbol": "manifest", "evidence_id": str(item.pk)}]})
    assert verification.reason == "change-manifest-not-independently-observed"


def test_a_manifest_observed_by_an_independent_collector_counts(world: World) -> None:
    manifest_rubric(world)
    item = evidence_admit(actor=world.collector.actor, token=world.collector.token, content=MANIFEST, task=world.task)
    manifest_report(actor=world.collector.actor, token=world.collector.token, task=world.task, evidence=item)
    verification, _ = world.submit_and_run({"evidence": [{"symbol": "manifest", "evidence_id": str(item.pk)}]})
    assert (verification.verdict, verification.determination) == ("PASS", "met")


# --- evidence integrity and findings (SPEC §2, §10) ------------------------------------------------------------------


def test_gone_bytes_are_unknown_and_raise_an_evidence_integrity_finding(world: World) -> None:
    world.contract(digest_entry())
    verification = world.submit({"evidence": [inline("notes", NOTES)]})
    assert storage.remove(NOTES_DIGEST)
    world.run(verification)
    verification.refresh_from_db()
    assert (verification.verdict, verification.reason) == ("UNKNOWN", "missing-evidence-integrity-proof")
    payload = head_payload(verification)
    assert payload["integrity_proof"][0]["recomputed"] is None
    finding = Finding.objects.get()
    assert (finding.kind, finding.reason, finding.verification_id) == (
        "evidence_integrity",
        "evidence-integrity",
        verification.pk,
    )
    assert finding.evidence_id is not None and finding.receipt_refs == [head_of(verification).content_hash]
    assert list(FindingEvent.objects.values_list("action", flat=True)) == ["raised"]
    assert sorted(Event.objects.values_list("kind", flat=True)) == ["finding.raised", "verification.finished"]


def test_the_same_evidence_judged_differently_raises_a_disagreement(world: World) -> None:
    world.contract(digest_entry())
    first, _ = world.submit_and_run({"evidence": [inline("notes", NOTES)]})
    assert first.verdict == "PASS"
    evidence_id = head_payload(first)["evidence"][0]["id"]
    # The stored bytes change under the same record: the second run of the same evidence answers UNKNOWN.
    location = storage.evidence_storage().path(storage.name_for(NOTES_DIGEST))
    with open(location, "wb") as handle:
        handle.write(NOTES + b"- sneaky edit\n")
    second, _ = world.submit_and_run({"evidence": [{"symbol": "notes", "evidence_id": evidence_id}]})
    assert (second.verdict, second.reason) == ("UNKNOWN", "evidence-integrity-mismatch")
    assert second.supersedes == first
    assert head_payload(second)["supersedes_receipt_id"] == head_of(first).content_hash
    kinds = sorted(Finding.objects.values_list("kind", flat=True))
    assert kinds == ["disagreement", "evidence_integrity"]
    disagreement = Finding.objects.get(kind="disagreement")
    assert disagreement.refs[1:] == [str(first.pk), str(second.pk)]
    assert disagreement.reason == "disagreement"


def test_runs_that_agree_raise_no_disagreement(world: World) -> None:
    world.contract(digest_entry())
    world.submit_and_run({"evidence": [inline("notes", NOTES)]})
    world.submit_and_run({"evidence": [inline("notes", NOTES)]})
    assert not Finding.objects.exists()


# --- time: the evidence clock is read at run time -------------------------------------------------------------------


def test_stale_evidence_is_unknown_evidence_stale(world: World) -> None:
    world.contract(digest_entry(policy={"max_age_seconds": 60}))
    collected = (timezone.now() - timedelta(hours=1)).isoformat()
    verification, _ = world.submit_and_run({"evidence": [inline("notes", NOTES, collected_at=collected)]})
    assert verification.reason == "evidence-stale"


def test_status_is_queued_before_the_run(world: World) -> None:
    world.contract(digest_entry())
    verification = world.submit({"evidence": [inline("notes", NOTES)]})
    assert verification_status(verification, head=None, outcome=None) == "queued"
    assert view_of(verification, timezone.now())["status"] == "queued"
    assert base64.b64decode(inline("notes", NOTES)["content_base64"]) == NOTES
