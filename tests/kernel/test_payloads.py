"""Receipt payloads are written in one place (kernel/payloads.py, SPEC §7): a decision's payload, pinned field by
field (the run's payloads are pinned byte for byte by tests/verification/test_golden_envelopes.py)."""

from __future__ import annotations

from tests.kernel.test_decision import CITED_PROOF, DIGEST, check, outcome_of
from verification.kernel.decision import decide
from verification.kernel.payloads import check_payload, decision_payload, outcome_payload
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Verdict

SUPERSEDED = "a" * 64


def test_a_decision_payload_is_its_outcome_the_one_human_check_and_what_it_superseded() -> None:
    prior = outcome_of(check(Verdict.UNKNOWN, reason=Reason.DIGEST_MATCH))
    outcome = decide(
        prior=prior, verdict=Verdict.PASS, cited_evidence_ids=["r1"], integrity=CITED_PROOF, rationale="ok"
    )
    prior_payload = {
        "subject": {"task": "t1", "cycle": 2},
        "contract": "c" * 64,
        "evidence": [{"id": "r1", "trust_tier": "T2"}, {"id": "not-cited"}],
        "criteria": outcome_payload(prior)["criteria"],
    }
    payload = decision_payload(
        prior_payload=prior_payload,
        prior=prior,
        outcome=outcome,
        actor_id="reviewer",
        actor_kind="human",
        superseded_receipt_id=SUPERSEDED,
        superseded_kind="run",
    )
    assert payload == {
        "subject": {"task": "t1", "cycle": 2},
        "contract": "c" * 64,
        "verdict": "PASS",
        "determination": "met",
        "score": 1.0,
        "confidence": outcome.confidence,
        "flagged": False,
        "flag_reason": None,
        "reason": "human-decision",
        "checks": [
            {
                "criterion": "decision",
                "authority": "human",
                "verdict": "PASS",
                "reason": "human-decision",
                "origin": outcome.check.origin.value,
                "evidence_ids": ["r1"],
                "detail": "",
                "deadline": None,
                "on_expiry": None,
            }
        ],
        "actor": {"id": "reviewer", "kind": "human"},
        "authority": "human",
        "evidence": [{"id": "r1", "trust_tier": "T2"}],
        "cited_evidence_ids": ["r1"],
        "citations": [],
        "integrity_proof": [{"evidence_id": "r1", "recorded": DIGEST, "recomputed": DIGEST}],
        "superseded": {
            "receipt_id": SUPERSEDED,
            "kind": "run",
            "verdict": "UNKNOWN",
            "determination": prior.determination.value if prior.determination is not None else None,
            "reason": prior.reason.value if prior.reason is not None else None,
            "flag_reason": prior.flag_reason,
        },
        "supersedes_receipt_id": SUPERSEDED,
        "rationale": "ok",
    }
    assert payload["checks"] == [check_payload(outcome.check)]  # one check format for runs and decisions
