"""Baselines (SPEC §1, rail 5): the recorded "before" that ``criteria.evaluate_unchanged`` compares against.

A baseline counts only when authoritative: reported by a collector that is neither the producer nor in its
boundary, captured before the cycle's first claim, and carrying a capture token minted under the server secret
(SPEC §1, rail 5). Anything else is treated as absent: ``missing-baseline``.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from verification.kernel.actors import normalize_actor_id
from verification.kernel.digests import is_digest
from verification.kernel.errors import InvariantError
from verification.kernel.evidence import is_aware
from verification.kernel.reasons import Reason

MIN_SECRET_BYTES: Final = 32
_TOKEN_DOMAIN: Final = b"acretix-verify/baseline-token/1\x00"
_MAC_PREFIX: Final = "hmac-sha256:"


def _boundary_ids(values: object) -> frozenset[str]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (set, frozenset, list, tuple)):
        raise InvariantError(Reason.MALFORMED_RECORD, "boundaries must be a set of ids")
    out: set[str] = set()
    for value in values:
        if not isinstance(value, str) or not value.strip():
            raise InvariantError(Reason.MALFORMED_RECORD, f"boundary id {value!r} is not a non-blank string")
        out.add(value)
    return frozenset(out)


@dataclass(frozen=True)
class Baseline:
    """A baseline digest of an artifact, as recorded by the capture step (SPEC §1, rail 5).

    ``subject`` is the task and cycle it was captured for (e.g. ``contracts.subject_key``); ``artifact_key`` names
    the bound artifact (usually the criterion's symbol). ``capture_token`` binds every field under the server
    secret; only ``mint_baseline_token`` makes one.
    """

    subject: str
    artifact_key: str
    digest: str
    captured_at: datetime
    reporter_actor: str | None
    reporter_boundaries: frozenset[str]
    reporter_is_collector: bool
    capture_token: str

    def __post_init__(self) -> None:
        for name in ("subject", "artifact_key"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise InvariantError(Reason.MALFORMED_RECORD, f"baseline {name} must be a non-empty string")
        if not is_digest(self.digest):
            raise InvariantError(Reason.MALFORMED_RECORD, f"baseline digest {self.digest!r} is not sha256:<hex>")
        if not is_aware(self.captured_at):
            raise InvariantError(Reason.MALFORMED_RECORD, "captured_at must be a timezone-aware datetime")
        if self.reporter_actor is not None and not isinstance(self.reporter_actor, str):
            raise InvariantError(Reason.MALFORMED_RECORD, "reporter_actor must be a string or None")
        object.__setattr__(self, "reporter_boundaries", _boundary_ids(self.reporter_boundaries))
        if not isinstance(self.reporter_is_collector, bool):
            raise InvariantError(Reason.MALFORMED_RECORD, "reporter_is_collector must be a bool")
        if not isinstance(self.capture_token, str):
            raise InvariantError(Reason.MALFORMED_RECORD, "capture_token must be a string")


def _token_message(
    *,
    subject: str,
    artifact_key: str,
    digest: str,
    captured_at: datetime,
    reporter_actor: str | None,
    reporter_boundaries: frozenset[str],
    reporter_is_collector: bool,
) -> bytes:
    # Domain-separated and length-prefixed, so no two field tuples share a message.
    bounds = sorted(reporter_boundaries)
    fields = [
        subject,
        artifact_key,
        digest,
        captured_at.astimezone(UTC).isoformat(timespec="microseconds"),
        "named" if reporter_actor is not None else "unnamed",
        reporter_actor or "",
        "collector" if reporter_is_collector else "not-collector",
        str(len(bounds)),
        *bounds,
    ]
    out = bytearray(_TOKEN_DOMAIN)
    for field_text in fields:
        data = field_text.encode("utf-8", errors="surrogatepass")
        out += len(data).to_bytes(8, "big") + data
    return bytes(out)


def mint_baseline_token(
    secret: bytes,
    *,
    subject: str,
    artifact_key: str,
    digest: str,
    captured_at: datetime,
    reporter_actor: str | None,
    reporter_boundaries: frozenset[str],
    reporter_is_collector: bool,
) -> str:
    """The capture step's correlation token: HMAC-SHA256 under the server secret over every baseline field.

    Only the capture step holds the secret, so no caller can fake a baseline (rail 5).
    """
    if not isinstance(secret, bytes) or len(secret) < MIN_SECRET_BYTES:
        raise InvariantError(Reason.INVALID_BASELINE_TOKEN, f"the server secret needs {MIN_SECRET_BYTES}+ bytes")
    if not is_aware(captured_at):
        raise InvariantError(Reason.MALFORMED_RECORD, "captured_at must be a timezone-aware datetime")
    message = _token_message(
        subject=subject,
        artifact_key=artifact_key,
        digest=digest,
        captured_at=captured_at,
        reporter_actor=reporter_actor,
        reporter_boundaries=_boundary_ids(reporter_boundaries),
        reporter_is_collector=reporter_is_collector,
    )
    return _MAC_PREFIX + hmac.new(secret, message, hashlib.sha256).hexdigest()


def capture_baseline(
    secret: bytes,
    *,
    subject: str,
    artifact_key: str,
    digest: str,
    captured_at: datetime,
    reporter_actor: str | None,
    reporter_boundaries: frozenset[str],
    reporter_is_collector: bool,
) -> Baseline:
    """Record a baseline with its freshly minted capture token (the capture step)."""
    fields: dict[str, Any] = {
        "subject": subject,
        "artifact_key": artifact_key,
        "digest": digest,
        "captured_at": captured_at,
        "reporter_actor": reporter_actor,
        "reporter_boundaries": reporter_boundaries,
        "reporter_is_collector": reporter_is_collector,
    }
    return Baseline(**fields, capture_token=mint_baseline_token(secret, **fields))


def baseline_token_valid(secret: bytes, baseline: Baseline) -> bool:
    """True when ``baseline.capture_token`` is the token the capture step would mint for these fields."""
    if not isinstance(secret, bytes) or len(secret) < MIN_SECRET_BYTES:
        return False
    expected = mint_baseline_token(
        secret,
        subject=baseline.subject,
        artifact_key=baseline.artifact_key,
        digest=baseline.digest,
        captured_at=baseline.captured_at,
        reporter_actor=baseline.reporter_actor,
        reporter_boundaries=baseline.reporter_boundaries,
        reporter_is_collector=baseline.reporter_is_collector,
    )
    token = baseline.capture_token
    if not isinstance(token, str) or not token.isascii():
        return False
    return hmac.compare_digest(expected.encode("ascii"), token.encode("ascii"))


def is_authoritative(
    baseline: Baseline | None,
    *,
    secret: bytes,
    subject: str,
    artifact_key: str,
    producer_actor: str | None,
    producer_boundaries: frozenset[str],
    first_claim_at: datetime,
) -> Reason | None:
    """None when ``baseline`` is authoritative for this subject's artifact, else why not (SPEC §1, rail 5).

    In order: none at all, or for another subject or artifact → ``missing-baseline``; token not minted by the
    capture step → ``invalid-baseline-token``; reporter or producer unnamed → ``unnamed-actor``; reporter not a
    collector, the producer itself, or sharing (or not showing) a boundary with it → ``baseline-not-independent``;
    captured at or after the cycle's first claim → ``baseline-after-first-claim``.
    """
    if not is_aware(first_claim_at):
        raise InvariantError(Reason.MALFORMED_RECORD, "first_claim_at must be a timezone-aware datetime")
    if baseline is None or baseline.subject != subject or baseline.artifact_key != artifact_key:
        return Reason.MISSING_BASELINE
    if not baseline_token_valid(secret, baseline):
        return Reason.INVALID_BASELINE_TOKEN
    # SPEC §1: None or a blank id is unnamed, never distinct from anyone.
    reporter, producer = normalize_actor_id(baseline.reporter_actor), normalize_actor_id(producer_actor)
    if reporter is None or producer is None:
        return Reason.UNNAMED_ACTOR
    if not baseline.reporter_is_collector or reporter == producer:
        return Reason.BASELINE_NOT_INDEPENDENT
    producer_bounds = _boundary_ids(producer_boundaries)
    # No recorded boundary on either side is no basis for "not in its boundary": fail closed.
    if not baseline.reporter_boundaries or not producer_bounds:
        return Reason.BASELINE_NOT_INDEPENDENT
    if not baseline.reporter_boundaries.isdisjoint(producer_bounds):
        return Reason.BASELINE_NOT_INDEPENDENT
    if not baseline.captured_at < first_claim_at:
        return Reason.BASELINE_AFTER_FIRST_CLAIM
    return None
