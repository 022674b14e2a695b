"""Criteria, rubric registration, deterministic evaluation and the oracle seam (SPEC §1, §2, §5, §9 rails 4–6)."""

from __future__ import annotations

import ast
import copy
import hashlib
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from verification.kernel import criteria as criteria_module
from verification.kernel.baselines import (
    MIN_SECRET_BYTES,
    Baseline,
    baseline_token_valid,
    capture_baseline,
    is_authoritative,
    mint_baseline_token,
)
from verification.kernel.criteria import (
    Criterion,
    CriterionKind,
    RegisteredRubric,
    Witness,
    apply_integrity,
    evaluate_digest,
    evaluate_unchanged,
    manifest_check,
    register_rubric,
    rubric_hash,
    to_unknown,
    witness_bytes,
)
from verification.kernel.digests import sha256_digest
from verification.kernel.errors import InvariantError, RubricError
from verification.kernel.evidence import EvidencePolicy, TrustTier
from verification.kernel.integrity import StoredItem, recheck
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Authority, Check, ExpiryVerdict, Origin, Pending, Verdict

CONTENT = b"release-notes v1.2\n"
DIGEST = sha256_digest(CONTENT)
OTHER = sha256_digest(b"something else")
EXPR = f'(= notes "{DIGEST}")'
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def digest_entry(**overrides: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": "notes-match",
        "kind": "digest",
        "observable": "evidence.content-digest",
        "expression": EXPR,
    }
    entry.update(overrides)
    return entry


def rubric(*entries: dict[str, Any], **top: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": "release checks", "criteria": list(entries) or [digest_entry()]}
    doc.update(top)
    return doc


# --- Criterion cannot be built invalid ------------------------------------------------------------------------------


def test_digest_criterion_takes_its_symbol_from_the_expression() -> None:
    c = Criterion(id="c1", kind=CriterionKind.DIGEST, expression=EXPR)
    assert c.symbol == "notes"
    assert c.equality is not None and c.equality.digest == DIGEST
    assert c.hard is True and c.weight == 1.0


def test_kind_given_as_text_is_coerced() -> None:
    assert Criterion(id="c1", kind="unchanged", symbol="notes").kind is CriterionKind.UNCHANGED  # type: ignore[arg-type]


@pytest.mark.parametrize("expression", [None, "", f'(= notes "{DIGEST.upper()}")', "(= notes present)"])
def test_digest_criterion_needs_a_parseable_expression(expression: str | None) -> None:
    with pytest.raises(RubricError) as info:
        Criterion(id="c1", kind=CriterionKind.DIGEST, expression=expression)
    assert info.value.reason is Reason.OBLIGATION_NOT_FALSIFIABLE
    assert info.value.details == {"sub_reason": "malformed-expression", "criterion": "c1"}


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"id": "", "kind": CriterionKind.SEMANTIC}, Reason.MALFORMED_RUBRIC),
        ({"id": "has space", "kind": CriterionKind.SEMANTIC}, Reason.MALFORMED_RUBRIC),
        ({"id": "c", "kind": "llm"}, Reason.MALFORMED_RUBRIC),
        ({"id": "c", "kind": CriterionKind.SEMANTIC, "hard": "yes"}, Reason.MALFORMED_RUBRIC),
        ({"id": "c", "kind": CriterionKind.SEMANTIC, "weight": 0}, Reason.MALFORMED_RUBRIC),
        ({"id": "c", "kind": CriterionKind.SEMANTIC, "weight": math.inf}, Reason.MALFORMED_RUBRIC),
        ({"id": "c", "kind": CriterionKind.SEMANTIC, "weight": True}, Reason.MALFORMED_RUBRIC),
        ({"id": "c", "kind": CriterionKind.UNCHANGED}, Reason.MALFORMED_RUBRIC),  # needs a symbol
        ({"id": "c", "kind": CriterionKind.UNCHANGED, "symbol": "9x"}, Reason.MALFORMED_RUBRIC),
        ({"id": "c", "kind": CriterionKind.UNCHANGED, "symbol": "notes", "expression": EXPR}, Reason.MALFORMED_RUBRIC),
        ({"id": "c", "kind": CriterionKind.DIGEST, "expression": EXPR, "symbol": "other"}, Reason.MALFORMED_RUBRIC),
        ({"id": "c", "kind": CriterionKind.SEMANTIC, "expression": EXPR}, Reason.OBLIGATION_NOT_FALSIFIABLE),
        ({"id": "c", "kind": CriterionKind.SEMANTIC, "policy": {"max_age": 3}}, Reason.MALFORMED_RUBRIC),
    ],
)
def test_criterion_refusals(fields: dict[str, Any], reason: Reason) -> None:
    with pytest.raises(RubricError) as info:
        Criterion(**fields)
    assert info.value.reason is reason


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"kind": CriterionKind.DIGEST, "expression": EXPR}, Reason.MALFORMED_RUBRIC),  # deadline on the wrong kind
        ({"kind": CriterionKind.UNCHANGED, "symbol": "notes"}, Reason.MALFORMED_RUBRIC),
        ({"kind": CriterionKind.SEMANTIC, "on_expiry": None}, Reason.MALFORMED_RUBRIC),  # they come together
        ({"kind": CriterionKind.SEMANTIC, "deadline": None}, Reason.MALFORMED_RUBRIC),
        ({"kind": CriterionKind.SEMANTIC, "deadline": timedelta(0)}, Reason.MALFORMED_RUBRIC),
        ({"kind": CriterionKind.IMPORTED, "on_expiry": ExpiryVerdict.MISMATCH}, Reason.MISMATCH_NOT_FROM_ORACLE),
        ({"kind": CriterionKind.SEMANTIC, "on_expiry": "MISMATCH"}, Reason.MISMATCH_NOT_FROM_ORACLE),
        ({"kind": CriterionKind.SEMANTIC, "on_expiry": Verdict.PASS}, Reason.EXPIRY_VERDICT_CANNOT_PASS),
        ({"kind": CriterionKind.IMPORTED, "on_expiry": "PASS"}, Reason.EXPIRY_VERDICT_CANNOT_PASS),
        ({"kind": CriterionKind.IMPORTED, "on_expiry": "PENDING"}, Reason.MALFORMED_RUBRIC),
    ],
)
def test_deadline_rules(fields: dict[str, Any], reason: Reason) -> None:
    base: dict[str, Any] = {"id": "c", "deadline": timedelta(minutes=5), "on_expiry": ExpiryVerdict.UNKNOWN}
    base.update(fields)
    with pytest.raises(RubricError) as info:
        Criterion(**base)
    assert info.value.reason is reason


@pytest.mark.parametrize("on_expiry", [ExpiryVerdict.UNKNOWN, ExpiryVerdict.FAIL, "NOT_RUN"])
def test_awaited_criterion_is_pending_until_its_deadline(on_expiry: Any) -> None:
    c = Criterion(id="judge", kind=CriterionKind.SEMANTIC, deadline=timedelta(minutes=5), on_expiry=on_expiry)
    assert isinstance(c.on_expiry, ExpiryVerdict)
    assert c.pending(NOW) == Pending(deadline=NOW + timedelta(minutes=5), on_expiry=ExpiryVerdict(on_expiry))
    assert Criterion(id="judge", kind=CriterionKind.SEMANTIC).pending(NOW) is None


# --- registration refuses what cannot fail -------------------------------------------------------------------------


def test_a_good_rubric_registers_with_its_witness() -> None:
    doc = rubric(
        digest_entry(),
        {"id": "notes-unchanged", "kind": "unchanged", "symbol": "notes", "hard": False, "weight": 2},
        {
            "id": "judge",
            "kind": "semantic",
            "deadline_seconds": 600,
            "on_expiry": "FAIL",
            "policy": {"min_trust_tier": "source_attested", "max_age_seconds": 86400},
        },
        {"id": "ext", "kind": "imported", "deadline_seconds": 60},
    )
    registered = register_rubric(doc)
    assert isinstance(registered, RegisteredRubric)
    assert [c.id for c in registered.criteria] == ["notes-match", "notes-unchanged", "judge", "ext"]
    wbytes = witness_bytes(DIGEST)
    assert wbytes == b"acretix-witness:" + DIGEST.encode()
    assert registered.witnesses == (Witness("notes-match", sha256_digest(wbytes), Verdict.FAIL),)
    assert registered.witnesses[0].witness_digest != DIGEST
    judge = registered.criterion("judge")
    assert judge is not None
    assert judge.policy == EvidencePolicy(min_trust_tier=TrustTier.T1, max_age=timedelta(days=1))
    assert judge.deadline == timedelta(minutes=10) and judge.on_expiry is ExpiryVerdict.FAIL
    ext = registered.criterion("ext")
    assert ext is not None and ext.on_expiry is ExpiryVerdict.UNKNOWN  # SPEC §2 default
    unchanged = registered.criterion("notes-unchanged")
    assert unchanged is not None and unchanged.hard is False and unchanged.weight == 2.0
    assert registered.criterion("nope") is None


def test_rubric_hash_is_sha256_of_the_rfc8785_bytes() -> None:
    doc = rubric(digest_entry(weight=0.5, description="naïve € ✓"))
    expected_bytes = rfc8785.dumps(doc)
    registered = register_rubric(doc)
    assert registered.canonical == expected_bytes
    assert registered.rubric_hash == hashlib.sha256(expected_bytes).hexdigest() == rubric_hash(doc)
    reordered = {"criteria": [dict(reversed(list(doc["criteria"][0].items())))], "name": doc["name"]}
    assert rubric_hash(reordered) == registered.rubric_hash
    assert rubric_hash(rubric(digest_entry(weight=0.25))) != registered.rubric_hash


def test_rubric_hash_refuses_what_has_no_canonical_json() -> None:
    with pytest.raises(RubricError) as info:
        rubric_hash({"name": "x", "criteria": [{"weight": math.nan}]})
    assert info.value.reason is Reason.MALFORMED_RUBRIC


NOT_FALSIFIABLE = {
    "evidence.present": (digest_entry(observable="evidence.present"), Reason.EVIDENCE_PRESENT_DECLINED),
    "evidence.present, no expression": (
        digest_entry(observable="evidence.present", expression=None),
        Reason.EVIDENCE_PRESENT_DECLINED,
    ),
    "other observable": (digest_entry(observable="evidence.size"), Reason.UNSUPPORTED_OBSERVABLE),
    "observable case": (digest_entry(observable="Evidence.Content-Digest"), Reason.UNSUPPORTED_OBSERVABLE),
    "no observable": ({"id": "notes-match", "kind": "digest", "expression": EXPR}, Reason.UNSUPPORTED_OBSERVABLE),
    "no expression": (digest_entry(expression=None), Reason.MALFORMED_EXPRESSION),
    "uppercase hex": (digest_entry(expression=f'(= notes "{DIGEST.upper()}")'), Reason.MALFORMED_EXPRESSION),
    "other shape": (digest_entry(expression="(exists notes)"), Reason.MALFORMED_EXPRESSION),
    "tautology shape": (digest_entry(expression="(= notes notes)"), Reason.MALFORMED_EXPRESSION),
    "short hex": (digest_entry(expression=f'(= notes "{DIGEST[:-1]}")'), Reason.MALFORMED_EXPRESSION),
    "semantic digest obligation": (digest_entry(kind="semantic"), Reason.UNDECIDABLE_KIND),
    "imported digest obligation": (digest_entry(kind="imported"), Reason.UNDECIDABLE_KIND),
    "semantic with bare expression": (
        {"id": "notes-match", "kind": "semantic", "expression": EXPR},
        Reason.UNDECIDABLE_KIND,
    ),
    "semantic with malformed expression": (
        {"id": "notes-match", "kind": "semantic", "observable": "evidence.content-digest", "expression": "(x)"},
        Reason.MALFORMED_EXPRESSION,
    ),
    "semantic with other observable": (
        {"id": "notes-match", "kind": "semantic", "observable": "model.says-ok"},
        Reason.UNSUPPORTED_OBSERVABLE,
    ),
    "unchanged with evidence.present": (
        {"id": "notes-match", "kind": "unchanged", "symbol": "notes", "observable": "evidence.present"},
        Reason.EVIDENCE_PRESENT_DECLINED,
    ),
}


@pytest.mark.parametrize(("entry", "sub_reason"), NOT_FALSIFIABLE.values(), ids=NOT_FALSIFIABLE.keys())
def test_registration_refuses_what_cannot_fail(entry: dict[str, Any], sub_reason: Reason) -> None:
    entry = {k: v for k, v in entry.items() if v is not None}
    with pytest.raises(RubricError) as info:
        register_rubric(rubric({"id": "ok", "kind": "semantic"}, entry))
    assert info.value.reason is Reason.OBLIGATION_NOT_FALSIFIABLE
    assert info.value.details == {"sub_reason": sub_reason.value, "criterion": "notes-match"}


def test_a_vacuous_predicate_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def always_pass(criterion_id: str, expected: str, content: bytes | None, *, evidence_id: str) -> Check:
        return Check(criterion_id, Authority.DETERMINISTIC, Verdict.PASS, Reason.DIGEST_MATCH)

    monkeypatch.setattr(criteria_module, "evaluate_digest", always_pass)
    with pytest.raises(RubricError) as info:
        register_rubric(rubric())
    assert info.value.reason is Reason.OBLIGATION_NOT_FALSIFIABLE
    assert info.value.details == {"sub_reason": "vacuous-predicate", "criterion": "notes-match"}


def test_a_predicate_that_cannot_decide_its_witness_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def always_unknown(criterion_id: str, expected: str, content: bytes | None, *, evidence_id: str) -> Check:
        return Check(criterion_id, Authority.DETERMINISTIC, Verdict.UNKNOWN, Reason.EVIDENCE_INACCESSIBLE)

    monkeypatch.setattr(criteria_module, "evaluate_digest", always_unknown)
    with pytest.raises(RubricError) as info:
        register_rubric(rubric())
    assert info.value.details["sub_reason"] == "vacuous-predicate"


def test_witness_bytes_vary_if_their_digest_equals_the_literal(monkeypatch: pytest.MonkeyPatch) -> None:
    base = b"acretix-witness:" + DIGEST.encode()
    fake = {base: DIGEST}  # pretend the first candidate is a preimage of the literal
    monkeypatch.setattr(
        "verification.kernel.criteria.sha256_digest", lambda b: fake.get(b) or sha256_digest(b)
    )
    data = witness_bytes(DIGEST)
    assert data == base + b":1"
    assert sha256_digest(data) != DIGEST


@settings(max_examples=200)
@given(st.binary(max_size=64))
def test_fuzz_witness_always_differs_and_fails(seed: bytes) -> None:
    literal = sha256_digest(seed)
    data = witness_bytes(literal)
    assert sha256_digest(data) != literal
    assert evaluate_digest("c", literal, data, evidence_id="w").verdict is Verdict.FAIL


MALFORMED = {
    "not a mapping": ["criteria"],
    "no name": {"criteria": [digest_entry()]},
    "blank name": rubric(name="  "),
    "name not text": rubric(name=3),
    "no criteria": {"name": "r"},
    "empty criteria": rubric(criteria=[]),
    "criteria not a list": rubric(criteria={"a": digest_entry()}),
    "unknown top-level field": rubric(rubric_hash="abc"),
    "description not text": rubric(description=["x"]),
    "criterion not an object": rubric(criteria=["notes-match"]),
    "unknown criterion field": rubric(digest_entry(authority="deterministic")),
    "duplicate ids": rubric(digest_entry(), digest_entry()),
    "missing id": rubric({"kind": "semantic"}),
    "id not text": rubric({"id": 7, "kind": "semantic"}),
    "unknown kind": rubric({"id": "c", "kind": "llm_judge"}),
    "kind missing": rubric({"id": "c"}),
    "hard not bool": rubric(digest_entry(hard="false")),
    "hard null": rubric(digest_entry(hard=None)),
    "weight text": rubric(digest_entry(weight="1")),
    "weight zero": rubric(digest_entry(weight=0)),
    "weight negative": rubric(digest_entry(weight=-1.5)),
    "observable not text": rubric(digest_entry(observable=["evidence.content-digest"])),
    "expression not text": rubric(digest_entry(expression={"=": ["notes", DIGEST]})),
    "symbol differs": rubric(digest_entry(symbol="other")),
    "unchanged with literal": rubric({"id": "u", "kind": "unchanged", "symbol": "notes", "expression": EXPR}),
    "unchanged without symbol": rubric({"id": "u", "kind": "unchanged"}),
    "policy not object": rubric(digest_entry(policy="strict")),
    "policy unknown field": rubric(digest_entry(policy={"min_tier": "T1"})),
    "policy bad tier": rubric(digest_entry(policy={"min_trust_tier": "gold"})),
    "policy zero age": rubric(digest_entry(policy={"max_age_seconds": 0})),
    "policy float age": rubric(digest_entry(policy={"max_age_seconds": 1.5})),
    "deadline on digest": rubric(digest_entry(deadline_seconds=60)),
    "deadline text": rubric({"id": "s", "kind": "semantic", "deadline_seconds": "60"}),
    "deadline negative": rubric({"id": "s", "kind": "semantic", "deadline_seconds": -1}),
    "on_expiry without deadline": rubric({"id": "s", "kind": "semantic", "on_expiry": "FAIL"}),
    "on_expiry unknown": rubric({"id": "s", "kind": "semantic", "deadline_seconds": 5, "on_expiry": "maybe"}),
    "non-finite weight": rubric(digest_entry(weight=math.inf)),
    "not json": rubric(digest_entry(description={1, 2})),
    "too many criteria": rubric(*({"id": f"c{i}", "kind": "semantic"} for i in range(257))),
}


@pytest.mark.parametrize("doc", MALFORMED.values(), ids=MALFORMED.keys())
def test_structural_problems_are_malformed_rubric(doc: Any) -> None:
    with pytest.raises(RubricError) as info:
        register_rubric(doc)
    assert info.value.reason is Reason.MALFORMED_RUBRIC


@pytest.mark.parametrize(
    ("on_expiry", "reason"),
    [("PASS", Reason.EXPIRY_VERDICT_CANNOT_PASS), ("MISMATCH", Reason.MISMATCH_NOT_FROM_ORACLE)],
)
def test_registration_refuses_forbidden_expiry_verdicts(on_expiry: str, reason: Reason) -> None:
    with pytest.raises(RubricError) as info:
        register_rubric(rubric({"id": "s", "kind": "imported", "deadline_seconds": 5, "on_expiry": on_expiry}))
    assert info.value.reason is reason


def test_registration_does_not_mutate_the_document() -> None:
    doc = rubric(digest_entry(), {"id": "s", "kind": "semantic", "deadline_seconds": 5})
    before = copy.deepcopy(doc)
    register_rubric(doc)
    assert doc == before


# --- deterministic digest evaluation -------------------------------------------------------------------------------


def test_evaluate_digest_pass_fail_unknown() -> None:
    ok = evaluate_digest("c", DIGEST, CONTENT, evidence_id="ev-1")
    assert (ok.verdict, ok.reason, ok.authority, ok.origin) == (
        Verdict.PASS, Reason.DIGEST_MATCH, Authority.DETERMINISTIC, Origin.EVALUATOR
    )
    assert ok.evidence_ids == ("ev-1",)
    bad = evaluate_digest("c", DIGEST, CONTENT + b"!", evidence_id="ev-1")
    assert (bad.verdict, bad.reason) == (Verdict.FAIL, Reason.DIGEST_DIFFERS)
    gone = evaluate_digest("c", DIGEST, None, evidence_id="ev-1")
    assert (gone.verdict, gone.reason) == (Verdict.UNKNOWN, Reason.EVIDENCE_INACCESSIBLE)


@pytest.mark.parametrize("expected", [DIGEST.upper(), DIGEST[7:], "", "sha256:"])
def test_evaluate_digest_never_decides_on_a_malformed_literal(expected: str) -> None:
    check = evaluate_digest("c", expected, CONTENT, evidence_id="ev-1")
    assert (check.verdict, check.reason) == (Verdict.UNKNOWN, Reason.MALFORMED_EXPRESSION)


@settings(max_examples=300)
@given(st.one_of(st.none(), st.binary(max_size=32)), st.one_of(st.text(max_size=80), st.just(DIGEST)))
def test_fuzz_evaluate_digest_never_authors_mismatch(content: bytes | None, expected: str) -> None:
    check = evaluate_digest("c", expected, content, evidence_id="ev")
    assert check.verdict in {Verdict.PASS, Verdict.FAIL, Verdict.UNKNOWN}
    assert check.origin is Origin.EVALUATOR
    assert (check.verdict is Verdict.PASS) == (content is not None and sha256_digest(content) == expected)


# --- baselines, tokens and the oracle seam ---------------------------------------------------------------------------

SECRET = b"k" * MIN_SECRET_BYTES
SUBJECT = "task-7@1"
FIRST_CLAIM = NOW - timedelta(hours=1)
PRODUCER = "agent-1"
PRODUCER_BOUNDS = frozenset({"ctr-agent"})


def good_baseline(**overrides: Any) -> Baseline:
    fields: dict[str, Any] = {
        "subject": SUBJECT,
        "artifact_key": "notes",
        "digest": DIGEST,
        "captured_at": FIRST_CLAIM - timedelta(minutes=5),
        "reporter_actor": "collector-9",
        "reporter_boundaries": frozenset({"host-collector"}),
        "reporter_is_collector": True,
    }
    fields.update(overrides)
    return capture_baseline(SECRET, **fields)


def authoritative(baseline: Baseline | None, **overrides: Any) -> Reason | None:
    kwargs: dict[str, Any] = {
        "secret": SECRET,
        "subject": SUBJECT,
        "artifact_key": "notes",
        "producer_actor": PRODUCER,
        "producer_boundaries": PRODUCER_BOUNDS,
        "first_claim_at": FIRST_CLAIM,
    }
    kwargs.update(overrides)
    return is_authoritative(baseline, **kwargs)


def unchanged(content: bytes | None, baseline: Baseline | None, **overrides: Any) -> Check:
    kwargs: dict[str, Any] = {
        "evidence_id": "ev-notes",
        "secret": SECRET,
        "subject": SUBJECT,
        "artifact_key": "notes",
        "producer_actor": PRODUCER,
        "producer_boundaries": PRODUCER_BOUNDS,
        "first_claim_at": FIRST_CLAIM,
    }
    kwargs.update(overrides)
    return evaluate_unchanged("notes-unchanged", content, baseline, **kwargs)


def test_a_captured_baseline_is_authoritative() -> None:
    b = good_baseline()
    assert b.capture_token.startswith("hmac-sha256:") and len(b.capture_token) == len("hmac-sha256:") + 64
    assert baseline_token_valid(SECRET, b)
    assert authoritative(b) is None


def test_token_is_deterministic_and_depends_on_the_secret() -> None:
    assert good_baseline().capture_token == good_baseline().capture_token
    other = capture_baseline(
        b"o" * MIN_SECRET_BYTES,
        subject=SUBJECT,
        artifact_key="notes",
        digest=DIGEST,
        captured_at=FIRST_CLAIM - timedelta(minutes=5),
        reporter_actor="collector-9",
        reporter_boundaries=frozenset({"host-collector"}),
        reporter_is_collector=True,
    )
    assert other.capture_token != good_baseline().capture_token


FORGERIES = {
    "random hex": lambda b: replace(b, capture_token="hmac-sha256:" + "0" * 64),
    "empty": lambda b: replace(b, capture_token=""),
    "bare hex": lambda b: replace(b, capture_token=b.capture_token.removeprefix("hmac-sha256:")),
    "uppercase": lambda b: replace(b, capture_token=b.capture_token.upper()),
    "non-ascii": lambda b: replace(b, capture_token=b.capture_token[:-1] + "é"),
    "digest swapped": lambda b: replace(b, digest=OTHER),
    "captured earlier": lambda b: replace(b, captured_at=b.captured_at - timedelta(days=1)),
    "reporter swapped": lambda b: replace(b, reporter_actor="collector-8"),
    "reporter erased": lambda b: replace(b, reporter_actor=None),
    "boundary swapped": lambda b: replace(b, reporter_boundaries=frozenset({"host-other"})),
    "collector flag flipped": lambda b: replace(b, reporter_is_collector=False),
    "subject moved": lambda b: replace(b, subject="task-8@1"),
    "artifact moved": lambda b: replace(b, artifact_key="other"),
}


@pytest.mark.parametrize("forge", FORGERIES.values(), ids=FORGERIES.keys())
def test_forged_tokens_are_refused(forge: Any) -> None:
    forged: Baseline = forge(good_baseline())
    assert not baseline_token_valid(SECRET, forged)
    # Asked about the (possibly moved) subject and artifact the forgery names, the token is what refuses it.
    reason = authoritative(forged, subject=forged.subject, artifact_key=forged.artifact_key)
    assert reason is Reason.INVALID_BASELINE_TOKEN
    check = unchanged(CONTENT, forged, subject=forged.subject, artifact_key=forged.artifact_key)
    assert (check.verdict, check.reason) == (Verdict.UNKNOWN, Reason.MISSING_BASELINE)
    assert check.detail.startswith("invalid-baseline-token")


def test_a_token_minted_under_another_secret_is_refused() -> None:
    b = good_baseline()
    assert not baseline_token_valid(b"x" * MIN_SECRET_BYTES, b)
    assert authoritative(b, secret=b"x" * MIN_SECRET_BYTES) is Reason.INVALID_BASELINE_TOKEN


def test_short_secrets_are_refused() -> None:
    with pytest.raises(InvariantError) as info:
        mint_baseline_token(
            b"short",
            subject=SUBJECT,
            artifact_key="notes",
            digest=DIGEST,
            captured_at=NOW,
            reporter_actor="c",
            reporter_boundaries=frozenset({"h"}),
            reporter_is_collector=True,
        )
    assert info.value.reason is Reason.INVALID_BASELINE_TOKEN
    assert not baseline_token_valid(b"", good_baseline())
    assert authoritative(good_baseline(), secret=b"") is Reason.INVALID_BASELINE_TOKEN


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"reporter_actor": PRODUCER}, Reason.BASELINE_NOT_INDEPENDENT),
        ({"reporter_boundaries": frozenset({"host-collector", "ctr-agent"})}, Reason.BASELINE_NOT_INDEPENDENT),
        ({"reporter_boundaries": frozenset()}, Reason.BASELINE_NOT_INDEPENDENT),
        ({"reporter_is_collector": False}, Reason.BASELINE_NOT_INDEPENDENT),
        ({"reporter_actor": None}, Reason.UNNAMED_ACTOR),
        ({"reporter_actor": "  "}, Reason.UNNAMED_ACTOR),
        ({"captured_at": FIRST_CLAIM}, Reason.BASELINE_AFTER_FIRST_CLAIM),
        ({"captured_at": FIRST_CLAIM + timedelta(seconds=1)}, Reason.BASELINE_AFTER_FIRST_CLAIM),
    ],
)
def test_baselines_that_are_not_authoritative(overrides: dict[str, Any], reason: Reason) -> None:
    b = good_baseline(**overrides)
    assert baseline_token_valid(SECRET, b)  # the token is genuine: the refusal is on the facts
    assert authoritative(b) is reason
    check = unchanged(CONTENT, b)
    assert (check.verdict, check.reason) == (Verdict.UNKNOWN, Reason.MISSING_BASELINE)
    assert check.detail.startswith(reason.value)
    changed = unchanged(b"tampered", b)
    assert (changed.verdict, changed.reason) == (Verdict.UNKNOWN, Reason.MISSING_BASELINE)  # never MISMATCH


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"producer_actor": None}, Reason.UNNAMED_ACTOR),
        ({"producer_boundaries": frozenset()}, Reason.BASELINE_NOT_INDEPENDENT),
        ({"producer_boundaries": frozenset({"host-collector"})}, Reason.BASELINE_NOT_INDEPENDENT),
        ({"subject": "task-7@2"}, Reason.MISSING_BASELINE),  # a baseline of another cycle
        ({"artifact_key": "other"}, Reason.MISSING_BASELINE),
        ({"first_claim_at": FIRST_CLAIM - timedelta(hours=1)}, Reason.BASELINE_AFTER_FIRST_CLAIM),
    ],
)
def test_the_producer_side_facts_decide_too(overrides: dict[str, Any], reason: Reason) -> None:
    assert authoritative(good_baseline(), **overrides) is reason
    check = unchanged(CONTENT + b"x", good_baseline(), **overrides)
    assert (check.verdict, check.reason) == (Verdict.UNKNOWN, Reason.MISSING_BASELINE)


def test_no_baseline_is_missing_baseline() -> None:
    assert authoritative(None) is Reason.MISSING_BASELINE
    check = unchanged(CONTENT, None)
    assert (check.verdict, check.reason, check.origin) == (Verdict.UNKNOWN, Reason.MISSING_BASELINE, Origin.ORACLE_SEAM)


def test_naive_first_claim_time_is_refused() -> None:
    with pytest.raises(InvariantError) as info:
        authoritative(good_baseline(), first_claim_at=datetime(2025, 6, 1))  # noqa: DTZ001 - naive on purpose
    assert info.value.reason is Reason.MALFORMED_RECORD


@pytest.mark.parametrize(
    "overrides",
    [
        {"digest": "abc"},
        {"captured_at": datetime(2025, 6, 1)},  # noqa: DTZ001 - naive on purpose
        {"subject": ""},
        {"reporter_boundaries": "host-collector"},
        {"reporter_boundaries": frozenset({""})},
        {"reporter_is_collector": 1},
    ],
)
def test_baseline_cannot_be_built_invalid(overrides: dict[str, Any]) -> None:
    fields: dict[str, Any] = {
        "subject": SUBJECT,
        "artifact_key": "notes",
        "digest": DIGEST,
        "captured_at": NOW,
        "reporter_actor": "c",
        "reporter_boundaries": frozenset({"h"}),
        "reporter_is_collector": True,
        "capture_token": "hmac-sha256:" + "0" * 64,
    }
    fields.update(overrides)
    with pytest.raises(InvariantError) as info:
        Baseline(**fields)
    assert info.value.reason is Reason.MALFORMED_RECORD


def test_unchanged_equal_is_pass_different_is_mismatch_from_the_seam() -> None:
    b = good_baseline()
    same = unchanged(CONTENT, b)
    assert (same.verdict, same.reason, same.origin, same.authority) == (
        Verdict.PASS, Reason.BASELINE_UNCHANGED, Origin.ORACLE_SEAM, Authority.DETERMINISTIC
    )
    assert same.evidence_ids == ("ev-notes",)
    changed = unchanged(b"release-notes v1.3\n", b)
    assert (changed.verdict, changed.reason, changed.origin) == (
        Verdict.MISMATCH, Reason.BASELINE_CHANGED, Origin.ORACLE_SEAM
    )
    gone = unchanged(None, b)
    assert (gone.verdict, gone.reason) == (Verdict.UNKNOWN, Reason.EVIDENCE_INACCESSIBLE)


def test_mismatch_outside_the_oracle_seam_cannot_be_constructed() -> None:
    with pytest.raises(InvariantError) as info:
        Check("c", Authority.DETERMINISTIC, Verdict.MISMATCH, Reason.BASELINE_CHANGED)
    assert info.value.reason is Reason.MISMATCH_NOT_FROM_ORACLE
    with pytest.raises(InvariantError) as info:
        Check("c", Authority.SEMANTIC, Verdict.MISMATCH, Reason.BASELINE_CHANGED, origin=Origin.EVALUATOR)
    assert info.value.reason is Reason.MISMATCH_NOT_FROM_ORACLE


KERNEL = Path(criteria_module.__file__).resolve().parent


def _mentions_oracle_seam(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "ORACLE_SEAM" for n in ast.walk(node))


def _oracle_seam_call_sites() -> set[tuple[str, str]]:
    """(module, function) of every place in the kernel that passes ``origin=…ORACLE_SEAM`` to a call or binds
    ``…ORACLE_SEAM`` to a name (to pass it on). Comparing a check's origin against it is not making one.
    """
    sites: set[tuple[str, str]] = set()
    for path in sorted(KERNEL.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                makes = (
                    isinstance(node, ast.keyword) and node.arg == "origin" and _mentions_oracle_seam(node.value)
                ) or (isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
                      and _mentions_oracle_seam(node.value))
                if makes:
                    sites.add((path.stem, func.name))
    return sites


def test_only_evaluate_unchanged_makes_oracle_seam_checks() -> None:
    assert _oracle_seam_call_sites() == {("criteria", "evaluate_unchanged")}


# --- integrity: an item whose recheck failed makes the criterion UNKNOWN, never FAIL ---------------------------------


def _proof(*items: StoredItem) -> Any:
    return recheck(items)


INTACT_A = StoredItem("ev-a", sha256_digest(b"a"), b"a")
INTACT_B = StoredItem("ev-b", sha256_digest(b"b"), b"b")
CHANGED_B = StoredItem("ev-b", sha256_digest(b"b"), b"B")
MISSING_B = StoredItem("ev-b", sha256_digest(b"b"), None)
REDACTED_B = StoredItem("ev-b", sha256_digest(b"b"), None, redacted=True)


def _fail_check(*ids: str) -> Check:
    return Check("c", Authority.DETERMINISTIC, Verdict.FAIL, Reason.DIGEST_DIFFERS, evidence_ids=ids)


def test_intact_evidence_leaves_the_check_alone() -> None:
    check = _fail_check("ev-a", "ev-b")
    assert apply_integrity(check, _proof(INTACT_A, INTACT_B)) is check
    no_evidence = Check("c", Authority.HUMAN, Verdict.PASS, Reason.HUMAN_DECISION)
    assert apply_integrity(no_evidence, _proof()) is no_evidence


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        (CHANGED_B, Reason.EVIDENCE_INTEGRITY_MISMATCH),
        (MISSING_B, Reason.MISSING_EVIDENCE_INTEGRITY_PROOF),
        (REDACTED_B, Reason.EVIDENCE_REDACTED),
    ],
)
def test_failed_integrity_turns_a_fail_into_unknown_with_the_items_code(item: StoredItem, reason: Reason) -> None:
    out = apply_integrity(_fail_check("ev-a", "ev-b"), _proof(INTACT_A, item))
    assert (out.verdict, out.reason) == (Verdict.UNKNOWN, reason)
    assert out.evidence_ids == ("ev-a", "ev-b")
    assert out.detail.startswith("ev-b")


def test_an_item_missing_from_the_proof_has_no_proof() -> None:
    out = apply_integrity(_fail_check("ev-a", "ev-z"), _proof(INTACT_A))
    assert (out.verdict, out.reason) == (Verdict.UNKNOWN, Reason.MISSING_EVIDENCE_INTEGRITY_PROOF)


def test_first_failing_item_by_evidence_id_decides() -> None:
    changed_a = StoredItem("ev-a", sha256_digest(b"a"), b"A")
    out = apply_integrity(_fail_check("ev-b", "ev-a"), _proof(changed_a, REDACTED_B))
    assert out.reason is Reason.EVIDENCE_INTEGRITY_MISMATCH


def test_integrity_downgrades_a_mismatch_keeping_its_origin() -> None:
    mismatch = unchanged(b"changed", good_baseline())
    assert mismatch.verdict is Verdict.MISMATCH
    out = apply_integrity(mismatch, _proof(StoredItem("ev-notes", sha256_digest(b"x"), b"y")))
    assert (out.verdict, out.reason, out.origin) == (
        Verdict.UNKNOWN, Reason.EVIDENCE_INTEGRITY_MISMATCH, Origin.ORACLE_SEAM
    )


def test_integrity_downgrades_a_pending_check() -> None:
    pending = Check(
        "judge",
        Authority.SEMANTIC,
        Verdict.PENDING,
        Reason.RESULT_AWAITED,
        pending=Pending(NOW),
        evidence_ids=("ev-b",),
    )
    out = apply_integrity(pending, _proof(MISSING_B))
    assert (out.verdict, out.reason, out.pending) == (Verdict.UNKNOWN, Reason.MISSING_EVIDENCE_INTEGRITY_PROOF, None)


def test_to_unknown_keeps_authority_and_evidence() -> None:
    out = to_unknown(_fail_check("ev-a"), Reason.BELOW_TRUST_TIER, "claimant")
    assert (out.verdict, out.reason, out.authority, out.evidence_ids, out.detail) == (
        Verdict.UNKNOWN, Reason.BELOW_TRUST_TIER, Authority.DETERMINISTIC, ("ev-a",), "claimant"
    )


# --- change manifests --------------------------------------------------------------------------------------------


def test_an_independently_observed_manifest_is_accepted() -> None:
    assert (
        manifest_check("c", reported_by_collector=True, reporter_is_producer=False, shares_boundary_with_producer=False)
        is None
    )


@pytest.mark.parametrize(
    ("collector", "is_producer", "shares"),
    [(False, False, False), (True, True, False), (True, False, True), (False, True, True)],
)
def test_a_manifest_not_independently_observed_is_refused(collector: bool, is_producer: bool, shares: bool) -> None:
    reason = manifest_check(
        "c", reported_by_collector=collector, reporter_is_producer=is_producer, shares_boundary_with_producer=shares
    )
    assert reason is Reason.CHANGE_MANIFEST_NOT_INDEPENDENTLY_OBSERVED
