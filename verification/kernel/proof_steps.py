"""The checks of the strict proof verifier, one function per step of the recipe (SPEC §7; ``verifier.py`` runs them).

Each check looks at one entry (or, for ``document*``, at the proof's own top-level fields) and raises
``StepFailed`` with the reason code of the first thing wrong; the driver in ``verifier.py`` runs each step over all
entries, decides which failure counts and writes the report. Step 5 (the caller's keys) lives beside the driver's
``TrustedKey``. Nothing here re-serializes: the envelope is hashed and parsed as received.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Final

from verification.kernel.canonical import loads_strict
from verification.kernel.chain import ALGO, ENTRY_FIELDS, FORMAT, JWKS_URI, SIGNING_DOMAIN, decode_signature
from verification.kernel.errors import StrictJSONError
from verification.kernel.reasons import Reason

_RFC3339_UTC: Final = re.compile(r"\A(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?Z\Z")


# --- per-entry working state --------------------------------------------------------------------------------


class Work:
    """One entry as the steps learn it: its array index, the raw entry, then what each step found.

    A plain slotted class rather than a dataclass: one is made per entry, and a dataclass's keyword ``__init__`` with
    a default factory cost more than every whole-entry check of step 3, 4, 6 or 8 on a 10,000-entry chain.
    """

    __slots__ = (
        "index",
        "raw",
        "seq",
        "shaped",
        "envelope_bytes",
        "signature",
        "content_hash",
        "body",
        "signed",
        "failure",
    )

    def __init__(self, index: int, raw: Any) -> None:
        self.index = index
        self.raw = raw
        self.seq = -1
        self.shaped = False  # step 0 passed: ``raw`` is a mapping with every wire field, of the right type
        self.envelope_bytes = b""
        self.signature = b""
        self.content_hash = ""  # recomputed (step 2)
        self.body: dict[str, Any] = {}
        self.signed = False  # step 5 verified the signature under a pinned, unrevoked key
        self.failure: Reason | None = None


class StepFailed(Exception):
    """A check failed for one entry (or the document): the reason code and what was wrong."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def type_name(value: object) -> str:
    """A JSON value's type for a refusal's text (``null`` for None)."""
    return "null" if value is None else type(value).__name__


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _utf8(value: str, name: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise StepFailed(Reason.MALFORMED_PROOF, f"{name} holds a lone surrogate") from None


# step 0 -----------------------------------------------------------------------------------------------------


_ENTRY_FIELD_SET: Final = frozenset(ENTRY_FIELDS)
#: The wire strings step 0 requires, in the order a wrong one is reported; the envelope (any text) comes after them.
_ASCII_STRINGS: Final = ("key_id", "algo", "format", "content_hash", "signature")


def step0_entry_shape(work: Work) -> None:
    raw = work.raw
    if type(raw) is not dict and not isinstance(raw, Mapping):  # a parsed proof holds dicts: skip the ABC check
        raise StepFailed(Reason.MALFORMED_PROOF, f"the entry is a {type_name(raw)}, not an object")
    if not raw.keys() >= _ENTRY_FIELD_SET:
        missing = [name for name in ENTRY_FIELDS if name not in raw]
        raise StepFailed(Reason.MALFORMED_PROOF, f"missing field(s) {', '.join(missing)}")
    seq = raw["seq"]
    if not _is_int(seq) or seq < 0:
        raise StepFailed(Reason.MALFORMED_PROOF, f"seq must be a non-negative integer, got {type_name(seq)}")
    work.seq = seq
    key_id, algo, format_ = raw["key_id"], raw["algo"], raw["format"]
    content_hash, signature_text = raw["content_hash"], raw["signature"]
    # The usual entry in one test: five plain ASCII strings (an ASCII string holds no surrogate); any other entry
    # goes through the field-by-field checks, which name the first thing wrong.
    usual = type(key_id) is type(algo) is type(format_) is type(content_hash) is type(signature_text) is str
    if not usual or not (key_id + algo + format_ + content_hash + signature_text).isascii():
        for name in _ASCII_STRINGS:
            if not isinstance(raw[name], str):
                raise StepFailed(Reason.MALFORMED_PROOF, f"{name} must be a string, got {type_name(raw[name])}")
            if not raw[name].isascii():
                _utf8(raw[name], name)
    if not isinstance(raw["envelope"], str):
        raise StepFailed(Reason.MALFORMED_PROOF, f"envelope must be a string, got {type_name(raw['envelope'])}")
    prev = raw["prev_hash"]
    if prev is not None:
        if not isinstance(prev, str):
            raise StepFailed(Reason.MALFORMED_PROOF, f"prev_hash must be a string or null, got {type_name(prev)}")
        if not prev.isascii():
            _utf8(prev, "prev_hash")
    signature = decode_signature(raw["signature"])
    if signature is None:
        raise StepFailed(Reason.MALFORMED_PROOF, "signature is not standard base64")
    work.signature = signature
    work.envelope_bytes = _utf8(raw["envelope"], "envelope")
    work.shaped = True


# step 2 -----------------------------------------------------------------------------------------------------


#: The signed body's string fields, then the others, in the order a missing one is reported.
_SIGNED_STRINGS: Final = ("format", "algo", "key_id", "verification_id", "rubric_hash", "submission_hash", "created_at")
_SIGNED_REQUIRED: Final = (*_SIGNED_STRINGS, "seq", "prev_hash", "payload")
_SIGNED_REQUIRED_SET: Final = frozenset(_SIGNED_REQUIRED)


def _signed_body(body: object) -> dict[str, Any]:
    # The usual body in one test (every field present, the strings strings, seq a non-negative int, a string
    # prev_hash, an object payload); any other body goes through the checks below, which name what is wrong.
    if (
        type(body) is dict
        and body.keys() >= _SIGNED_REQUIRED_SET
        and type(body["format"])
        is type(body["algo"])
        is type(body["key_id"])
        is type(body["verification_id"])
        is type(body["rubric_hash"])
        is type(body["submission_hash"])
        is type(body["created_at"])
        is type(body["prev_hash"])
        is str
        and type(body["seq"]) is int
        and body["seq"] >= 0
        and type(body["payload"]) is dict
        and _created_at_refusal(body["created_at"]) is None
    ):
        return body
    if not isinstance(body, dict):
        raise StepFailed(Reason.MALFORMED_ENVELOPE, f"the envelope is a JSON {type_name(body)}, not an object")
    if not body.keys() >= _SIGNED_REQUIRED_SET:
        missing = next(name for name in _SIGNED_REQUIRED if name not in body)
        raise StepFailed(Reason.MALFORMED_ENVELOPE, f"the signed body has no {missing}")
    for name in _SIGNED_STRINGS:
        if not isinstance(body[name], str):
            raise StepFailed(Reason.MALFORMED_ENVELOPE, f"signed {name} must be a string, got {type_name(body[name])}")
    if not _is_int(body["seq"]) or body["seq"] < 0:
        raise StepFailed(Reason.MALFORMED_ENVELOPE, "signed seq must be a non-negative integer")
    if body["prev_hash"] is not None and not isinstance(body["prev_hash"], str):
        raise StepFailed(Reason.MALFORMED_ENVELOPE, "signed prev_hash must be a string or null")
    if not isinstance(body["payload"], dict):
        raise StepFailed(Reason.MALFORMED_ENVELOPE, "signed payload must be an object")
    refusal = _created_at_refusal(body["created_at"])
    if refusal is not None:
        raise StepFailed(Reason.MALFORMED_ENVELOPE, refusal)
    return body


@lru_cache(maxsize=4096)
def _created_at_refusal(text: str) -> str | None:
    """Why a signed ``created_at`` is refused, or None (a pure function of the text: a chain's entries often share
    one timestamp, and it is checked once)."""
    match = _RFC3339_UTC.match(text)
    if match is None:
        return "signed created_at is not RFC 3339 UTC with Z"
    try:
        year, month, day, hour, minute, second = (int(g) for g in match.groups())
        datetime(year, month, day, hour, minute, second, tzinfo=UTC)  # a real calendar date and time of day
    except ValueError:
        return "signed created_at is not a real date and time"
    return None


def step2_content(work: Work) -> None:
    if work.body:  # an earlier pass over the entries found the hash and parsed the signed body
        return
    work.content_hash = hashlib.sha256(work.envelope_bytes).hexdigest()
    if work.content_hash != work.raw["content_hash"]:
        raise StepFailed(Reason.CONTENT_HASH_MISMATCH, "content_hash is not the sha256 of the envelope bytes")
    try:
        # The text, not the bytes: step 0 encoded it, so it is valid UTF-8 and decoding those bytes would give this
        # same text back (the strict parse refuses a byte order mark either way, with the same words).
        parsed = loads_strict(work.raw["envelope"])
    except StrictJSONError as exc:
        raise StepFailed(Reason.MALFORMED_ENVELOPE, f"the envelope is not strict JSON ({exc.reason.value})") from None
    work.body = _signed_body(parsed)


# steps 3-5, 8 -------------------------------------------------------------------------------------------------


def step3_format(work: Work) -> None:
    if work.body["format"] != FORMAT:
        raise StepFailed(Reason.UNSUPPORTED_FORMAT, f"signed format {work.body['format']!r} is not {FORMAT}")
    if work.body["algo"] != ALGO:
        raise StepFailed(Reason.UNSUPPORTED_ALGO, f"signed algo {work.body['algo']!r} is not {ALGO}")


_SIDE_CHANNEL: Final = ("key_id", "algo", "format", "seq", "prev_hash")


def step4_side_channel(work: Work) -> None:
    raw, body = work.raw, work.body
    # Types already checked in steps 0 and 2. All five compared at once; the first that differs is named.
    if (
        raw["key_id"] != body["key_id"]
        or raw["algo"] != body["algo"]
        or raw["format"] != body["format"]
        or raw["seq"] != body["seq"]
        or raw["prev_hash"] != body["prev_hash"]
    ):
        name = next(name for name in _SIDE_CHANNEL if raw[name] != body[name])
        raise StepFailed(Reason.ENVELOPE_MISMATCH, f"side-channel {name} differs from the signed body")


def document3_format(proof: Mapping[str, Any]) -> None:
    """Step 3's whole-proof check: the document's own constants are proof/2's."""
    for name, expected in (("format", FORMAT), ("signing_domain", SIGNING_DOMAIN), ("jwks_uri", JWKS_URI)):
        if proof[name] != expected:
            raise StepFailed(Reason.UNSUPPORTED_FORMAT, f"the proof's {name} is not that of {FORMAT}")


def step6_chain_check(works: Sequence[Work]) -> Callable[[Work], None]:
    # ``works`` is sorted by seq and contiguous from 0 (step 1), so the previous entry is ``works[seq - 1]``.
    def step6(work: Work) -> None:
        expected = None if work.seq == 0 else works[work.seq - 1].content_hash
        if work.body["prev_hash"] != expected:
            raise StepFailed(Reason.BROKEN_CHAIN, "prev_hash is not the previous entry's content hash")

    return step6


def document8_subject(proof: Mapping[str, Any], verification_id: str) -> None:
    """Step 8's whole-proof check: the document names the expected verification."""
    if proof["verification_id"] != verification_id:
        raise StepFailed(Reason.SUBJECT_MISMATCH, "the proof's verification_id is not the expected one")


def step8_subject_check(verification_id: object, submission_hash: object) -> Callable[[Work], None]:
    def step8(work: Work) -> None:
        if work.body["verification_id"] != verification_id:
            raise StepFailed(Reason.SUBJECT_MISMATCH, "signed verification_id is not the expected one")
        if work.body["submission_hash"] != submission_hash:
            raise StepFailed(Reason.SUBJECT_MISMATCH, "signed submission_hash is not the expected one")

    return step8
