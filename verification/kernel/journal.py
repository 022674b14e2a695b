"""The pin journal's format: one signed, hash-chained line per trust event, kept outside the database (SPEC §8).

A line is the RFC 8785 text of ``{format, seq, prev_hash, event, signer, signature}``. ``line_hash`` is the sha256
hex of the canonical bytes of the line without ``signature``; ``prev_hash`` is the previous line's ``line_hash``
(``null`` on line 0); ``signature`` is standard base64 of Ed25519 by ``signer`` over ``JOURNAL_DOMAIN`` followed by
the line hash (its own domain: a journal signature never passes for a receipt's or a checkpoint's).

Events (``event.action``):
- ``own-key``: one of the portal's own keys, with ``status`` ``active`` (created or rotated in: signed by that very
  key, so a line proves possession of it; the previous active key becomes retired), or ``retired``/``revoked`` (a
  past key sealed into a new journal: signed by the active key);
- ``pin`` / ``unpin``: a key pinned / unpinned for one ``purpose``;
- ``revoke``: a key revoked for every purpose, for good, with ``reason``.
Every line but an ``own-key active`` one is signed by the active own key at that point.

``verify_journal`` checks the whole file and folds it into a ``JournalState``; ``anchors`` are the ids of the keys
whose private material the caller holds: when given, the journal's active key must be one of them, so a journal
rewritten by someone without the portal's private key does not verify.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from verification.kernel.canonical import canonical_text, canonicalize
from verification.kernel.errors import KernelError
from verification.kernel.keys import PrivateKey, PublicKey
from verification.kernel.loglines import parse_fields_line
from verification.kernel.reasons import Reason

JOURNAL_FORMAT: Final = "reviewportal/pin-journal/1"
JOURNAL_DOMAIN: Final = "reviewportal/pin-journal-sig/1:"
LINE_FIELDS: Final = ("format", "seq", "prev_hash", "event", "signer", "signature")
PURPOSES: Final = ("proof-signing", "evidence-source")
OWN_STATUSES: Final = ("active", "retired", "revoked")
ACTIONS: Final = ("own-key", "pin", "unpin", "revoke")


class JournalRefused(KernelError):
    """The journal does not verify (reason ``pin-journal-invalid``; ``detail`` names the line and why)."""


@dataclass(frozen=True)
class JournalKey:
    """A key as the journal records it: its public key, its own-key status (None for another issuer's key), and
    its revocation (``revoked_at``/``revoked_reason``) if any."""

    key: PublicKey
    own_status: str | None = None
    created_at: str = ""
    revoked_at: str | None = None
    revoked_reason: str = ""


@dataclass
class JournalState:
    """The journal folded in order."""

    keys: dict[str, JournalKey] = field(default_factory=dict)
    pinned: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)  # (key_id, purpose) -> event
    ever_pinned: set[tuple[str, str]] = field(default_factory=set)  # every (key_id, purpose) a line pinned
    active: str | None = None
    head: str | None = None  # the last line's hash
    size: int = 0

    def is_pinned(self, key_id: str, purpose: str) -> bool:
        return (key_id, purpose) in self.pinned

    def is_revoked(self, key_id: str) -> bool:
        known = self.keys.get(key_id)
        return known is not None and known.revoked_at is not None

    def own_keys(self) -> dict[str, JournalKey]:
        return {kid: k for kid, k in self.keys.items() if k.own_status is not None}


def line_hash(body: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical bytes of a line without its signature."""
    unsigned = {k: v for k, v in body.items() if k != "signature"}
    return hashlib.sha256(canonicalize(unsigned)).hexdigest()


def _message(digest: str) -> bytes:
    return JOURNAL_DOMAIN.encode("ascii") + digest.encode("ascii")


def build_line(*, seq: int, prev_hash: str | None, event: Mapping[str, Any], signer: PrivateKey) -> str:
    """One journal line (canonical text, no newline) for ``event``, chained to ``prev_hash`` and signed."""
    body: dict[str, Any] = {
        "format": JOURNAL_FORMAT,
        "seq": seq,
        "prev_hash": prev_hash,
        "event": dict(event),
        "signer": signer.public_key.key_id,
    }
    signature = signer.sign(_message(line_hash(body)))
    return canonical_text({**body, "signature": base64.b64encode(signature).decode("ascii")})


def _text(event: Mapping[str, Any], name: str, where: str) -> str:
    value = event.get(name, "")
    if not isinstance(value, str):
        raise JournalRefused(Reason.PIN_JOURNAL_INVALID, f"{where}: event.{name} is not a string")
    return value


def _event_key(event: Mapping[str, Any], where: str) -> PublicKey:
    jwk = event.get("jwk")
    if not isinstance(jwk, Mapping):
        raise JournalRefused(Reason.PIN_JOURNAL_INVALID, f"{where}: the event holds no JWK")
    try:
        key = PublicKey.from_jwk(jwk)
    except KernelError as exc:
        raise JournalRefused(
            Reason.PIN_JOURNAL_INVALID, f"{where}: the event's key is refused ({exc.reason.value})"
        ) from None
    if key.key_id != event.get("key_id"):
        raise JournalRefused(
            Reason.PIN_JOURNAL_INVALID, f"{where}: the event names {event.get('key_id')!r} but holds {key.key_id}"
        )
    return key


def _refused(detail: str) -> JournalRefused:
    return JournalRefused(Reason.PIN_JOURNAL_INVALID, detail)


def parse_line(text: str, where: str) -> dict[str, Any]:
    """A line parsed strictly: exactly the six fields, of the right types."""
    doc = parse_fields_line(text, LINE_FIELDS, where=where, refuse=_refused)
    if doc["format"] != JOURNAL_FORMAT:
        raise JournalRefused(Reason.PIN_JOURNAL_INVALID, f"{where}: format {doc['format']!r} is not {JOURNAL_FORMAT}")
    seq, event = doc["seq"], doc["event"]
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(event, dict):
        raise JournalRefused(Reason.PIN_JOURNAL_INVALID, f"{where}: seq or event has the wrong type")
    if not isinstance(doc["signer"], str) or not isinstance(doc["signature"], str):
        raise JournalRefused(Reason.PIN_JOURNAL_INVALID, f"{where}: signer or signature is not a string")
    if event.get("action") not in ACTIONS:
        raise JournalRefused(Reason.PIN_JOURNAL_INVALID, f"{where}: unknown action {event.get('action')!r}")
    return doc


def apply_event(state: JournalState, event: Mapping[str, Any], where: str) -> None:
    """Fold one (already authenticated) event into ``state``."""
    action = event["action"]
    at = _text(event, "at", where)
    if action == "own-key":
        key = _event_key(event, where)
        status = event.get("status")
        if status not in OWN_STATUSES:
            raise JournalRefused(Reason.PIN_JOURNAL_INVALID, f"{where}: own-key status {status!r}")
        previous = state.keys.get(key.key_id)
        if previous is not None and previous.own_status is not None:
            raise JournalRefused(
                Reason.PIN_JOURNAL_INVALID, f"{where}: {key.key_id} is already one of the portal's keys"
            )
        if status == "active":
            if state.active is not None:
                old = state.keys[state.active]
                state.keys[state.active] = JournalKey(
                    old.key, "retired", old.created_at, old.revoked_at, old.revoked_reason
                )
            state.active = key.key_id
        revoked_at = previous.revoked_at if previous is not None else None
        reason = previous.revoked_reason if previous is not None else ""
        state.keys[key.key_id] = JournalKey(key, str(status), at, revoked_at, reason)
        return
    if action in ("pin", "unpin"):
        purpose = event.get("purpose")
        if purpose not in PURPOSES:
            raise JournalRefused(Reason.PIN_JOURNAL_INVALID, f"{where}: purpose {purpose!r}")
        key = _event_key(event, where)
        if action == "pin":
            state.pinned[(key.key_id, str(purpose))] = dict(event)
            state.ever_pinned.add((key.key_id, str(purpose)))
            state.keys.setdefault(key.key_id, JournalKey(key, created_at=at))
        else:
            state.pinned.pop((key.key_id, str(purpose)), None)
        return
    key = _event_key(event, where)  # revoke
    known = state.keys.get(key.key_id, JournalKey(key, created_at=at))
    if known.revoked_at is None:
        status = "revoked" if known.own_status is not None else None
        state.keys[key.key_id] = JournalKey(key, status, known.created_at, at, _text(event, "reason", where))
    if state.active == key.key_id:
        state.active = None


def verify_journal(lines: Iterable[str], *, anchors: frozenset[str] | None = None) -> JournalState:
    """Verify every line (format, seq, chain, signer, signature) and fold the events; ``JournalRefused`` otherwise.

    ``anchors``: the key ids whose private material the caller holds; when non-empty, the journal's final active
    key must be one of them (``pin-journal-invalid`` otherwise)."""
    state = JournalState()
    for index, text in enumerate(lines):
        where = f"line {index + 1}"
        doc = parse_line(text, where)
        if doc["seq"] != index:
            raise JournalRefused(Reason.PIN_JOURNAL_INVALID, f"{where}: seq {doc['seq']}, expected {index}")
        if doc["prev_hash"] != state.head:
            raise JournalRefused(Reason.PIN_JOURNAL_INVALID, f"{where}: prev_hash does not chain to the line before")
        event = doc["event"]
        own_active = event["action"] == "own-key" and event.get("status") == "active"
        if own_active:
            signer_key = _event_key(event, where)
        else:
            if state.active is None:
                raise JournalRefused(Reason.PIN_JOURNAL_INVALID, f"{where}: signed while the portal had no active key")
            signer_key = state.keys[state.active].key
        if doc["signer"] != signer_key.key_id:
            raise JournalRefused(
                Reason.PIN_JOURNAL_INVALID, f"{where}: signed by {doc['signer']!r}, expected {signer_key.key_id}"
            )
        digest = line_hash(doc)
        try:
            signature = base64.b64decode(doc["signature"], validate=True)
        except (binascii.Error, ValueError):
            raise JournalRefused(Reason.PIN_JOURNAL_INVALID, f"{where}: the signature is not base64") from None
        if not signer_key.verify(signature, _message(digest)):
            raise JournalRefused(Reason.PIN_JOURNAL_INVALID, f"{where}: the signature does not verify")
        apply_event(state, event, where)
        state.head = digest
        state.size = index + 1
    if anchors and state.active is not None and state.active not in anchors:
        raise JournalRefused(
            Reason.PIN_JOURNAL_INVALID,
            f"the journal's active key is {state.active}, not a key whose private material the portal holds",
        )
    return state
