"""Criteria, rubric registration and deterministic evaluation (SPEC §1, §2, §5, §9 rails 4-6).

- A rubric is registered once and referenced by ``rubric_hash``; registration refuses what cannot fail, proving
  each ``digest`` obligation falsifiable by a witness that must FAIL (SPEC §5, rail 6).
- ``evaluate_digest`` and ``evaluate_unchanged`` are the portal's deterministic checks. ``evaluate_unchanged`` is
  the oracle seam, the only place in the kernel that creates checks with ``Origin.ORACLE_SEAM`` and therefore the
  only author of MISMATCH (SPEC §2). It compares against a baseline; what makes one count is ``baselines.py``.
- Integrity, policy and change manifests turn checks UNKNOWN, never FAIL.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from verification.kernel import limits
from verification.kernel.baselines import Baseline, is_authoritative
from verification.kernel.canonical import canonicalize
from verification.kernel.digests import is_digest, sha256_digest
from verification.kernel.errors import ExpressionError, KernelError, RubricError
from verification.kernel.evidence import EvidencePolicy, parse_trust_tier
from verification.kernel.expressions import (
    OBSERVABLE_CONTENT_DIGEST,
    OBSERVABLE_PRESENT,
    DigestEquality,
    is_symbol,
    parse,
)
from verification.kernel.integrity import IntegrityProof
from verification.kernel.reasons import Reason, explain
from verification.kernel.verdicts import Authority, Check, ExpiryVerdict, Origin, Pending, Verdict

# --- criteria (SPEC §5) --------------------------------------------------------------------------------------------


class CriterionKind(StrEnum):
    DIGEST = "digest"
    UNCHANGED = "unchanged"
    SEMANTIC = "semantic"
    IMPORTED = "imported"


# Kinds whose result arrives later and may carry a deadline (SPEC §2 PENDING); neither is the oracle seam.
_AWAITED_KINDS: Final = frozenset({CriterionKind.SEMANTIC, CriterionKind.IMPORTED})

# A criterion id: short, printable ASCII, safe in receipts, URLs and logs.
_CRITERION_ID_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}")
#: The same grammar as a JSON Schema ``pattern`` (the API publishes it).
CRITERION_ID_PATTERN: Final = "^" + _CRITERION_ID_RE.pattern + "$"


def _malformed(detail: str) -> RubricError:
    return RubricError(Reason.MALFORMED_RUBRIC, detail)


def _not_falsifiable(criterion_id: str, sub_reason: Reason, detail: str) -> RubricError:
    # SPEC §5: refused as obligation-not-falsifiable, with the sub-reason.
    return RubricError(
        Reason.OBLIGATION_NOT_FALSIFIABLE,
        f"criterion {criterion_id!r}: {sub_reason.value}: {detail}",
        details={"sub_reason": sub_reason.value, "criterion": criterion_id},
    )


def _expiry_verdict(value: object, criterion_id: str) -> ExpiryVerdict:
    if isinstance(value, ExpiryVerdict):
        verdict = value
    elif isinstance(value, str) and value in {v.value for v in ExpiryVerdict}:
        verdict = ExpiryVerdict(value)
    elif isinstance(value, str) and value == Verdict.PASS.value:
        raise RubricError(Reason.EXPIRY_VERDICT_CANNOT_PASS, f"criterion {criterion_id!r}: on_expiry PASS")
    else:
        raise _malformed(f"criterion {criterion_id!r}: on_expiry {value!r} is not an expiry verdict")
    if verdict is ExpiryVerdict.MISMATCH:
        # SPEC §2: MISMATCH on expiry only for an oracle-seam check; semantic and imported are not the seam.
        raise RubricError(Reason.MISMATCH_NOT_FROM_ORACLE, f"criterion {criterion_id!r}: on_expiry MISMATCH")
    return verdict


@dataclass(frozen=True)
class Criterion:
    """One criterion of a registered rubric; cannot be built invalid (every refusal is a ``RubricError``).

    ``digest``: ``expression`` is ``(= <symbol> "sha256:<hex>")`` and ``symbol`` is filled from it.
    ``unchanged``: ``symbol`` names the bound artifact; the literal comes from its authoritative baseline.
    ``semantic`` / ``imported``: ``deadline`` (from submission) and ``on_expiry`` come together, or not at all.
    """

    id: str
    kind: CriterionKind
    hard: bool = True
    weight: float = 1.0
    symbol: str | None = None
    expression: str | None = None
    policy: EvidencePolicy | None = None
    deadline: timedelta | None = None
    on_expiry: ExpiryVerdict | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or _CRITERION_ID_RE.fullmatch(self.id) is None:
            raise _malformed(f"criterion id {self.id!r} is not [A-Za-z0-9][A-Za-z0-9_.:-]{{0,127}}")
        cid = self.id
        if isinstance(self.kind, str) and self.kind in {k.value for k in CriterionKind}:
            object.__setattr__(self, "kind", CriterionKind(self.kind))
        else:
            raise _malformed(f"criterion {cid!r}: unknown kind {self.kind!r}")
        if not isinstance(self.hard, bool):
            raise _malformed(f"criterion {cid!r}: hard must be true or false")
        try:  # SPEC §3: finite, above 0, at most 10^6 (the weighted score's sums stay finite)
            object.__setattr__(self, "weight", limits.weight(self.weight))
        except limits.OutOfRange as exc:
            raise _malformed(f"criterion {cid!r}: weight {exc}") from None
        if not isinstance(self.description, str):
            raise _malformed(f"criterion {cid!r}: description must be text")
        if self.symbol is not None and not is_symbol(self.symbol):
            raise _malformed(f"criterion {cid!r}: symbol {self.symbol!r} is not a valid evidence symbol")
        if self.policy is not None and not isinstance(self.policy, EvidencePolicy):
            raise _malformed(f"criterion {cid!r}: policy must be an EvidencePolicy")
        self._check_obligation(cid)
        self._check_deadline(cid)

    def _check_obligation(self, cid: str) -> None:
        if self.kind is CriterionKind.DIGEST:
            if not isinstance(self.expression, str):
                raise _not_falsifiable(cid, Reason.MALFORMED_EXPRESSION, "a digest criterion needs an expression")
            try:
                equality = parse(self.expression)
            except ExpressionError as exc:
                raise _not_falsifiable(cid, Reason.MALFORMED_EXPRESSION, exc.detail) from None
            if self.symbol is None:
                object.__setattr__(self, "symbol", equality.symbol)
            elif self.symbol != equality.symbol:
                raise _malformed(f"criterion {cid!r}: symbol {self.symbol!r} differs from the expression's")
        elif self.expression is not None:
            if self.kind is CriterionKind.UNCHANGED:
                raise _malformed(f"criterion {cid!r}: unchanged takes its literal from the baseline, not an expression")
            raise _not_falsifiable(cid, Reason.UNDECIDABLE_KIND, f"a {self.kind.value} criterion cannot be witnessed")
        if self.kind is CriterionKind.UNCHANGED and self.symbol is None:
            raise _malformed(f"criterion {cid!r}: unchanged needs the symbol of the bound artifact")

    def _check_deadline(self, cid: str) -> None:
        if self.deadline is None and self.on_expiry is None:
            return
        if self.kind not in _AWAITED_KINDS:
            raise _malformed(f"criterion {cid!r}: only semantic and imported criteria have a deadline")
        if self.deadline is None or self.on_expiry is None:
            raise _malformed(f"criterion {cid!r}: deadline and on_expiry come together")
        if not isinstance(self.deadline, timedelta) or self.deadline <= timedelta(0):
            raise _malformed(f"criterion {cid!r}: deadline must be a positive duration")
        object.__setattr__(self, "on_expiry", _expiry_verdict(self.on_expiry, cid))

    @property
    def equality(self) -> DigestEquality | None:
        """The parsed expression of a ``digest`` criterion; None for other kinds."""
        return parse(self.expression) if self.kind is CriterionKind.DIGEST and self.expression is not None else None

    def pending(self, submitted_at: datetime) -> Pending | None:
        """The PENDING deadline of an awaited criterion for a submission made at ``submitted_at`` (SPEC §2)."""
        if self.deadline is None or self.on_expiry is None:
            return None
        return Pending(deadline=submitted_at + self.deadline, on_expiry=self.on_expiry)


# --- deterministic evaluation (SPEC §5) ----------------------------------------------------------------------------


def evaluate_digest(criterion_id: str, expected: str, content: bytes | None, *, evidence_id: str) -> Check:
    """PASS ``digest-match`` when sha256(content) equals ``expected``; FAIL ``digest-differs`` when it differs;
    UNKNOWN ``evidence-inaccessible`` without bytes. A malformed ``expected`` is never PASS or FAIL.
    """
    ids = (evidence_id,)
    if not is_digest(expected):
        return Check(
            criterion_id,
            Authority.DETERMINISTIC,
            Verdict.UNKNOWN,
            Reason.MALFORMED_EXPRESSION,
            evidence_ids=ids,
            detail="the expected value is not a sha256 digest",
        )
    if content is None:
        return Check(
            criterion_id, Authority.DETERMINISTIC, Verdict.UNKNOWN, Reason.EVIDENCE_INACCESSIBLE, evidence_ids=ids
        )
    recomputed = sha256_digest(content)
    if recomputed == expected:
        return Check(
            criterion_id,
            Authority.DETERMINISTIC,
            Verdict.PASS,
            Reason.DIGEST_MATCH,
            evidence_ids=ids,
            detail=recomputed,
        )
    return Check(
        criterion_id,
        Authority.DETERMINISTIC,
        Verdict.FAIL,
        Reason.DIGEST_DIFFERS,
        evidence_ids=ids,
        detail=f"expected {expected}, recomputed {recomputed}",
    )


# --- rubric registration: refuse what cannot fail (SPEC §5, rail 6) -------------------------------------------------

WITNESS_PREFIX: Final = b"acretix-witness:"
MAX_CRITERIA: Final = 256

_RUBRIC_KEYS: Final = frozenset({"name", "description", "criteria"})
_CRITERION_KEYS: Final = frozenset(
    {
        "id",
        "kind",
        "hard",
        "weight",
        "observable",
        "expression",
        "symbol",
        "policy",
        "deadline_seconds",
        "on_expiry",
        "description",
    }
)
_POLICY_KEYS: Final = frozenset({"min_trust_tier", "max_age_seconds"})


@dataclass(frozen=True)
class Witness:
    """The registrar's proof that a digest obligation can fail: the digest of bytes it ran and the outcome."""

    criterion_id: str
    witness_digest: str
    outcome: Verdict

    def as_payload(self) -> dict[str, str]:
        return {"criterion_id": self.criterion_id, "witness_digest": self.witness_digest, "outcome": self.outcome}


@dataclass(frozen=True)
class RegisteredRubric:
    """A rubric accepted by the registrar: its criteria, hash, canonical bytes and the witnesses it ran."""

    name: str
    criteria: tuple[Criterion, ...]
    rubric_hash: str
    canonical: bytes
    witnesses: tuple[Witness, ...]

    def criterion(self, criterion_id: str) -> Criterion | None:
        for c in self.criteria:
            if c.id == criterion_id:
                return c
        return None


def witness_bytes(literal: str) -> bytes:
    """Deterministic bytes whose digest differs from ``literal``: ``acretix-witness:<literal>`` (varied if equal)."""
    base = WITNESS_PREFIX + literal.encode("utf-8", errors="surrogatepass")
    candidate, n = base, 0
    while sha256_digest(candidate) == literal:  # a sha256 preimage: never in practice, handled all the same
        n += 1
        candidate = base + b":" + str(n).encode("ascii")
    return candidate


def rubric_hash(doc: Mapping[str, Any]) -> str:
    """Lowercase hex sha256 of the rubric's canonical JSON (RFC 8785); ``malformed-rubric`` if it has none."""
    return hashlib.sha256(_canonical(doc)).hexdigest()


def _canonical(doc: object) -> bytes:
    try:
        return canonicalize(doc)
    except KernelError as exc:
        raise _malformed(f"the rubric is not canonical JSON: {exc.reason.value}") from None


def _positive_int(value: object, what: str) -> int:
    """A duration in whole seconds within SPEC §3's range (``limits``): at least 1, at most 100 years."""
    try:
        return limits.duration_seconds(value)
    except limits.OutOfRange as exc:
        raise _malformed(f"{what} {exc}") from None


def _optional_str(entry: Mapping[str, Any], key: str, cid: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise _malformed(f"criterion {cid!r}: {key} must be text")
    return value


def _parse_policy(value: object, cid: str) -> EvidencePolicy | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _malformed(f"criterion {cid!r}: policy must be an object")
    unknown = set(value) - _POLICY_KEYS
    if unknown:
        raise _malformed(f"criterion {cid!r}: unknown policy fields {sorted(map(str, unknown))}")
    tier = None
    if value.get("min_trust_tier") is not None:
        tier = parse_trust_tier(value["min_trust_tier"])
        if tier is None:
            raise _malformed(f"criterion {cid!r}: min_trust_tier {value['min_trust_tier']!r} is not a trust tier")
    max_age = None
    if value.get("max_age_seconds") is not None:
        max_age = timedelta(seconds=_positive_int(value["max_age_seconds"], f"criterion {cid!r}: max_age_seconds"))
    return EvidencePolicy(min_trust_tier=tier, max_age=max_age)


def _check_observable(cid: str, kind: CriterionKind, observable: str | None, expression: str | None) -> None:
    """The falsifiability checks that apply before a criterion is built (SPEC §5)."""
    if kind is CriterionKind.DIGEST and observable is None:
        raise _not_falsifiable(cid, Reason.UNSUPPORTED_OBSERVABLE, "a digest criterion names no observable")
    if observable == OBSERVABLE_PRESENT:
        raise _not_falsifiable(cid, Reason.EVIDENCE_PRESENT_DECLINED, "the absence of cited evidence is not falsehood")
    if observable is not None and observable != OBSERVABLE_CONTENT_DIGEST:
        raise _not_falsifiable(cid, Reason.UNSUPPORTED_OBSERVABLE, f"{observable!r} is not {OBSERVABLE_CONTENT_DIGEST}")
    if kind in _AWAITED_KINDS and (observable is not None or expression is not None):
        if expression is not None:
            try:
                parse(expression)
            except ExpressionError as exc:
                raise _not_falsifiable(cid, Reason.MALFORMED_EXPRESSION, exc.detail) from None
        raise _not_falsifiable(cid, Reason.UNDECIDABLE_KIND, f"a {kind.value} criterion cannot be witnessed")


def _parse_criterion(entry: object, index: int) -> Criterion:
    if not isinstance(entry, Mapping):
        raise _malformed(f"criteria[{index}] is not an object")
    unknown = set(entry) - _CRITERION_KEYS
    if unknown:
        raise _malformed(f"criteria[{index}]: unknown fields {sorted(map(str, unknown))}")
    cid = entry.get("id")
    if not isinstance(cid, str) or _CRITERION_ID_RE.fullmatch(cid) is None:
        raise _malformed(f"criteria[{index}]: id {cid!r} is not [A-Za-z0-9][A-Za-z0-9_.:-]{{0,127}}")
    raw_kind = entry.get("kind")
    if not isinstance(raw_kind, str) or raw_kind not in {k.value for k in CriterionKind}:
        raise _malformed(f"criterion {cid!r}: unknown kind {raw_kind!r}")
    kind = CriterionKind(raw_kind)
    observable = _optional_str(entry, "observable", cid)
    expression = _optional_str(entry, "expression", cid)
    _check_observable(cid, kind, observable, expression)

    deadline = None
    on_expiry = entry.get("on_expiry")
    if entry.get("deadline_seconds") is not None:
        deadline = timedelta(seconds=_positive_int(entry["deadline_seconds"], f"criterion {cid!r}: deadline_seconds"))
        # SPEC §2: the expiry verdict defaults to UNKNOWN.
        on_expiry = ExpiryVerdict.UNKNOWN if on_expiry is None else on_expiry
    elif on_expiry is not None:
        raise _malformed(f"criterion {cid!r}: on_expiry without deadline_seconds")
    return Criterion(
        id=cid,
        kind=kind,
        hard=entry.get("hard", True),
        weight=entry.get("weight", 1.0),
        symbol=_optional_str(entry, "symbol", cid),
        expression=expression,
        policy=_parse_policy(entry.get("policy"), cid),
        deadline=deadline,
        on_expiry=on_expiry,
        description=entry.get("description", ""),
    )


def _witness(criterion: Criterion) -> Witness:
    equality = criterion.equality
    if equality is None:  # unreachable: a digest criterion always parses
        raise _not_falsifiable(criterion.id, Reason.MALFORMED_EXPRESSION, "no expression")
    data = witness_bytes(equality.digest)
    check = evaluate_digest(criterion.id, equality.digest, data, evidence_id=f"witness:{criterion.id}")
    if check.verdict is not Verdict.FAIL:
        # A predicate that holds over bytes whose digest differs from its literal holds whatever the evidence.
        raise _not_falsifiable(criterion.id, Reason.VACUOUS_PREDICATE, f"the witness answered {check.verdict.value}")
    return Witness(criterion.id, sha256_digest(data), check.verdict)


def register_rubric(doc: Mapping[str, Any]) -> RegisteredRubric:
    """Validate a rubric document and prove every digest obligation falsifiable (SPEC §5, rail 6).

    ``doc`` is ``{"name", "description"?, "criteria": [{id, kind, hard?, weight?, observable?, expression?,
    symbol?, policy?: {min_trust_tier?, max_age_seconds?}, deadline_seconds?, on_expiry?, description?}]}``;
    unknown fields are refused. Raises only ``RubricError``: ``malformed-rubric`` for structure,
    ``obligation-not-falsifiable`` (``details["sub_reason"]``, ``details["criterion"]``) for what cannot fail,
    ``expiry-verdict-cannot-pass`` / ``mismatch-not-from-oracle`` for a forbidden ``on_expiry``.
    """
    if not isinstance(doc, Mapping):
        raise _malformed("a rubric is a JSON object")
    canonical = _canonical(doc)
    unknown = set(doc) - _RUBRIC_KEYS
    if unknown:
        raise _malformed(f"unknown rubric fields {sorted(map(str, unknown))}")
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _malformed("a rubric needs a non-blank name")
    if not isinstance(doc.get("description", ""), str):
        raise _malformed("description must be text")
    entries = doc.get("criteria")
    if not isinstance(entries, (list, tuple)) or not entries:
        raise _malformed("a rubric needs at least one criterion")
    if len(entries) > MAX_CRITERIA:
        raise _malformed(f"a rubric has at most {MAX_CRITERIA} criteria")
    criteria = tuple(_parse_criterion(entry, i) for i, entry in enumerate(entries))
    seen: set[str] = set()
    for c in criteria:
        if c.id in seen:
            raise _malformed(f"duplicate criterion id {c.id!r}")
        seen.add(c.id)
    witnesses = tuple(_witness(c) for c in criteria if c.kind is CriterionKind.DIGEST)
    return RegisteredRubric(
        name=name,
        criteria=criteria,
        rubric_hash=hashlib.sha256(canonical).hexdigest(),
        canonical=canonical,
        witnesses=witnesses,
    )


# --- the oracle seam (SPEC §2): the only author of MISMATCH ------------------------------------------------------


def evaluate_unchanged(
    criterion_id: str,
    content: bytes | None,
    baseline: Baseline | None,
    *,
    evidence_id: str,
    secret: bytes,
    subject: str,
    artifact_key: str,
    producer_actor: str | None,
    producer_boundaries: frozenset[str],
    first_claim_at: datetime,
) -> Check:
    """The oracle seam (SPEC §2, §5): compare the bound bytes with their authoritative baseline.

    Equal → PASS ``baseline-unchanged``; different → MISMATCH ``baseline-changed``. A baseline that is absent or
    not authoritative (``is_authoritative``) is treated as absent: UNKNOWN ``missing-baseline``, the specific
    cause in ``detail``. No bytes → UNKNOWN ``evidence-inaccessible``. The only kernel function that makes
    ``Origin.ORACLE_SEAM`` checks.
    """
    ids = (evidence_id,)
    seam = Origin.ORACLE_SEAM
    why = is_authoritative(
        baseline,
        secret=secret,
        subject=subject,
        artifact_key=artifact_key,
        producer_actor=producer_actor,
        producer_boundaries=producer_boundaries,
        first_claim_at=first_claim_at,
    )
    if why is not None or baseline is None:
        cause = why or Reason.MISSING_BASELINE
        return Check(
            criterion_id,
            Authority.DETERMINISTIC,
            Verdict.UNKNOWN,
            Reason.MISSING_BASELINE,
            origin=seam,
            evidence_ids=ids,
            detail=f"{cause.value}: {explain(cause)}",
        )
    if content is None:
        return Check(
            criterion_id,
            Authority.DETERMINISTIC,
            Verdict.UNKNOWN,
            Reason.EVIDENCE_INACCESSIBLE,
            origin=seam,
            evidence_ids=ids,
        )
    recomputed = sha256_digest(content)
    if recomputed == baseline.digest:
        return Check(
            criterion_id,
            Authority.DETERMINISTIC,
            Verdict.PASS,
            Reason.BASELINE_UNCHANGED,
            origin=seam,
            evidence_ids=ids,
            detail=recomputed,
        )
    return Check(
        criterion_id,
        Authority.DETERMINISTIC,
        Verdict.MISMATCH,
        Reason.BASELINE_CHANGED,
        origin=seam,
        evidence_ids=ids,
        detail=f"baseline {baseline.digest}, now {recomputed}",
    )


# --- integrity, policy and manifests turn checks UNKNOWN, never FAIL (SPEC §1, §2, §4) --------------------------


def to_unknown(check: Check, reason: Reason, detail: str = "") -> Check:
    """The same check answering UNKNOWN with ``reason``; its origin, authority and cited evidence are kept."""
    return replace(check, verdict=Verdict.UNKNOWN, reason=reason, pending=None, detail=detail)


def apply_integrity(check: Check, proof: IntegrityProof) -> Check:
    """A check citing an item whose integrity recheck failed is UNKNOWN with that item's code (SPEC §2).

    Cited items are examined in evidence-id order; the first gone, changed or redacted item decides. A cited item
    with no entry in the proof has no integrity proof: ``missing-evidence-integrity-proof`` (fail closed).
    """
    for evidence_id in sorted(set(check.evidence_ids)):
        entry = proof.entry(evidence_id)
        if entry is None:
            return to_unknown(check, Reason.MISSING_EVIDENCE_INTEGRITY_PROOF, f"{evidence_id}: no integrity entry")
        if entry.reason is not None:
            return to_unknown(check, entry.reason, f"{evidence_id}: {entry.status.value}")
    return check


def manifest_check(
    criterion_id: str,
    *,
    reported_by_collector: bool,
    reporter_is_producer: bool,
    shares_boundary_with_producer: bool,
) -> Reason | None:
    """None when a change manifest cited by ``criterion_id`` was independently observed (SPEC §1, rail 4).

    Independently observed means reported by a collector token whose collector is not the producer and does not
    share its boundary; anything else answers ``change-manifest-not-independently-observed``. The caller states
    an unknown fact as the failing value (e.g. unknown boundaries → ``shares_boundary_with_producer=True``).
    """
    del criterion_id  # named at every call site for readability; the rule does not depend on it
    if reported_by_collector is True and reporter_is_producer is False and shares_boundary_with_producer is False:
        return None
    return Reason.CHANGE_MANIFEST_NOT_INDEPENDENTLY_OBSERVED
