"""Proof chains and the strict verifier (SPEC §7): a real signed chain, then one tampered copy per attack."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verification.kernel.canonical import canonical_text, loads_strict
from verification.kernel.chain import (
    ALGO,
    ENTRY_FIELDS,
    FORMAT,
    JWKS_URI,
    PROOF_FIELDS,
    SIGNING_DOMAIN,
    Entry,
    build_proof,
    format_created_at,
    sign_entry,
)
from verification.kernel.errors import InvariantError, ProofVerificationError
from verification.kernel.keys import PrivateKey
from verification.kernel.reasons import Reason
from verification.kernel.verifier import (
    STEP_NAMES,
    StepStatus,
    TrustedKey,
    VerificationReport,
    verify_proof_bytes,
    verify_report,
    verify_strict,
    verify_strict_bytes,
)

VID = "44444444-4444-4444-8444-444444444444"
OTHER_VID = "55555555-5555-4555-8555-555555555555"
SUB = hashlib.sha256(b"the request body").hexdigest()
RUBRIC = hashlib.sha256(b"the rubric").hexdigest()
T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)

KEY = PrivateKey.generate()
OTHER_KEY = PrivateKey.generate()
PINNED: dict[str, TrustedKey] = {KEY.public_key.key_id: TrustedKey(KEY.public_key)}


def make_chain(
    key: PrivateKey = KEY,
    *,
    vid: str = VID,
    sub: str = SUB,
    kinds: tuple[str, ...] = ("run", "result", "decision"),
    extra: Mapping[str, Any] | None = None,
) -> list[Entry]:
    """A real chain: run → result → decision, each payload superseding the previous receipt."""
    verdicts = {"run": "UNKNOWN", "result": "UNKNOWN", "decision": "PASS"}
    entries: list[Entry] = []
    prev: str | None = None
    for seq, kind in enumerate(kinds):
        payload: dict[str, Any] = {
            "kind": kind,
            "verdict": verdicts.get(kind, "UNKNOWN"),
            "supersedes_receipt_id": prev,
            "rationale": "vérifié ✓" if kind == "decision" else None,
            **(extra or {}),
        }
        entry = sign_entry(
            private_key=key,
            verification_id=vid,
            seq=seq,
            rubric_hash=RUBRIC,
            submission_hash=sub,
            prev_hash=prev,
            payload=payload,
            created_at=T0 + timedelta(minutes=seq),
        )
        entries.append(entry)
        prev = entry.content_hash
    return entries


CHAIN = make_chain()
HEAD = CHAIN[-1].content_hash
PROOF = build_proof(verification_id=VID, entries=CHAIN, proof_head_hash=HEAD)


EXPECTED: dict[str, Any] = {
    "keys": PINNED,
    "trusted_head": HEAD,
    "expected_verification_id": VID,
    "expected_submission_hash": SUB,
}


def fresh() -> dict[str, Any]:
    return copy.deepcopy(PROOF)


def verify(
    proof: Any,
    *,
    keys: Mapping[str, TrustedKey] = PINNED,
    head: str | None = HEAD,
    vid: str = VID,
    sub: str = SUB,
) -> VerificationReport:
    before = copy.deepcopy(proof)
    report = verify_report(
        proof, keys=keys, trusted_head=head, expected_verification_id=vid, expected_submission_hash=sub
    )
    assert proof == before  # the verifier never changes what it was given
    return report


def assert_refused(report: VerificationReport, reason: Reason, step: int, seq: int | None) -> None:
    assert report.ok is False
    assert report.reason is reason
    assert report.failed_step == step
    assert report.failed_seq == seq
    failed = report.steps[step]
    assert failed.status is StepStatus.FAILED and failed.reason is reason
    assert all(s.ok for s in report.steps[:step])
    assert all(s.status is StepStatus.NOT_RUN for s in report.steps[step + 1 :])


def reseal(entry: dict[str, Any], envelope: str, key: PrivateKey = KEY, *, sync_side_channel: bool = True) -> None:
    """Put ``envelope`` into ``entry`` with a matching content hash and a real signature by ``key``."""
    entry["envelope"] = envelope
    entry["content_hash"] = hashlib.sha256(envelope.encode("utf-8")).hexdigest()
    entry["signature"] = base64.b64encode(key.sign((SIGNING_DOMAIN + entry["content_hash"]).encode())).decode()
    if sync_side_channel:
        body = json.loads(envelope)
        for name in ("key_id", "algo", "format", "seq", "prev_hash"):
            entry[name] = body[name]


def resign_body(entry: dict[str, Any], mutate: Callable[[dict[str, Any]], None], key: PrivateKey = KEY) -> None:
    body = loads_strict(entry["envelope"])
    mutate(body)
    reseal(entry, canonical_text(body), key)


# --- the chain as signed ------------------------------------------------------------------------------------


def test_signed_entry_wire_format() -> None:
    e0, e1 = CHAIN[0], CHAIN[1]
    body = loads_strict(e0.envelope)
    assert set(body) == {
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
    }
    assert body["format"] == FORMAT == "acretix-verify/proof/2"
    assert body["algo"] == ALGO == "ed25519"
    assert body["key_id"] == e0.key_id == KEY.public_key.key_id
    assert (body["seq"], body["prev_hash"], e1.prev_hash) == (0, None, e0.content_hash)
    assert body["created_at"] == "2025-03-01T12:00:00.000000Z"
    assert e0.envelope == canonical_text(body)  # the envelope is the RFC 8785 text of the signed body
    assert e0.content_hash == hashlib.sha256(e0.envelope.encode("utf-8")).hexdigest()
    signature = base64.b64decode(e0.signature, validate=True)
    assert KEY.public_key.verify(signature, b"acretix-verify/proof-sig/2:" + e0.content_hash.encode())
    assert e0.as_json() == {
        "seq": 0,
        "key_id": e0.key_id,
        "algo": "ed25519",
        "format": "acretix-verify/proof/2",
        "prev_hash": None,
        "content_hash": e0.content_hash,
        "signature": e0.signature,
        "envelope": e0.envelope,
    }
    payload_kinds = [loads_strict(e.envelope)["payload"]["kind"] for e in CHAIN]
    assert payload_kinds == ["run", "result", "decision"]


def test_build_proof_shape_and_order() -> None:
    proof = build_proof(verification_id=VID, entries=list(reversed(CHAIN)), proof_head_hash=HEAD)
    assert proof == PROOF
    assert list(proof) == ["verification_id", "format", "signing_domain", "jwks_uri", "proof_head_hash", "entries"]
    assert (proof["format"], proof["signing_domain"], proof["jwks_uri"]) == (FORMAT, SIGNING_DOMAIN, JWKS_URI)
    assert JWKS_URI == "/.well-known/acretix-verify/keys.json"
    assert [e["seq"] for e in proof["entries"]] == [0, 1, 2]
    with pytest.raises(InvariantError):
        build_proof(verification_id=VID, entries=CHAIN, proof_head_hash="HEAD")


def test_format_created_at() -> None:
    assert format_created_at(datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=UTC)) == "2025-01-02T03:04:05.000006Z"
    plus2 = timezone(timedelta(hours=2))
    assert format_created_at(datetime(2025, 1, 2, 1, 0, tzinfo=plus2)) == "2025-01-01T23:00:00.000000Z"
    assert format_created_at(datetime(5, 1, 1, tzinfo=UTC)) == "0005-01-01T00:00:00.000000Z"
    with pytest.raises(InvariantError) as exc:
        format_created_at(datetime(2025, 1, 2))  # noqa: DTZ001 - naive on purpose
    assert exc.value.reason is Reason.MALFORMED_ENVELOPE


@pytest.mark.parametrize(
    "changes",
    [
        {"seq": -1},
        {"seq": True},
        {"seq": 0, "prev_hash": "a" * 64},
        {"seq": 1, "prev_hash": None},
        {"seq": 1, "prev_hash": "A" * 64},
        {"rubric_hash": "sha256:" + "a" * 64},
        {"submission_hash": "0" * 63},
        {"verification_id": ""},
        {"created_at": datetime(2025, 1, 1)},  # noqa: DTZ001 - naive on purpose
    ],
)
def test_sign_entry_refuses_bad_input(changes: dict[str, Any]) -> None:
    args: dict[str, Any] = {
        "private_key": KEY,
        "verification_id": VID,
        "seq": 0,
        "rubric_hash": RUBRIC,
        "submission_hash": SUB,
        "prev_hash": None,
        "payload": {"kind": "run"},
        "created_at": T0,
    }
    args.update(changes)
    with pytest.raises(InvariantError) as exc:
        sign_entry(**args)
    assert exc.value.reason is Reason.MALFORMED_ENVELOPE


def test_sign_entry_refuses_payload_without_strict_json_form() -> None:
    from verification.kernel.errors import StrictJSONError

    with pytest.raises(StrictJSONError) as exc:
        sign_entry(
            private_key=KEY,
            verification_id=VID,
            seq=0,
            rubric_hash=RUBRIC,
            submission_hash=SUB,
            prev_hash=None,
            payload={"score": float("nan")},
            created_at=T0,
        )
    assert exc.value.reason is Reason.NON_FINITE_NUMBER


def test_entry_refuses_malformed_fields() -> None:
    good = CHAIN[1].as_json()
    for name, value in [("seq", -1), ("content_hash", "x"), ("signature", "@@"), ("prev_hash", None)]:
        with pytest.raises(InvariantError) as exc:
            Entry(**{**good, name: value})
        assert exc.value.reason is Reason.MALFORMED_PROOF


# --- the valid chain ----------------------------------------------------------------------------------------


def test_valid_chain_verifies_every_step() -> None:
    report = verify(fresh())
    assert report.ok and report.reason is None and report.failed_step is None and report.failed_seq is None
    assert [s.number for s in report.steps] == list(range(9))
    assert [s.name for s in report.steps] == list(STEP_NAMES)
    assert all(s.status is StepStatus.PASSED for s in report.steps)
    for step in report.steps:
        if step.number != 7:
            assert [r.seq for r in step.entries] == [0, 1, 2] and all(r.ok for r in step.entries)
    assert report.computed_head == HEAD
    assert report.entries_verified == 3
    assert [v.seq for v in report.entries] == [0, 1, 2]
    assert all(v.ok for v in report.entries)
    assert report.entries[2].body is not None and report.entries[2].body["payload"]["kind"] == "decision"
    assert verify_strict(fresh(), **EXPECTED).ok


def test_array_order_is_irrelevant() -> None:
    proof = fresh()
    proof["entries"].reverse()
    report = verify(proof)
    assert report.ok
    assert [v.seq for v in report.entries] == [0, 1, 2]
    assert [v.index for v in report.entries] == [2, 1, 0]


def test_serialized_proof_verifies_from_bytes() -> None:
    data = json.dumps(PROOF, indent=2).encode()
    report = verify_proof_bytes(data, **EXPECTED)
    assert report.ok
    assert verify_strict_bytes(data, **EXPECTED).ok


def test_unknown_envelope_fields_verify_and_stay_covered() -> None:
    chain = make_chain(extra={"issuer_note": "kept"})
    proof = build_proof(verification_id=VID, entries=chain, proof_head_hash=chain[-1].content_hash)
    head = chain[-1].content_hash
    assert verify(proof, head=head).ok  # unknown fields are fine ...
    changed = copy.deepcopy(proof)
    changed["entries"][1]["envelope"] = changed["entries"][1]["envelope"].replace('"kept"', '"KEPT"')
    assert changed != proof
    assert_refused(verify(changed, head=head), Reason.CONTENT_HASH_MISMATCH, 2, 1)  # ... and covered
    # Recomputing the hash without the private key only moves the failure to the signature.
    changed["entries"][1]["content_hash"] = hashlib.sha256(changed["entries"][1]["envelope"].encode()).hexdigest()
    assert_refused(verify(changed, head=head), Reason.SIGNATURE_FAILURE, 5, 1)


# --- step 0 -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("head", [None, ""])
def test_missing_trusted_head(head: str | None) -> None:
    assert_refused(verify(fresh(), head=head), Reason.MISSING_TRUSTED_HEAD, 0, None)
    # A missing head is reported even when the proof is junk as well.
    assert_refused(verify("junk", head=head), Reason.MISSING_TRUSTED_HEAD, 0, None)
    report = verify_proof_bytes(b"{{", **{**EXPECTED, "trusted_head": head})
    assert report.reason is Reason.MISSING_TRUSTED_HEAD


def test_signature_not_base64_is_malformed_proof() -> None:
    proof = fresh()
    proof["entries"][1]["signature"] = "not base64!"
    assert_refused(verify(proof), Reason.MALFORMED_PROOF, 0, 1)


def test_non_canonical_base64_signature_is_malformed_proof() -> None:
    proof = fresh()
    sig = proof["entries"][0]["signature"]
    assert sig.endswith("==")  # 64 bytes: two padding characters, four unused bits before them
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet[alphabet.index(sig[-3]) ^ 0x01]  # set an unused bit: decodes to the same bytes
    proof["entries"][0]["signature"] = sig[:-3] + last + "=="
    assert base64.b64decode(proof["entries"][0]["signature"], validate=True) == base64.b64decode(sig)
    assert_refused(verify(proof), Reason.MALFORMED_PROOF, 0, 0)
    proof["entries"][0]["signature"] = sig.rstrip("=")  # missing padding
    assert_refused(verify(proof), Reason.MALFORMED_PROOF, 0, 0)
    proof["entries"][0]["signature"] = sig[:20] + "\n" + sig[20:]  # embedded whitespace
    assert_refused(verify(proof), Reason.MALFORMED_PROOF, 0, 0)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("seq", True),
        ("seq", "1"),
        ("seq", -1),
        ("seq", 1.0),
        ("key_id", None),
        ("algo", 1),
        ("format", ["acretix-verify/proof/2"]),
        ("prev_hash", 7),
        ("content_hash", None),
        ("signature", None),
        ("envelope", {"seq": 1}),
        ("envelope", "\ud800"),
    ],
)
def test_wrong_field_types_are_malformed_proof(name: str, value: Any) -> None:
    proof = fresh()
    proof["entries"][1][name] = value
    report = verify(proof)
    assert report.reason is Reason.MALFORMED_PROOF and report.failed_step == 0
    assert report.steps[0].entries[1].ok is False and report.steps[0].entries[1].index == 1


@pytest.mark.parametrize("name", ENTRY_FIELDS)
def test_missing_field_is_malformed_proof(name: str) -> None:
    proof = fresh()
    del proof["entries"][2][name]
    report = verify(proof)
    assert report.reason is Reason.MALFORMED_PROOF and report.failed_step == 0


@pytest.mark.parametrize("proof", [None, [], "proof", {"entries": {}}, {"entries": None}, {}, {"entries": [1]}])
def test_malformed_proof_shapes(proof: Any) -> None:
    report = verify(proof)
    assert report.reason is Reason.MALFORMED_PROOF and report.failed_step == 0


def test_malformed_in_step0_lowest_index_decides() -> None:
    proof = fresh()
    proof["entries"][2]["signature"] = "%%%"
    proof["entries"][1]["algo"] = None
    report = verify(proof)
    assert report.reason is Reason.MALFORMED_PROOF and report.failed_seq == 1
    assert [r.ok for r in report.steps[0].entries] == [True, False, False]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b'{"entries": [], "entries": []}',  # duplicate key
        b'{"entries": [NaN]}',
        b'{"entries": [], "x": "\\ud800"}',
        b'{"entries": [], "x": 9007199254740992}',
        b"\xef\xbb\xbf{}",
        b'{"entries": []} trailing',
        b"\xff",
    ],
)
def test_strict_parse_failure_is_malformed_proof(data: bytes) -> None:
    report = verify_proof_bytes(data, **EXPECTED)
    assert_refused(report, Reason.MALFORMED_PROOF, 0, None)


def test_duplicate_key_inside_an_entry_is_malformed_proof() -> None:
    text = json.dumps(PROOF)
    seq_field = '"seq": 1, '
    assert seq_field in text
    data = text.replace(seq_field, seq_field + seq_field, 1).encode()
    report = verify_proof_bytes(data, **EXPECTED)
    assert report.reason is Reason.MALFORMED_PROOF


def test_empty_proof() -> None:
    proof = fresh()
    proof["entries"] = []
    assert_refused(verify(proof), Reason.EMPTY_PROOF, 0, None)


@pytest.mark.parametrize("name", [f for f in PROOF_FIELDS if f != "entries"])
def test_top_level_fields_are_required_strings(name: str) -> None:
    proof = fresh()
    del proof[name]
    assert_refused(verify(proof), Reason.MALFORMED_PROOF, 0, None)
    proof[name] = None
    assert_refused(verify(proof), Reason.MALFORMED_PROOF, 0, None)


# --- step 1 -------------------------------------------------------------------------------------------------


def test_drop_first_entry_is_non_contiguous() -> None:
    proof = fresh()
    del proof["entries"][0]
    assert_refused(verify(proof), Reason.NON_CONTIGUOUS_SEQ, 1, 1)


def test_drop_middle_entry_is_non_contiguous() -> None:
    proof = fresh()
    del proof["entries"][1]
    report = verify(proof)
    assert_refused(report, Reason.NON_CONTIGUOUS_SEQ, 1, 2)
    assert [(r.seq, r.ok) for r in report.steps[1].entries] == [(0, True), (2, False)]


def test_duplicate_seq_is_non_contiguous() -> None:
    proof = fresh()
    proof["entries"].insert(1, copy.deepcopy(proof["entries"][1]))
    assert_refused(verify(proof), Reason.NON_CONTIGUOUS_SEQ, 1, 1)


def test_drop_last_entry_is_terminal_head_mismatch() -> None:
    proof = fresh()
    del proof["entries"][2]
    report = verify(proof)
    assert_refused(report, Reason.TERMINAL_HEAD_MISMATCH, 7, 1)
    assert report.computed_head == CHAIN[1].content_hash


# --- step 2 -------------------------------------------------------------------------------------------------


def test_flipped_envelope_byte_is_content_hash_mismatch() -> None:
    proof = fresh()
    envelope = proof["entries"][1]["envelope"]
    i = envelope.index('"result"') + 2
    proof["entries"][1]["envelope"] = envelope[:i] + chr(ord(envelope[i]) ^ 0x01) + envelope[i + 1 :]
    report = verify(proof)
    assert_refused(report, Reason.CONTENT_HASH_MISMATCH, 2, 1)
    assert [r.ok for r in report.steps[2].entries] == [True, False, True]  # every entry of the failing step
    assert report.entries[1].reason is Reason.CONTENT_HASH_MISMATCH
    assert report.entries[0].status is StepStatus.NOT_RUN


def test_changed_content_hash_is_content_hash_mismatch() -> None:
    proof = fresh()
    proof["entries"][0]["content_hash"] = "0" * 64
    assert_refused(verify(proof), Reason.CONTENT_HASH_MISMATCH, 2, 0)


@pytest.mark.parametrize(
    "make_envelope",
    [
        lambda env: env[:-1] + ',"seq":1}',  # duplicate key
        lambda env: env.replace('"seq":1', '"seq":NaN'),
        lambda env: env[:-1],  # truncated
        lambda env: env.replace('"seq":1', '"seq":9007199254740993'),
        lambda env: env.replace('"kind":"result"', '"kind":"\\udc00"'),
        lambda env: "[" + env + "]",  # not an object
        lambda env: env.replace('"seq":1', '"seq":true'),
        lambda env: env.replace('"seq":1', '"seq":1.5'),
        lambda env: env.replace('"payload":{', '"payload":[{').replace(',"prev_hash"', '],"prev_hash"'),
        lambda env: env.replace('"created_at":"2025-03-01T12:01:00.000000Z"', '"created_at":"2025-03-01 12:01"'),
        lambda env: env.replace('"created_at":"2025-03-01T12:01:00.000000Z"', '"created_at":"2025-02-30T12:01:00Z"'),
        lambda env: env.replace(f'"rubric_hash":"{RUBRIC}",', ""),
        lambda env: env.replace(f'"verification_id":"{VID}"', '"verification_id":null'),
    ],
)
def test_not_strict_or_incomplete_envelope_is_malformed_envelope(make_envelope: Callable[[str], str]) -> None:
    proof = fresh()
    entry = proof["entries"][1]
    envelope = make_envelope(entry["envelope"])
    assert envelope != entry["envelope"]
    reseal(entry, envelope, sync_side_channel=False)  # hash and signature recomputed to match
    assert_refused(verify(proof), Reason.MALFORMED_ENVELOPE, 2, 1)


# --- step 3 -------------------------------------------------------------------------------------------------


def test_unsupported_signed_format() -> None:
    proof = fresh()
    resign_body(proof["entries"][1], lambda b: b.update(format="acretix-verify/proof/3"))
    assert proof["entries"][1]["format"] == "acretix-verify/proof/3"
    assert_refused(verify(proof), Reason.UNSUPPORTED_FORMAT, 3, 1)


def test_unsupported_signed_algo() -> None:
    proof = fresh()
    resign_body(proof["entries"][2], lambda b: b.update(algo="ed448"))
    assert_refused(verify(proof), Reason.UNSUPPORTED_ALGO, 3, 2)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("format", "acretix-verify/proof/3"),
        ("signing_domain", "acretix-verify/proof-sig/3:"),
        ("jwks_uri", "https://x/k"),
    ],
)
def test_top_level_format_fields_must_be_proof_2(name: str, value: str) -> None:
    proof = fresh()
    proof[name] = value
    assert_refused(verify(proof), Reason.UNSUPPORTED_FORMAT, 3, None)


def test_signed_format_decides_before_the_documents() -> None:
    proof = fresh()
    proof["format"] = "acretix-verify/proof/3"
    resign_body(proof["entries"][2], lambda b: b.update(algo="ed448"))
    assert_refused(verify(proof), Reason.UNSUPPORTED_ALGO, 3, 2)


# --- step 4 -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("key_id", OTHER_KEY.public_key.key_id),
        ("algo", "EdDSA"),
        ("format", "acretix-verify/proof/1"),
        ("prev_hash", "0" * 64),
    ],
)
def test_side_channel_change_is_envelope_mismatch(name: str, value: str) -> None:
    proof = fresh()
    proof["entries"][1][name] = value
    assert_refused(verify(proof), Reason.ENVELOPE_MISMATCH, 4, 1)


def test_side_channel_null_prev_hash_is_envelope_mismatch() -> None:
    proof = fresh()
    proof["entries"][2]["prev_hash"] = None
    assert_refused(verify(proof), Reason.ENVELOPE_MISMATCH, 4, 2)


def test_side_channel_seq_that_differs_from_signed_seq() -> None:
    proof = fresh()
    # Swap the side-channel seqs of entries 1 and 2: still contiguous, but each disagrees with its signed seq.
    proof["entries"][1]["seq"], proof["entries"][2]["seq"] = 2, 1
    assert_refused(verify(proof), Reason.ENVELOPE_MISMATCH, 4, 1)


# --- step 5 -------------------------------------------------------------------------------------------------


def test_resigned_by_unpinned_key_is_unknown_key() -> None:
    proof = fresh()
    resign_body(proof["entries"][1], lambda b: b.update(key_id=OTHER_KEY.public_key.key_id), OTHER_KEY)
    assert_refused(verify(proof), Reason.UNKNOWN_KEY, 5, 1)


def test_key_pinned_under_another_id_is_unknown_key() -> None:
    mislabeled = {KEY.public_key.key_id: TrustedKey(OTHER_KEY.public_key)}
    assert_refused(verify(fresh(), keys=mislabeled), Reason.UNKNOWN_KEY, 5, 0)
    assert_refused(verify(fresh(), keys={}), Reason.UNKNOWN_KEY, 5, 0)


def test_revoked_key() -> None:
    revoked = {KEY.public_key.key_id: TrustedKey(KEY.public_key, revoked=True)}
    report = verify(fresh(), keys=revoked)
    assert_refused(report, Reason.REVOKED_KEY, 5, 0)
    assert all(r.reason is Reason.REVOKED_KEY for r in report.steps[5].entries)


def test_signature_by_another_key_under_the_pinned_id_is_signature_failure() -> None:
    proof = fresh()
    entry = proof["entries"][2]
    forged = OTHER_KEY.sign((SIGNING_DOMAIN + entry["content_hash"]).encode())
    entry["signature"] = base64.b64encode(forged).decode()
    assert_refused(verify(proof), Reason.SIGNATURE_FAILURE, 5, 2)


def test_signature_over_the_wrong_message_is_signature_failure() -> None:
    proof = fresh()
    entry = proof["entries"][0]
    entry["signature"] = base64.b64encode(KEY.sign(entry["content_hash"].encode())).decode()  # no domain
    assert_refused(verify(proof), Reason.SIGNATURE_FAILURE, 5, 0)
    entry["signature"] = base64.b64encode(b"\x00" * 63).decode()  # wrong length, valid base64
    assert_refused(verify(proof), Reason.SIGNATURE_FAILURE, 5, 0)


# --- step 6 -------------------------------------------------------------------------------------------------


def test_spliced_entry_from_another_chain_of_the_same_key_is_broken_chain() -> None:
    other = make_chain(extra={"attempt": 2})  # same key, same subject, another history
    proof = fresh()
    proof["entries"][1] = other[1].as_json()
    report = verify(proof)
    assert_refused(report, Reason.BROKEN_CHAIN, 6, 1)
    assert [r.ok for r in report.steps[6].entries] == [True, False, False]


def test_spliced_entry_whose_own_link_holds_breaks_the_next_link() -> None:
    other = make_chain(kinds=("run", "decision", "decision"))  # shares seq 0 byte for byte with CHAIN
    assert other[0] == CHAIN[0] and other[1] != CHAIN[1]
    proof = fresh()
    proof["entries"][1] = other[1].as_json()
    assert_refused(verify(proof), Reason.BROKEN_CHAIN, 6, 2)


def test_valid_chain_of_another_verification_is_subject_mismatch() -> None:
    other = make_chain(vid=OTHER_VID)
    proof = build_proof(verification_id=VID, entries=other, proof_head_hash=other[-1].content_hash)
    assert_refused(verify(proof, head=other[-1].content_hash), Reason.SUBJECT_MISMATCH, 8, 0)


# --- step 7 -------------------------------------------------------------------------------------------------


def test_wrong_head_is_terminal_head_mismatch() -> None:
    assert_refused(verify(fresh(), head=CHAIN[1].content_hash), Reason.TERMINAL_HEAD_MISMATCH, 7, 2)
    assert_refused(verify(fresh(), head=HEAD.upper()), Reason.TERMINAL_HEAD_MISMATCH, 7, 2)


def test_the_proofs_own_head_is_never_trusted() -> None:
    proof = fresh()
    del proof["entries"][2]
    proof["proof_head_hash"] = CHAIN[1].content_hash  # the holder claims the truncated head
    assert_refused(verify(proof), Reason.TERMINAL_HEAD_MISMATCH, 7, 1)


def test_top_level_head_must_agree_with_the_trusted_head() -> None:
    proof = fresh()
    proof["proof_head_hash"] = CHAIN[1].content_hash
    assert_refused(verify(proof), Reason.TERMINAL_HEAD_MISMATCH, 7, None)


# --- step 8 -------------------------------------------------------------------------------------------------


def test_another_expected_verification_id_is_subject_mismatch() -> None:
    report = verify(fresh(), vid=OTHER_VID)
    assert_refused(report, Reason.SUBJECT_MISMATCH, 8, 0)
    assert report.entries_verified == 0


def test_top_level_verification_id_must_be_the_expected_one() -> None:
    proof = fresh()
    proof["verification_id"] = OTHER_VID
    report = verify(proof)
    assert_refused(report, Reason.SUBJECT_MISMATCH, 8, None)
    assert report.entries_verified == 3  # every entry's own checks passed; the document names another subject


def test_another_expected_submission_hash_is_subject_mismatch() -> None:
    assert_refused(verify(fresh(), sub="0" * 64), Reason.SUBJECT_MISMATCH, 8, 0)


def test_one_entry_about_another_subject_is_subject_mismatch() -> None:
    proof = fresh()
    resign_body(proof["entries"][2], lambda b: b.update(submission_hash="1" * 64))
    head = proof["proof_head_hash"] = proof["entries"][2]["content_hash"]
    report = verify(proof, head=head)
    assert_refused(report, Reason.SUBJECT_MISMATCH, 8, 2)
    assert report.entries_verified == 2


# --- step ordering ------------------------------------------------------------------------------------------


def test_two_faults_report_the_earlier_step() -> None:
    proof = fresh()
    proof["entries"][0]["key_id"] = "ed25519-0000000000000000"  # step 4, seq 0
    proof["entries"][2]["content_hash"] = "f" * 64  # step 2, seq 2
    assert_refused(verify(proof), Reason.CONTENT_HASH_MISMATCH, 2, 2)


def test_within_a_step_the_lowest_seq_decides_whatever_its_code() -> None:
    proof = fresh()
    proof["entries"][2]["content_hash"] = "f" * 64  # content-hash-mismatch at seq 2
    reseal(proof["entries"][1], proof["entries"][1]["envelope"][:-1], sync_side_channel=False)  # malformed at 1
    proof["entries"].reverse()  # array order must not matter
    report = verify(proof)
    assert_refused(report, Reason.MALFORMED_ENVELOPE, 2, 1)
    codes = {r.seq: r.reason for r in report.steps[2].entries}
    assert codes == {0: None, 1: Reason.MALFORMED_ENVELOPE, 2: Reason.CONTENT_HASH_MISMATCH}


def test_step5_lowest_seq_decides_between_codes() -> None:
    proof = fresh()
    resign_body(proof["entries"][2], lambda b: b.update(key_id=OTHER_KEY.public_key.key_id), OTHER_KEY)  # unknown
    forged = OTHER_KEY.sign((SIGNING_DOMAIN + proof["entries"][1]["content_hash"]).encode())
    proof["entries"][1]["signature"] = base64.b64encode(forged).decode()  # signature failure
    assert_refused(verify(proof), Reason.SIGNATURE_FAILURE, 5, 1)


def test_strict_wrapper_raises_the_first_failure() -> None:
    proof = fresh()
    del proof["entries"][1]
    with pytest.raises(ProofVerificationError) as exc:
        verify_strict(proof, **EXPECTED)
    assert exc.value.reason is Reason.NON_CONTIGUOUS_SEQ
    assert "seq 2" in exc.value.detail and exc.value.details == {"step": 1, "seq": 2}
    with pytest.raises(ProofVerificationError) as exc2:
        verify_strict_bytes(b"[]", **EXPECTED)
    assert exc2.value.reason is Reason.MALFORMED_PROOF


def test_trusted_key_refuses_non_keys() -> None:
    with pytest.raises(InvariantError):
        TrustedKey(key="ed25519-0000")  # type: ignore[arg-type]
    with pytest.raises(InvariantError):
        TrustedKey(KEY.public_key, revoked="no")  # type: ignore[arg-type]


def test_long_chain_verifies_linearly() -> None:
    """A 2,000-entry chain: one hash, one parse and one signature check per entry."""
    entries: list[Entry] = []
    prev: str | None = None
    for seq in range(2000):
        entry = sign_entry(
            private_key=KEY,
            verification_id=VID,
            seq=seq,
            rubric_hash=RUBRIC,
            submission_hash=SUB,
            prev_hash=prev,
            payload={"kind": "decision", "n": seq},
            created_at=T0,
        )
        entries.append(entry)
        prev = entry.content_hash
    assert prev is not None
    proof = build_proof(verification_id=VID, entries=entries, proof_head_hash=prev)
    report = verify(proof, head=prev)
    assert report.ok and report.entries_verified == 2000
    proof["entries"][1999]["prev_hash"] = entries[1997].content_hash
    assert_refused(verify(proof, head=prev), Reason.ENVELOPE_MISMATCH, 4, 1999)


# --- fuzzing ------------------------------------------------------------------------------------------------

SERIALIZED = json.dumps(PROOF, indent=1).encode()  # ASCII: the non-ASCII rationale travels as \u escapes


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(position=st.integers(min_value=0, max_value=len(SERIALIZED) - 1), value=st.integers(min_value=0, max_value=255))
def test_single_byte_mutations_never_verify_unless_semantically_identical(position: int, value: int) -> None:
    mutated = bytearray(SERIALIZED)
    if mutated[position] == value:
        return
    mutated[position] = value
    report = verify_proof_bytes(bytes(mutated), **EXPECTED)
    if report.ok:
        assert loads_strict(bytes(mutated)) == PROOF  # only a change of form, never of meaning, verifies
    else:
        assert report.reason is not None and report.failed_step is not None


def test_semantically_identical_mutations_verify() -> None:
    """The fuzz test's escape hatch is not vacuous: whitespace and escape-case changes keep the same meaning."""
    text = SERIALIZED.decode()
    assert verify_proof_bytes(text.replace("\n ", "\n\t", 1).encode(), **EXPECTED).ok
    assert "\\u00e9" in text
    assert verify_proof_bytes(text.replace("\\u00e9", "\\u00E9").encode(), **EXPECTED).ok
