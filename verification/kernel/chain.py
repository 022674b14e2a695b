"""Receipt chains in the proof wire format of the second seed, exactly (SPEC §7).

A proof is ``{verification_id, format, signing_domain, jwks_uri, proof_head_hash, entries}``; each entry is
``{seq, key_id, algo, format, prev_hash, content_hash, signature, envelope}``:
- ``envelope`` is the UTF-8 text of the RFC 8785 canonical JSON of the signed body
  ``{format, algo, key_id, verification_id, seq, rubric_hash, submission_hash, prev_hash, payload, created_at}``;
- ``content_hash`` is the lowercase hex SHA-256 of the envelope's UTF-8 bytes (a receipt's id);
- ``signature`` is standard base64 of Ed25519 (no prehash) over UTF-8 of ``SIGNING_DOMAIN + content_hash``;
- ``prev_hash`` is the previous entry's content hash, ``null`` at seq 0.

Signing canonicalizes; verifying (``verifier.py``) never re-serializes: it hashes the envelope bytes as received.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from verification.kernel.canonical import canonical_text, loads_strict
from verification.kernel.errors import InvariantError
from verification.kernel.keys import PrivateKey
from verification.kernel.reasons import Reason

FORMAT: Final = "acretix-verify/proof/2"
SIGNING_DOMAIN: Final = "acretix-verify/proof-sig/2:"
ALGO: Final = "ed25519"
JWKS_URI: Final = "/.well-known/acretix-verify/keys.json"

#: The fields of the signed body, in the order the seed lists them (the envelope itself is key-sorted by RFC 8785).
SIGNED_FIELDS: Final = (
    "format",
    "algo",
    "key_id",
    "verification_id",
    "seq",
    "rubric_hash",
    "submission_hash",
    "prev_hash",
    "payload",
    "created_at",
)
#: The fields of a proof document on the wire.
PROOF_FIELDS: Final = ("verification_id", "format", "signing_domain", "jwks_uri", "proof_head_hash", "entries")
#: The fields of an entry on the wire.
ENTRY_FIELDS: Final = ("seq", "key_id", "algo", "format", "prev_hash", "content_hash", "signature", "envelope")

_HEX64: Final = re.compile(r"\A[0-9a-f]{64}\Z")
_SIGNATURE_SIZE: Final = 64


def is_hex_hash(value: object) -> bool:
    """True for a lowercase 64-hex SHA-256 (the form of content, prev, rubric and submission hashes)."""
    return isinstance(value, str) and _HEX64.match(value) is not None


def content_hash_of(envelope: str) -> str:
    """The content hash of an envelope: lowercase hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(envelope.encode("utf-8")).hexdigest()


def signing_message(content_hash: str) -> bytes:
    """What Ed25519 signs: UTF-8 of the signing domain immediately followed by the content-hash hex."""
    return (SIGNING_DOMAIN + content_hash).encode("utf-8")


def decode_signature(text: str) -> bytes | None:
    """Strict standard base64 (alphabet, padding, canonical trailing bits); None when it is not."""
    try:
        # strict_mode refuses characters outside the alphabet and misplaced padding, and a str that is not ASCII
        # raises ValueError (UnicodeEncodeError below); the comparison requires the one canonical encoding, since
        # strict_mode still accepts non-zero padding bits ("AB==" and "AA==" decode alike).
        raw = binascii.a2b_base64(text, strict_mode=True)
        if binascii.b2a_base64(raw, newline=False) != text.encode("ascii"):
            return None
    except (binascii.Error, ValueError, TypeError, AttributeError):
        return None
    return raw


def format_created_at(dt: datetime) -> str:
    """RFC 3339 UTC with ``Z``, always with 6 fractional digits (microseconds kept, never dropped).

    Naive datetimes are refused (the kernel never guesses a zone); aware ones are converted to UTC.
    """
    if not isinstance(dt, datetime):
        raise InvariantError(Reason.MALFORMED_ENVELOPE, f"created_at must be a datetime, got {type(dt).__name__}")
    offset = dt.utcoffset()
    if dt.tzinfo is None or offset is None:
        raise InvariantError(Reason.MALFORMED_ENVELOPE, "created_at must be timezone-aware")
    return dt.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _refuse(detail: str) -> InvariantError:
    return InvariantError(Reason.MALFORMED_ENVELOPE, detail)


@dataclass(frozen=True)
class Entry:
    """One signed entry of a chain, exactly as it goes on the wire."""

    seq: int
    key_id: str
    algo: str
    format: str
    prev_hash: str | None
    content_hash: str
    signature: str
    envelope: str

    def __post_init__(self) -> None:
        if isinstance(self.seq, bool) or not isinstance(self.seq, int) or self.seq < 0:
            raise InvariantError(Reason.MALFORMED_PROOF, f"seq must be a non-negative integer, got {self.seq!r}")
        for name in ("key_id", "algo", "format", "envelope"):
            if not isinstance(getattr(self, name), str):
                raise InvariantError(Reason.MALFORMED_PROOF, f"{name} must be a string")
        prev_ok = self.prev_hash is None if self.seq == 0 else is_hex_hash(self.prev_hash)
        if not prev_ok:
            raise InvariantError(Reason.MALFORMED_PROOF, "prev_hash must be null at seq 0 and a 64-hex hash after")
        if not is_hex_hash(self.content_hash):
            raise InvariantError(Reason.MALFORMED_PROOF, "content_hash must be 64 lowercase hex")
        if not isinstance(self.signature, str) or decode_signature(self.signature) is None:
            raise InvariantError(Reason.MALFORMED_PROOF, "signature must be standard base64")

    def as_json(self) -> dict[str, Any]:
        """The entry as the wire's JSON object."""
        return {
            "seq": self.seq,
            "key_id": self.key_id,
            "algo": self.algo,
            "format": self.format,
            "prev_hash": self.prev_hash,
            "content_hash": self.content_hash,
            "signature": self.signature,
            "envelope": self.envelope,
        }


def sign_entry(
    *,
    private_key: PrivateKey,
    verification_id: str,
    seq: int,
    rubric_hash: str,
    submission_hash: str,
    prev_hash: str | None,
    payload: Mapping[str, Any],
    created_at: datetime,
) -> Entry:
    """Build and sign the next entry of a chain (SPEC §7). Refuses malformed inputs with ``malformed-envelope``."""
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise _refuse(f"seq must be a non-negative integer, got {seq!r}")
    if seq == 0 and prev_hash is not None:
        raise _refuse("prev_hash must be null at seq 0")
    if seq > 0 and not is_hex_hash(prev_hash):
        raise _refuse("prev_hash must be the previous entry's 64-hex content hash")
    if not isinstance(verification_id, str) or not verification_id:
        raise _refuse("verification_id must be a non-empty string")
    if not is_hex_hash(rubric_hash):
        raise _refuse("rubric_hash must be 64 lowercase hex")
    if not is_hex_hash(submission_hash):
        raise _refuse("submission_hash must be 64 lowercase hex")
    if not isinstance(payload, Mapping):
        raise _refuse("payload must be a mapping")
    key_id = private_key.public_key.key_id
    body: dict[str, Any] = {
        "format": FORMAT,
        "algo": ALGO,
        "key_id": key_id,
        "verification_id": verification_id,
        "seq": seq,
        "rubric_hash": rubric_hash,
        "submission_hash": submission_hash,
        "prev_hash": prev_hash,
        "payload": dict(payload),
        "created_at": format_created_at(created_at),
    }
    envelope = canonical_text(body)  # StrictJSONError for a payload with no strict JSON form
    # STYLE §8: re-read our own output so drift between signer and verifier is caught here, not in the field.
    if canonical_text(loads_strict(envelope)) != envelope:
        raise _refuse("the canonical envelope does not re-read to the same bytes")
    content_hash = content_hash_of(envelope)
    signature = private_key.sign(signing_message(content_hash))
    if len(signature) != _SIGNATURE_SIZE:  # pragma: no cover - Ed25519 signatures are always 64 bytes
        raise _refuse("an Ed25519 signature is 64 bytes")
    return Entry(
        seq=seq,
        key_id=key_id,
        algo=ALGO,
        format=FORMAT,
        prev_hash=prev_hash,
        content_hash=content_hash,
        signature=base64.b64encode(signature).decode("ascii"),
        envelope=envelope,
    )


def build_proof(*, verification_id: str, entries: Sequence[Entry], proof_head_hash: str) -> dict[str, Any]:
    """The proof document; entries go out in seq order. The head here is informational: verifiers take theirs
    from a trusted source (SPEC §7, the seed's anti-forgery warning)."""
    if not isinstance(verification_id, str) or not verification_id:
        raise InvariantError(Reason.MALFORMED_PROOF, "verification_id must be a non-empty string")
    if not is_hex_hash(proof_head_hash):
        raise InvariantError(Reason.MALFORMED_PROOF, "proof_head_hash must be 64 lowercase hex")
    for entry in entries:
        if not isinstance(entry, Entry):
            raise InvariantError(Reason.MALFORMED_PROOF, f"not an Entry: {type(entry).__name__}")
    return proof_document(
        verification_id=verification_id,
        entries=[e.as_json() for e in sorted(entries, key=lambda e: e.seq)],
        proof_head_hash=proof_head_hash,
    )


#: The stored columns a wire entry is made of, in the order ``wire_entries`` reads them.
WIRE_COLUMNS: Final = ("seq", "key_id", "prev_hash", "content_hash", "signature", "envelope")


def wire_entries(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """Each row of stored columns (``WIRE_COLUMNS``, in that order) as the wire's JSON object, taken as they are (the
    portal signs every receipt with the one algorithm and format). Unchecked: for re-verifying what is stored,
    tampered or not."""
    return [
        {
            "seq": seq,
            "key_id": key_id,
            "algo": ALGO,
            "format": FORMAT,
            "prev_hash": prev_hash,
            "content_hash": content_hash,
            "signature": signature,
            "envelope": envelope,
        }
        for seq, key_id, prev_hash, content_hash, signature, envelope in rows
    ]


#: json's own string writer (C): quotes and escapes as ``json.dumps(..., ensure_ascii=False)`` does.
_QUOTE: Final[Callable[[str], str]] = json.encoder.encode_basestring


def _json(value: Any) -> str:
    """``value`` as ``json.dumps`` writes it compactly with non-ASCII kept; a stored column's types directly."""
    kind = type(value)
    if kind is str:
        return _QUOTE(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def proof_json(*, verification_id: str, rows: Iterable[Sequence[Any]], proof_head_hash: str) -> str:
    """``proof_document(verification_id=..., entries=wire_entries(rows), proof_head_hash=...)`` as compact JSON text,
    character for character what ``json.dumps(..., separators=(",", ":"), ensure_ascii=False)`` writes, without
    making a dict per entry and walking it again: serving a 10,000-entry chain spent longer on that than on reading
    its rows. Unchecked, as ``wire_entries``: the stored columns as they are."""
    algo, format_ = _QUOTE(ALGO), _QUOTE(FORMAT)
    entries = ",".join(
        [
            f'{{"seq":{_json(seq)},"key_id":{_json(key_id)},"algo":{algo},"format":{format_},'
            f'"prev_hash":{_json(prev_hash)},"content_hash":{_json(content_hash)},"signature":{_json(signature)},'
            f'"envelope":{_json(envelope)}}}'
            for seq, key_id, prev_hash, content_hash, signature, envelope in rows
        ]
    )
    return (
        f'{{"verification_id":{_json(verification_id)},"format":{format_},"signing_domain":{_QUOTE(SIGNING_DOMAIN)},'
        f'"jwks_uri":{_QUOTE(JWKS_URI)},"proof_head_hash":{_json(proof_head_hash)},"entries":[{entries}]}}'
    )


def proof_document(
    *, verification_id: str, entries: Sequence[Mapping[str, Any]], proof_head_hash: str
) -> dict[str, Any]:
    """The proof document's frame around ``entries`` as given, in the order given. ``build_proof`` checks its entries
    first; the audit and ``proof_for`` hand over the stored rows unchecked (``wire_entries``) so that the strict
    verifier judges them."""
    return {
        "verification_id": verification_id,
        "format": FORMAT,
        "signing_domain": SIGNING_DOMAIN,
        "jwks_uri": JWKS_URI,
        "proof_head_hash": proof_head_hash,
        "entries": list(map(dict, entries)),
    }
