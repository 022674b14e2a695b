"""A submission as the services take it: typed and already validated (issue 13 item 5, "one validation layer").

The API's serializers (``verification.api.serializers.submissions.VerificationRequestSerializer``) are the one place
where a submission's wire shape is checked: unknown fields, types, symbols, canonical base64 and its size limit
(``REVIEWPORTAL_API_MAX_INLINE_EVIDENCE_BYTES``), dates and durations in SPEC §3's ranges, claims. They build a
``Submission``; the services keep only the rules that are not about wire shape (the contract, the actor's kind, the
MISMATCH refusal, ownership). In-process callers (the demo, tests, benchmarks) pass a body through the same
serializers with ``submission_of``.

The arrow points one way (STYLE.md: api -> domain): this module never imports the API. The parser that turns a body
into a ``Submission`` is the API's, handed to the domain by the app's composition root (``VerificationConfig.ready``
calls ``use_parser``); without one, ``submission_of`` refuses a body rather than accept it unchecked.

``submission_hash`` (SPEC §7) = sha256 hex of the RFC 8785 bytes of the body as sent without ``wait_ms``, where each
inline ``content_base64`` is replaced by ``sha256:<hex>`` of its decoded bytes.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

from verification.kernel.canonical import canonicalize
from verification.kernel.digests import sha256_digest

TRANSPORT_FIELDS: Final = frozenset({"wait_ms"})


@dataclass(frozen=True)
class Binding:
    """One evidence symbol bound to admitted evidence (``evidence_id``) or to inline bytes (``content``)."""

    symbol: str
    evidence_id: uuid.UUID | None = None
    content: bytes | None = None
    media_type: str = "text/plain"
    evidence_type: str = "artifact"
    collected_at: datetime | None = None
    max_age_seconds: int | None = None
    expires_at: datetime | None = None
    as_manifest: bool = False

    def __post_init__(self) -> None:
        if (self.evidence_id is None) == (self.content is None):
            raise ValueError("a binding has exactly one of evidence_id and content")


@dataclass(frozen=True)
class Submission:
    """What the services record: the typed bindings, judgments and results, the body as stored and its hash."""

    bindings: tuple[Binding, ...]
    judgments: tuple[tuple[str, Mapping[str, Any]], ...]
    results: tuple[tuple[str, Mapping[str, Any]], ...]
    stored_body: dict[str, Any]
    submission_hash: str
    task_ref: str | None = None


def hashed_entry(entry: Mapping[str, Any], binding: Binding) -> dict[str, Any]:
    """A binding's entry as stored and hashed: inline bytes enter as their sha256 (SPEC §7)."""
    hashed = dict(entry)
    if binding.content is not None:
        hashed["content_base64"] = sha256_digest(binding.content)
    return hashed


def build(
    raw: Mapping[str, Any],
    *,
    bindings: Sequence[Binding],
    judgments: Sequence[tuple[str, Mapping[str, Any]]] = (),
    results: Sequence[tuple[str, Mapping[str, Any]]] = (),
) -> Submission:
    """The submission of a validated body ``raw`` (as sent), with its typed ``bindings`` in the same order."""
    stored = {k: v for k, v in raw.items() if k not in TRANSPORT_FIELDS}
    if "evidence" in raw:
        stored["evidence"] = [hashed_entry(e, b) for e, b in zip(raw["evidence"], bindings, strict=True)]
    task = raw.get("task")
    return Submission(
        bindings=tuple(bindings),
        judgments=tuple(judgments),
        results=tuple(results),
        stored_body=stored,
        submission_hash=hashlib.sha256(canonicalize(stored)).hexdigest(),
        task_ref=None if task is None else str(task),
    )


class Parser(Protocol):
    """Validates a body as sent and builds its ``Submission`` (or raises ``ServiceError`` with the API's code)."""

    def __call__(self, body: Any, *, more_evidence: bool = False) -> Submission: ...


_parser: Parser | None = None


def use_parser(parser: Parser) -> None:
    """Install the one validation layer (the API's serializers) for in-process callers."""
    global _parser  # noqa: PLW0603 - set once, at app start (VerificationConfig.ready)
    _parser = parser


def submission_of(body: Mapping[str, Any] | Submission, *, more_evidence: bool = False) -> Submission:
    """``body`` through the installed parser (the API's serializers, the one validation layer) for in-process
    callers; a ``Submission`` passes as it is. A refusal is a ``ServiceError`` with the code and status the API would
    answer. No parser installed: ``RuntimeError`` (a body is never taken unchecked)."""
    if isinstance(body, Submission):
        return body
    if _parser is None:
        raise RuntimeError("no submission parser installed (VerificationConfig.ready installs the API's)")
    return _parser(body, more_evidence=more_evidence)
