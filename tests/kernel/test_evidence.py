"""Evidence: computed independence, server-derived tiers, freshness, policy, citations (SPEC §4)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verification.kernel.errors import InvariantError
from verification.kernel.evidence import (
    Accessibility,
    AdmissionSource,
    Answer,
    Citation,
    EvidenceFacts,
    EvidencePolicy,
    EvidenceType,
    Freshness,
    Independence,
    IndependenceAssessment,
    Mutability,
    PolicyFailure,
    TrustTier,
    apply_policy,
    artifact_text,
    assess_independence,
    derive_trust_tier,
    freshness,
    parse_trust_tier,
    policy_failure,
    quote_hash,
    resolve_citation,
)
from verification.kernel.reasons import Reason

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)

# --- the axes -----------------------------------------------------------------------------------------------------


def test_the_six_axes_have_exactly_the_spec_values() -> None:
    assert [e.value for e in EvidenceType] == ["artifact", "observation", "attestation", "review", "import"]
    assert [e.value for e in AdmissionSource] == ["producer", "collector", "reviewer", "human", "imported"]
    assert [e.value for e in Independence] == ["independent", "self_attested", "derived", "unknown"]
    assert [e.value for e in Mutability] == ["immutable", "versioned", "mutable"]
    assert [e.value for e in Freshness] == ["fresh", "stale", "expired", "unknown"]
    assert [e.value for e in Accessibility] == ["accessible", "inaccessible", "redacted", "unknown"]
    assert [t.value for t in TrustTier] == ["deterministic", "source_attested", "third_party", "claimant"]


def test_trust_tier_order_t0_strongest() -> None:
    assert [t.rank for t in (TrustTier.T0, TrustTier.T1, TrustTier.T2, TrustTier.T3)] == [0, 1, 2, 3]
    assert TrustTier.T0.meets(TrustTier.T1)
    assert TrustTier.T1.meets(TrustTier.T1)
    assert not TrustTier.T2.meets(TrustTier.T1)
    assert not TrustTier.T3.meets(TrustTier.T2)


@pytest.mark.parametrize(
    ("value", "tier"),
    [("source_attested", TrustTier.T1), ("T1", TrustTier.T1), ("claimant", TrustTier.T3), (TrustTier.T0, TrustTier.T0)],
)
def test_parse_trust_tier_accepts_value_or_name(value: object, tier: TrustTier) -> None:
    assert parse_trust_tier(value) is tier


@pytest.mark.parametrize("value", ["t1", "SOURCE_ATTESTED", "T4", "", None, 1])
def test_parse_trust_tier_refuses_anything_else(value: object) -> None:
    assert parse_trust_tier(value) is None


# --- independence is computed, never accepted as a label -----------------------------------------------------------


def _assess(**overrides: object) -> IndependenceAssessment:
    kwargs: dict[str, object] = {
        "producer_actor": "agent-1",
        "admitting_actor": "collector-9",
        "producer_boundaries": frozenset({"ctr-a"}),
        "admitting_boundaries": frozenset({"host-z"}),
        "producer_custody": "workspace-a",
        "evidence_custody": "store-z",
    }
    kwargs.update(overrides)
    return assess_independence(**kwargs)  # type: ignore[arg-type]


def test_all_three_distinct_is_independent_with_basis() -> None:
    a = assess_independence(
        producer_actor="agent-1",
        admitting_actor="collector-9",
        producer_boundaries=frozenset({"ctr-a"}),
        admitting_boundaries=frozenset({"host-z"}),
        producer_custody="workspace-a",
        evidence_custody="store-z",
    )
    assert a.independence is Independence.INDEPENDENT
    assert a.actor_distinct == Answer(True, ("actor:agent-1", "actor:collector-9"))
    assert a.boundary_distinct == Answer(True, ("boundary:ctr-a", "boundary:host-z"))
    assert a.custody_distinct == Answer(True, ("custody:workspace-a", "custody:store-z"))
    assert a.as_payload()["actor_distinct"] == {"value": True, "basis": ["actor:agent-1", "actor:collector-9"]}


@pytest.mark.parametrize("declared", ["independent", "derived", None])
def test_producers_own_evidence_is_self_attested_whatever_it_declared(declared: str | None) -> None:
    a = assess_independence(
        producer_actor="agent-1",
        admitting_actor="agent-1",
        producer_boundaries=frozenset({"ctr-a"}),
        admitting_boundaries=frozenset({"host-z"}),  # even from another boundary and custody
        producer_custody="workspace-a",
        evidence_custody="store-z",
        declared=declared,
    )
    assert a.independence is Independence.SELF_ATTESTED
    assert a.actor_distinct == Answer(False, ("actor:agent-1", "actor:agent-1"))
    assert a.declared == declared


def test_distinct_actor_in_the_same_boundary_is_unknown_with_the_no_on_record() -> None:
    a = _assess(admitting_boundaries=frozenset({"ctr-a", "host-z"}))
    assert a.independence is Independence.UNKNOWN
    assert a.boundary_distinct == Answer(False, ("boundary:ctr-a", "boundary:host-z"))


def test_distinct_actor_sharing_custody_is_unknown() -> None:
    a = _assess(evidence_custody="workspace-a")
    assert a.independence is Independence.UNKNOWN
    assert a.custody_distinct == Answer(False, ("custody:workspace-a", "custody:workspace-a"))


@pytest.mark.parametrize(
    ("overrides", "unanswered"),
    [
        ({"admitting_actor": None}, "actor_distinct"),
        ({"admitting_actor": ""}, "actor_distinct"),
        ({"admitting_actor": "   "}, "actor_distinct"),
        ({"producer_actor": None}, "actor_distinct"),
        ({"admitting_boundaries": frozenset()}, "boundary_distinct"),
        ({"producer_boundaries": frozenset({""})}, "boundary_distinct"),
        ({"producer_custody": None}, "custody_distinct"),
        ({"evidence_custody": ""}, "custody_distinct"),
    ],
)
def test_an_answer_without_a_basis_is_unknown(overrides: dict[str, object], unanswered: str) -> None:
    a = _assess(**overrides)
    assert a.independence is Independence.UNKNOWN
    assert getattr(a, unanswered) == Answer(None, ())


def test_two_unnamed_actors_are_not_the_same_actor_nor_distinct() -> None:
    a = _assess(producer_actor=None, admitting_actor=None)
    assert a.independence is Independence.UNKNOWN
    assert a.actor_distinct.value is None


def test_computed_by_the_portal_is_derived() -> None:
    a = _assess(derived=True, admitting_actor="portal")
    assert a.independence is Independence.DERIVED


def test_an_answer_with_a_value_but_no_basis_is_not_decided() -> None:
    assert not Answer(True, ()).decided
    assert Answer(True, ("actor:a", "actor:b")).decided


names = st.one_of(st.none(), st.sampled_from(["", " ", "a", "b", "c"]))
bounds = st.frozensets(st.sampled_from(["", "h1", "h2", "h3"]), max_size=3)


@settings(max_examples=300)
@given(names, names, bounds, bounds, names, names, st.booleans(), st.sampled_from(["independent", None]))
def test_independence_is_only_ever_what_the_structure_supports(
    producer: str | None,
    admitter: str | None,
    p_bounds: frozenset[str],
    a_bounds: frozenset[str],
    p_custody: str | None,
    e_custody: str | None,
    derived: bool,
    declared: str | None,
) -> None:
    a = assess_independence(
        producer_actor=producer,
        admitting_actor=admitter,
        producer_boundaries=p_bounds,
        admitting_boundaries=a_bounds,
        producer_custody=p_custody,
        evidence_custody=e_custody,
        derived=derived,
        declared=declared,
    )
    named = {"a", "b", "c"}
    if a.independence is Independence.INDEPENDENT:
        assert producer in named and admitter in named and producer != admitter
        p_named, a_named = {b for b in p_bounds if b.strip()}, {b for b in a_bounds if b.strip()}
        assert p_named and a_named and p_named.isdisjoint(a_named)
        assert p_custody in named and e_custody in named and p_custody != e_custody
    if a.independence is Independence.SELF_ATTESTED:
        assert producer == admitter and producer in named
    assert (a.independence is Independence.DERIVED) == derived
    for answer in (a.actor_distinct, a.boundary_distinct, a.custody_distinct):
        assert (answer.value is None) == (answer.basis == ())


# --- trust tiers are derived by the server -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("portal", "signed", "admission", "is_producer", "tier"),
    [
        (True, False, AdmissionSource.PRODUCER, True, TrustTier.T0),
        (True, True, AdmissionSource.COLLECTOR, False, TrustTier.T0),
        (False, True, AdmissionSource.PRODUCER, True, TrustTier.T1),
        (False, False, AdmissionSource.COLLECTOR, False, TrustTier.T2),
        (False, False, AdmissionSource.COLLECTOR, True, TrustTier.T3),  # a collector that is the producer
        (False, False, AdmissionSource.PRODUCER, True, TrustTier.T3),
        (False, False, AdmissionSource.PRODUCER, False, TrustTier.T3),
        (False, False, AdmissionSource.IMPORTED, False, TrustTier.T3),
        (False, False, AdmissionSource.REVIEWER, False, TrustTier.T3),
    ],
)
def test_derive_trust_tier(
    portal: bool, signed: bool, admission: AdmissionSource, is_producer: bool, tier: TrustTier
) -> None:
    assert (
        derive_trust_tier(
            computed_by_portal=portal,
            source_signature_verified=signed,
            admission=admission,
            admitting_actor_is_producer=is_producer,
        )
        is tier
    )


def test_truthy_non_bool_inputs_never_upgrade_a_tier() -> None:
    tier = derive_trust_tier(
        computed_by_portal="yes",  # type: ignore[arg-type]
        source_signature_verified=1,  # type: ignore[arg-type]
        admission=AdmissionSource.PRODUCER,
        admitting_actor_is_producer=True,
    )
    assert tier is TrustTier.T3


# --- freshness is computed when read -------------------------------------------------------------------------------

DAY = timedelta(days=1)


@pytest.mark.parametrize(
    ("collected_at", "max_age", "expires_at", "expected"),
    [
        (NOW - DAY, 2 * DAY, None, Freshness.FRESH),
        (NOW - DAY, None, None, Freshness.FRESH),
        (NOW - DAY, DAY, None, Freshness.FRESH),  # exactly max_age old is still fresh
        (NOW - 3 * DAY, 2 * DAY, None, Freshness.STALE),
        (NOW - DAY, 2 * DAY, NOW, Freshness.EXPIRED),  # at the expiry instant it has expired
        (NOW - DAY, 2 * DAY, NOW - timedelta(seconds=1), Freshness.EXPIRED),
        (NOW - 3 * DAY, 2 * DAY, NOW - DAY, Freshness.EXPIRED),  # expired outranks stale
        (NOW - DAY, 2 * DAY, NOW + DAY, Freshness.FRESH),
        (None, 2 * DAY, None, Freshness.UNKNOWN),
        (None, None, NOW - DAY, Freshness.EXPIRED),  # a known expiry is a fact even without a collection time
        (NOW + DAY, 2 * DAY, None, Freshness.UNKNOWN),  # collected in the future: clock skew
        (datetime(2025, 5, 31, 12, 0), 2 * DAY, None, Freshness.UNKNOWN),  # noqa: DTZ001 - naive on purpose
    ],
)
def test_freshness(
    collected_at: datetime | None, max_age: timedelta | None, expires_at: datetime | None, expected: Freshness
) -> None:
    assert freshness(collected_at=collected_at, max_age=max_age, expires_at=expires_at, now=NOW) is expected


def test_freshness_with_a_naive_now_is_unknown() -> None:
    naive_now = datetime(2025, 6, 1, 12, 0)  # noqa: DTZ001 - naive on purpose
    assert freshness(collected_at=NOW - DAY, max_age=None, expires_at=None, now=naive_now) is Freshness.UNKNOWN


# --- evidence policy ---------------------------------------------------------------------------------------------


def _facts(**overrides: object) -> EvidenceFacts:
    fields: dict[str, object] = {
        "evidence_id": "ev-1",
        "trust_tier": TrustTier.T1,
        "collected_at": NOW - DAY,
        "expires_at": None,
        "accessibility": Accessibility.ACCESSIBLE,
    }
    fields.update(overrides)
    return EvidenceFacts(**fields)  # type: ignore[arg-type]


STRICT = EvidencePolicy(min_trust_tier=TrustTier.T1, max_age=2 * DAY)


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({}, None),
        ({"trust_tier": TrustTier.T0}, None),
        ({"trust_tier": TrustTier.T3}, Reason.BELOW_TRUST_TIER),
        ({"trust_tier": TrustTier.T2}, Reason.BELOW_TRUST_TIER),
        ({"collected_at": NOW - 3 * DAY}, Reason.EVIDENCE_STALE),
        ({"expires_at": NOW - DAY}, Reason.EVIDENCE_EXPIRED),
        ({"accessibility": Accessibility.INACCESSIBLE}, Reason.EVIDENCE_INACCESSIBLE),
        ({"accessibility": Accessibility.UNKNOWN}, Reason.EVIDENCE_INACCESSIBLE),
        ({"accessibility": Accessibility.REDACTED}, Reason.EVIDENCE_REDACTED),
        ({"collected_at": None}, Reason.EVIDENCE_FRESHNESS_UNKNOWN),
        ({"max_age": timedelta(hours=1)}, Reason.EVIDENCE_STALE),  # the item's own allowed age is stricter
    ],
)
def test_policy_reasons(overrides: dict[str, object], reason: Reason | None) -> None:
    assert apply_policy(STRICT, [_facts(**overrides)], NOW) is reason


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        # redacted and inaccessible before tier before freshness
        ({"accessibility": Accessibility.REDACTED, "trust_tier": TrustTier.T3}, Reason.EVIDENCE_REDACTED),
        ({"accessibility": Accessibility.INACCESSIBLE, "trust_tier": TrustTier.T3}, Reason.EVIDENCE_INACCESSIBLE),
        ({"trust_tier": TrustTier.T3, "expires_at": NOW - DAY}, Reason.BELOW_TRUST_TIER),
        ({"trust_tier": TrustTier.T3, "collected_at": NOW - 9 * DAY}, Reason.BELOW_TRUST_TIER),
        ({"expires_at": NOW - DAY, "collected_at": NOW - 9 * DAY}, Reason.EVIDENCE_EXPIRED),
    ],
)
def test_policy_precedence_within_an_item(overrides: dict[str, object], reason: Reason) -> None:
    assert apply_policy(STRICT, [_facts(**overrides)], NOW) is reason


def test_first_failing_item_by_evidence_id_decides() -> None:
    items = [
        _facts(evidence_id="ev-c", accessibility=Accessibility.REDACTED),
        _facts(evidence_id="ev-a"),
        _facts(evidence_id="ev-b", trust_tier=TrustTier.T3),
    ]
    assert policy_failure(STRICT, items, NOW) == PolicyFailure(Reason.BELOW_TRUST_TIER, "ev-b")
    assert apply_policy(STRICT, items, NOW) is Reason.BELOW_TRUST_TIER
    assert apply_policy(STRICT, list(reversed(items)), NOW) is Reason.BELOW_TRUST_TIER


def test_policy_without_requirements_still_refuses_expired_and_unreadable_evidence() -> None:
    assert apply_policy(None, [_facts(trust_tier=TrustTier.T3, collected_at=NOW - 99 * DAY)], NOW) is None
    assert apply_policy(None, [_facts(expires_at=NOW)], NOW) is Reason.EVIDENCE_EXPIRED
    assert apply_policy(None, [_facts(accessibility=Accessibility.REDACTED)], NOW) is Reason.EVIDENCE_REDACTED
    assert apply_policy(None, [_facts(collected_at=None)], NOW) is None  # no age applies, so none is needed
    assert apply_policy(None, [_facts(collected_at=None, expires_at=NOW + DAY)], NOW) is None  # not yet expired
    naive_expiry = datetime(2030, 1, 1)  # noqa: DTZ001 - naive on purpose
    assert apply_policy(None, [_facts(expires_at=naive_expiry)], NOW) is Reason.EVIDENCE_FRESHNESS_UNKNOWN
    assert apply_policy(EvidencePolicy(), [], NOW) is None


def test_tier_only_policy_ignores_age() -> None:
    policy = EvidencePolicy(min_trust_tier=TrustTier.T2)
    assert apply_policy(policy, [_facts(trust_tier=TrustTier.T2, collected_at=NOW - 99 * DAY)], NOW) is None
    assert apply_policy(policy, [_facts(trust_tier=TrustTier.T3)], NOW) is Reason.BELOW_TRUST_TIER


@pytest.mark.parametrize("max_age", [timedelta(0), -DAY, 3600])
def test_policy_cannot_be_built_with_a_bad_age(max_age: object) -> None:
    with pytest.raises(InvariantError) as info:
        EvidencePolicy(max_age=max_age)  # type: ignore[arg-type]
    assert info.value.reason is Reason.MALFORMED_RUBRIC


def test_policy_cannot_be_built_with_a_string_tier() -> None:
    with pytest.raises(InvariantError) as info:
        EvidencePolicy(min_trust_tier="source_attested")  # type: ignore[arg-type]
    assert info.value.reason is Reason.MALFORMED_RUBRIC


@pytest.mark.parametrize(
    "overrides", [{"evidence_id": ""}, {"trust_tier": "claimant"}, {"accessibility": "accessible"}]
)
def test_evidence_facts_cannot_be_built_invalid(overrides: dict[str, object]) -> None:
    with pytest.raises(InvariantError) as info:
        _facts(**overrides)
    assert info.value.reason is Reason.MALFORMED_RECORD


# --- citations and spans -------------------------------------------------------------------------------------------

TEXT = "The build log says: all 42 tests passed. 🎉 Done, naïvely."
ARTIFACTS = {"log-1": TEXT}


def _cite(span_text: str, **overrides: object) -> Citation:
    """A citation of the first occurrence of ``span_text`` in TEXT, with fields overridden."""
    start = TEXT.index(span_text)
    fields: dict[str, object] = {
        "evidence_id": "log-1",
        "start": start,
        "end": start + len(span_text),
        "quote": span_text,
        "quote_hash": quote_hash(span_text),
    }
    fields.update(overrides)
    return Citation(**fields)  # type: ignore[arg-type]


def test_quote_hash_is_sha256_of_utf8() -> None:
    assert quote_hash("hello") == "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    assert quote_hash("naïve 🎉") == "sha256:" + hashlib.sha256("naïve 🎉".encode()).hexdigest()


@pytest.mark.parametrize("quote", ["all 42 tests passed", "🎉", "naïvely.", TEXT])
def test_a_citation_resolves(quote: str) -> None:
    assert resolve_citation(_cite(quote), ARTIFACTS) is None


def test_offsets_are_code_points_not_utf8_or_utf16_units() -> None:
    start = TEXT.index("Done")
    assert start != len(TEXT[:start].encode("utf-8"))  # the emoji and ï shift byte offsets
    assert resolve_citation(_cite("Done"), ARTIFACTS) is None
    utf16_start = len(TEXT[:start].encode("utf-16-le")) // 2
    shifted = _cite("Done", start=utf16_start, end=utf16_start + 4)
    assert resolve_citation(shifted, ARTIFACTS) is Reason.CITATION_QUOTE_MISMATCH


def test_citation_of_an_artifact_never_admitted() -> None:
    assert resolve_citation(_cite("Done", evidence_id="log-2"), ARTIFACTS) is Reason.CITATION_ARTIFACT_NOT_ADMITTED


@pytest.mark.parametrize(
    "span",
    [
        {"start": -1, "end": 3},
        {"start": 5, "end": 4},
        {"start": 5, "end": 5},  # an empty span cites nothing
        {"start": 0, "end": len(TEXT) + 1},
        {"start": len(TEXT), "end": len(TEXT) + 2},
        {"start": True, "end": 4},
        {"start": 0, "end": 4.0},
        {"start": "0", "end": 4},
        {"start": None, "end": None},
    ],
)
def test_spans_out_of_range(span: dict[str, object]) -> None:
    assert resolve_citation(_cite("The ", **span), ARTIFACTS) is Reason.CITATION_SPAN_OUT_OF_RANGE


def test_text_at_span_differs_from_quote() -> None:
    c = _cite("all 42 tests passed", quote="all 43 tests passed", quote_hash=quote_hash("all 43 tests passed"))
    assert resolve_citation(c, ARTIFACTS) is Reason.CITATION_QUOTE_MISMATCH


@pytest.mark.parametrize(
    "bad_hash",
    [
        quote_hash("something else"),
        quote_hash("all 42 tests passed").upper(),
        hashlib.sha256(b"all 42 tests passed").hexdigest(),  # without the prefix
        "",
        None,
    ],
)
def test_quote_hash_mismatch(bad_hash: object) -> None:
    c = _cite("all 42 tests passed", quote_hash=bad_hash)
    assert resolve_citation(c, ARTIFACTS) is Reason.CITATION_HASH_MISMATCH


def test_non_text_quote_is_a_quote_mismatch() -> None:
    assert resolve_citation(_cite("The ", quote=b"The "), ARTIFACTS) is Reason.CITATION_QUOTE_MISMATCH


def test_artifact_text_is_strict_utf8() -> None:
    assert artifact_text("naïve".encode()) == "naïve"
    assert artifact_text(b"\xff\xfe broken") is None
    assert artifact_text(b"\xed\xa0\x80") is None  # an encoded surrogate is not UTF-8
    assert artifact_text(None) is None


def test_an_undecodable_artifact_left_out_cannot_be_cited() -> None:
    stored = {"bin-1": b"\xff\xfe", "log-1": TEXT.encode()}
    texts = {k: t for k, v in stored.items() if (t := artifact_text(v)) is not None}
    c = Citation("bin-1", 0, 1, "\ufffd", quote_hash("\ufffd"))
    assert resolve_citation(c, texts) is Reason.CITATION_ARTIFACT_NOT_ADMITTED


citation_ints = st.one_of(st.integers(-5, len(TEXT) + 5), st.none(), st.booleans(), st.text(max_size=2))


@settings(max_examples=400)
@given(
    st.one_of(st.sampled_from(["log-1", "log-2"]), st.none(), st.integers()),
    citation_ints,
    citation_ints,
    st.one_of(st.text(max_size=8), st.none(), st.binary(max_size=4)),
    st.one_of(st.text(max_size=8), st.none()),
)
def test_fuzz_resolve_citation_never_raises_and_resolves_only_when_exact(
    evidence_id: object, start: object, end: object, quote: object, claimed_hash: object
) -> None:
    c = Citation(evidence_id, start, end, quote, claimed_hash)  # type: ignore[arg-type]
    result = resolve_citation(c, ARTIFACTS)
    assert result is None or isinstance(result, Reason)
    if result is None:
        assert evidence_id == "log-1"
        assert isinstance(start, int) and isinstance(end, int)
        assert TEXT[start:end] == quote and 0 <= start < end <= len(TEXT)
        assert claimed_hash == quote_hash(TEXT[start:end])


@settings(max_examples=300)
@given(st.integers(0, len(TEXT) - 1), st.integers(1, len(TEXT)))
def test_fuzz_every_true_span_resolves(start: int, length: int) -> None:
    end = min(len(TEXT), start + length)
    quote = TEXT[start:end]
    assert resolve_citation(Citation("log-1", start, end, quote, quote_hash(quote)), ARTIFACTS) is None
