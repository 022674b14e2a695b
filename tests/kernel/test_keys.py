"""Ed25519 keys: import hardening, key ids and fingerprints, signatures (SPEC §7 "Hardening", §8).

Vectors: Wycheproof, RFC 8032 §7.1, RFC 8037 Appendix A, C2SP CCTV, ed25519-speccheck.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import pickle
import re
from pathlib import Path
from typing import Any

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from verification.kernel.canonical import canonical_text
from verification.kernel.digests import sha256_digest
from verification.kernel.errors import InvariantError, KeyRefused
from verification.kernel.keys import (
    EVIDENCE_SIGNATURE_DOMAIN,
    PrivateKey,
    PublicKey,
    b64url_decode_strict,
    b64url_encode,
    fingerprint_matches,
    load_jwks,
    normalize_fingerprint,
    sign_evidence_digest,
    verify_evidence_signature,
)
from verification.kernel.reasons import Reason

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493
SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")

# vectors/cctv-ed25519/UPSTREAM-README.md, "Low-order edwards25519 point encodings": 8 points, 14 encodings.
SMALL_ORDER_ENCODINGS = [
    "0000000000000000000000000000000000000000000000000000000000000000",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # y > p
    "0000000000000000000000000000000000000000000000000000000000000080",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",  # y > p
    "0100000000000000000000000000000000000000000000000000000000000000",  # the identity
    "0100000000000000000000000000000000000000000000000000000000000080",  # x = -0
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # y > p
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",  # x = -0, y > p
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",  # x = -0
]
RFC8032_TEST1_SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")


def _load(vectors_dir: Path, relative: str) -> Any:
    return json.loads((vectors_dir / relative).read_text(encoding="utf-8"))


def _refused(call: Any, *args: Any) -> Reason:
    with pytest.raises(KeyRefused) as info:
        call(*args)
    return info.value.reason


def _pem_for(raw: bytes) -> str:
    body = base64.b64encode(SPKI_PREFIX + raw).decode("ascii")
    return f"-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n"


@pytest.fixture(scope="module")
def test1_key() -> PrivateKey:
    return PrivateKey.from_seed(RFC8032_TEST1_SEED)


# --- Wycheproof: all 151 cases -------------------------------------------------------------------------------


def test_wycheproof_every_case_gives_the_expected_result(vectors_dir: Path) -> None:
    doc = _load(vectors_dir, "wycheproof/ed25519_test.json")
    seen = 0
    wrong: list[int] = []
    refused_keys: list[tuple[str, Reason]] = []
    for group in doc["testGroups"]:
        try:
            key: PublicKey | None = PublicKey.from_raw(bytes.fromhex(group["publicKey"]["pk"]))
        except KeyRefused as exc:  # a refused key makes every case under it "invalid"
            key = None
            refused_keys.append((group["publicKey"]["pk"], exc.reason))
        for case in group["tests"]:
            seen += 1
            assert case["result"] in ("valid", "invalid")
            if key is None:
                assert case["result"] == "invalid", f"tcId {case['tcId']}: a valid case under a refused key"
                continue
            got = key.verify(bytes.fromhex(case["sig"]), bytes.fromhex(case["msg"]))
            if got != (case["result"] == "valid"):
                wrong.append(case["tcId"])
    assert seen == doc["numberOfTests"] == 151
    assert wrong == []
    assert refused_keys == []  # no Wycheproof key is small-order or non-canonical


def test_wycheproof_key_encodings_agree(vectors_dir: Path) -> None:
    doc = _load(vectors_dir, "wycheproof/ed25519_test.json")
    for group in doc["testGroups"]:
        raw = bytes.fromhex(group["publicKey"]["pk"])
        key = PublicKey.from_raw(raw)
        assert PublicKey.from_pem(group["publicKeyPem"]) == key
        assert bytes.fromhex(group["publicKeyDer"]) == SPKI_PREFIX + raw
        jwk = dict(group["publicKeyJwk"])
        assert jwk["kid"] == "none"  # Wycheproof's placeholder is not our key id ...
        assert _refused(PublicKey.from_jwk, jwk) is Reason.KID_MISMATCH  # ... so it is refused,
        del jwk["kid"]
        assert PublicKey.from_jwk(jwk) == key  # and without it the key imports.


# --- RFC 8032 §7.1 and RFC 8037 Appendix A -------------------------------------------------------------------


def test_rfc8032_section_7_1(vectors_dir: Path) -> None:
    cases = _load(vectors_dir, "rfc/rfc8032_ed25519_section7.1.json")
    assert len(cases) == 5
    for case in cases:
        private = PrivateKey.from_seed(bytes.fromhex(case["secret_key"]))
        message, signature = bytes.fromhex(case["message"]), bytes.fromhex(case["signature"])
        assert private.public_key.raw == bytes.fromhex(case["public_key"]), case["name"]
        assert private.sign(message) == signature, case["name"]
        assert PublicKey.from_raw(bytes.fromhex(case["public_key"])).verify(signature, message)
        assert not private.public_key.verify(signature, message + b"\x00")
        tampered = bytearray(signature)
        tampered[0] ^= 1
        assert not private.public_key.verify(bytes(tampered), message)


def test_rfc8037_appendix_a(vectors_dir: Path) -> None:
    vec = _load(vectors_dir, "rfc/rfc8037_appendixA.json")
    key = PublicKey.from_jwk(vec["A.2_public_jwk"])
    assert key.x == vec["A.2_public_jwk"]["x"]
    # A.3: the thumbprint input is the canonical JSON of the required members, and its hash matches.
    assert canonical_text({"kty": "OKP", "x": key.x, "crv": "Ed25519"}) == vec["A.3_thumbprint_input"]
    assert key.thumbprint() == vec["A.3_thumbprint_sha256_b64url"] == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
    # A.1: the private key's seed gives the same public key; A.4: the JWS signature is reproduced.
    seed = b64url_decode_strict(vec["A.1_private_jwk"]["d"])
    assert seed is not None
    private = PrivateKey.from_seed(seed)
    assert private.public_key == key
    jws = vec["A.4_jws"]
    signing_input = jws["signing_input"].encode("ascii")
    assert signing_input == f"{jws['protected']}.{jws['payload']}".encode("ascii")
    expected = b64url_decode_strict(jws["signature"])
    assert expected is not None
    assert private.sign(signing_input) == expected
    assert key.verify(expected, signing_input)
    # A private JWK is refused where public keys enter (the paste box must not take secrets).
    assert _refused(PublicKey.from_jwk, vec["A.1_private_jwk"]) is Reason.MALFORMED_KEY


# --- small-order and non-canonical keys ----------------------------------------------------------------------


def test_small_order_list_is_the_upstream_list(vectors_dir: Path) -> None:
    readme = (vectors_dir / "cctv-ed25519" / "UPSTREAM-README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\s*([0-9a-f]{64})\b", readme, flags=re.MULTILINE)
    assert sorted(listed) == sorted(SMALL_ORDER_ENCODINGS)
    assert len(set(SMALL_ORDER_ENCODINGS)) == 14


def test_the_library_alone_accepts_a_small_order_key() -> None:
    """Why the hardening exists (SPEC §7): OpenSSL loads the identity, and R = identity, S = 0 verifies anything."""
    identity = bytes.fromhex(SMALL_ORDER_ENCODINGS[4])
    forged = identity + bytes(32)
    library_key = Ed25519PublicKey.from_public_bytes(identity)
    for message in (b"", b"pay mallory", b"any message at all"):
        try:
            library_key.verify(forged, message)
        except InvalidSignature:  # pragma: no cover - would mean the library hardened itself
            pytest.fail("the library refused the forged signature; re-read SPEC §7's premise")
    assert _refused(PublicKey.from_raw, identity) is Reason.SMALL_ORDER_KEY


@pytest.mark.parametrize("encoding", SMALL_ORDER_ENCODINGS)
def test_small_order_refused_everywhere_a_key_enters(encoding: str) -> None:
    raw = bytes.fromhex(encoding)
    jwk = {"kty": "OKP", "crv": "Ed25519", "x": b64url_encode(raw)}
    # Small order is checked first, so the six non-canonical encodings also get small-order-key (documented).
    assert _refused(PublicKey.from_raw, raw) is Reason.SMALL_ORDER_KEY
    assert _refused(PublicKey, raw) is Reason.SMALL_ORDER_KEY
    assert _refused(PublicKey.from_jwk, jwk) is Reason.SMALL_ORDER_KEY
    assert _refused(PublicKey.from_pem, _pem_for(raw)) is Reason.SMALL_ORDER_KEY
    assert _refused(PublicKey.from_pem, _pem_for(raw).encode("ascii")) is Reason.SMALL_ORDER_KEY
    assert _refused(PublicKey.from_text, json.dumps(jwk)) is Reason.SMALL_ORDER_KEY
    assert _refused(PublicKey.from_text, _pem_for(raw)) is Reason.SMALL_ORDER_KEY
    assert _refused(load_jwks, {"keys": [jwk]}) is Reason.SMALL_ORDER_KEY


def _encode(y: int, sign: bool) -> bytes:
    return (y | (int(sign) << 255)).to_bytes(32, "little")


@pytest.mark.parametrize("sign", [False, True])
@pytest.mark.parametrize("offset", range(19))
def test_every_y_at_or_above_p_is_refused(offset: int, sign: bool) -> None:
    """All 38 encodings with y in [p, 2^255): y = p and p + 1 are small-order points, the rest non-canonical."""
    reason = _refused(PublicKey.from_raw, _encode(P + offset, sign))
    assert reason is (Reason.SMALL_ORDER_KEY if offset in (0, 1) else Reason.NON_CANONICAL_KEY)


@settings(max_examples=300)
@given(st.integers(min_value=P, max_value=2**255 - 1), st.booleans())
def test_property_non_canonical_y_is_refused(y: int, sign: bool) -> None:
    assert _refused(PublicKey.from_raw, _encode(y, sign)) in (Reason.NON_CANONICAL_KEY, Reason.SMALL_ORDER_KEY)


@settings(max_examples=300)
@given(st.binary(min_size=32, max_size=32))
def test_property_any_32_bytes_is_a_key_or_a_coded_refusal(raw: bytes) -> None:
    try:
        key = PublicKey.from_raw(raw)
    except KeyRefused as exc:
        assert exc.reason in (Reason.MALFORMED_KEY, Reason.SMALL_ORDER_KEY, Reason.NON_CANONICAL_KEY)
    else:
        assert int.from_bytes(raw, "little") & ((1 << 255) - 1) < P
        assert raw.hex() not in SMALL_ORDER_ENCODINGS
        assert key.raw == raw


@pytest.mark.parametrize("length", [0, 1, 31, 33, 64])
def test_wrong_length_is_malformed(length: int) -> None:
    assert _refused(PublicKey.from_raw, b"\x09" * length) is Reason.MALFORMED_KEY


def test_a_y_off_the_curve_is_malformed() -> None:
    # y = 2 is reduced but (y² − 1)/(d·y² + 1) is not a square mod p.
    assert _refused(PublicKey.from_raw, _encode(2, False)) is Reason.MALFORMED_KEY


def test_non_bytes_raw_is_malformed() -> None:
    assert _refused(PublicKey.from_raw, "00" * 32) is Reason.MALFORMED_KEY
    assert _refused(PublicKey, bytearray(32)) is Reason.MALFORMED_KEY


def test_a_mixed_order_key_is_accepted(vectors_dir: Path) -> None:
    """A key with a small-order component but large order passes (documented: no blocklist can see it)."""
    cases = _load(vectors_dir, "ed25519-speccheck/cases.json")
    mixed = bytes.fromhex(cases[3]["pub_key"])
    assert PublicKey.from_raw(mixed).raw == mixed


# --- ed25519-speccheck and CCTV: our documented behaviour ----------------------------------------------------

# index → what we do: refuse the key (small-order-key) or the verify() result.
SPECCHECK_EXPECTED: dict[int, Reason | bool] = {
    0: Reason.SMALL_ORDER_KEY,  # small A and R, S = 0
    1: Reason.SMALL_ORDER_KEY,  # small A
    2: True,  # small R only: the key is honest, the equation holds (as ref10 / Go / OpenSSL)
    3: True,  # mixed A and R, holds cofactorless
    4: False,  # holds only in the cofactored equation; we verify cofactorless
    5: False,  # ditto
    6: False,  # S > L
    7: False,  # S >> L
    8: False,  # non-canonical R
    9: False,  # non-canonical R
    10: Reason.SMALL_ORDER_KEY,  # non-canonical small-order A (x = -0): small order is checked first
    11: Reason.SMALL_ORDER_KEY,
}


def _outcome(key_hex: str, sig_hex: str, message: bytes) -> Reason | bool:
    try:
        key = PublicKey.from_raw(bytes.fromhex(key_hex))
    except KeyRefused as exc:
        return exc.reason
    return key.verify(bytes.fromhex(sig_hex), message)


def test_speccheck_cases(vectors_dir: Path) -> None:
    cases = _load(vectors_dir, "ed25519-speccheck/cases.json")
    assert len(cases) == 12
    got = {i: _outcome(c["pub_key"], c["signature"], bytes.fromhex(c["message"])) for i, c in enumerate(cases)}
    assert got == SPECCHECK_EXPECTED


def test_speccheck_s_out_of_range_is_what_fails(vectors_dir: Path) -> None:
    for index in (6, 7):
        signature = bytes.fromhex(_load(vectors_dir, "ed25519-speccheck/cases.json")[index]["signature"])
        assert int.from_bytes(signature[32:], "little") >= L


def test_cctv_vectors(vectors_dir: Path) -> None:
    """Every low-order or non-canonical A is refused at import; then the ref10/Go/OpenSSL behaviour holds:
    non-canonical R and uncancelled low-order residues fail, everything else verifies."""
    vectors = _load(vectors_dir, "cctv-ed25519/ed25519vectors.json")
    assert len(vectors) == 914
    tally = {"refused": 0, "false": 0, "true": 0}
    for vec in vectors:
        flags = set(vec["flags"] or ())
        outcome = _outcome(vec["key"], vec["sig"], vec["msg"].encode("utf-8"))
        if flags & {"low_order_A", "non_canonical_A"}:
            assert outcome is Reason.SMALL_ORDER_KEY, vec["number"]
            tally["refused"] += 1
        elif flags & {"non_canonical_R", "low_order_residue"}:
            assert outcome is False, vec["number"]
            tally["false"] += 1
        else:
            assert outcome is True, vec["number"]
            tally["true"] += 1
    assert tally == {"refused": 526, "false": 302, "true": 86}


# --- signatures ----------------------------------------------------------------------------------------------


def test_verify_is_false_never_an_exception(test1_key: PrivateKey) -> None:
    key = test1_key.public_key
    good = test1_key.sign(b"m")
    assert key.verify(good, b"m")
    assert key.verify(bytearray(good), bytearray(b"m"))  # type: ignore[arg-type]
    assert key.verify(good, bytearray(b"m"))  # type: ignore[arg-type]
    assert key.verify(type("Signature", (bytes,), {})(good), b"m")  # a bytes subclass, copied like a bytearray
    assert key.verify(bytearray(good[:63]), b"m") is False  # type: ignore[arg-type]
    for bad in (b"", good[:63], good + b"\x00", good * 2, bytes(64), b"\xff" * 64):
        assert key.verify(bad, b"m") is False
    assert key.verify("not bytes", b"m") is False  # type: ignore[arg-type]
    assert key.verify(good, "m") is False  # type: ignore[arg-type]
    assert key.verify(None, None) is False  # type: ignore[arg-type]


def test_verified_prefix_counts_up_to_the_first_signature_that_fails(test1_key: PrivateKey) -> None:
    """A chain's signatures in one loop: the count of valid ones from the first, stopping at the first that is not,
    whatever makes it fail (a wrong message, a malleated S, a short signature, a value that is not bytes)."""
    key = test1_key.public_key
    messages = [b"m%d" % i for i in range(5)]
    pairs = [(test1_key.sign(m), m) for m in messages]
    assert key.verified_prefix(pairs) == 5
    assert key.verified_prefix([]) == 0
    s = int.from_bytes(pairs[2][0][32:], "little")
    for bad in (
        (pairs[3][0], messages[2]),  # another entry's signature
        (pairs[2][0][:32] + (s + L).to_bytes(32, "little"), messages[2]),  # S + L
        (pairs[2][0][:63], messages[2]),  # short
        ("not bytes", messages[2]),
        (pairs[2][0], None),
    ):
        assert key.verified_prefix([*pairs[:2], bad, *pairs[3:]]) == 2  # type: ignore[list-item]
    assert key.verified_prefix(iter(pairs)) == 5  # any iterable, consumed once


def test_s_plus_l_is_refused(test1_key: PrivateKey) -> None:
    good = test1_key.sign(b"malleable")
    s = int.from_bytes(good[32:], "little")
    malleated = good[:32] + (s + L).to_bytes(32, "little")
    assert test1_key.public_key.verify(malleated, b"malleable") is False
    at_l = good[:32] + L.to_bytes(32, "little")
    assert test1_key.public_key.verify(at_l, b"malleable") is False


def test_non_canonical_r_is_refused(test1_key: PrivateKey) -> None:
    # R with y in [p, 2^255), either sign bit: false before the library is asked (RFC 8032 §5.1.7 decoding).
    for offset in range(19):
        for sign in (False, True):
            signature = _encode(P + offset, sign) + (5).to_bytes(32, "little")
            assert test1_key.public_key.verify(signature, b"x") is False


class _AcceptsAll:
    """Stands in for the library's verifier: says yes to everything and counts what it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    def verify(self, signature: bytes, message: bytes) -> None:
        self.asked += 1


@pytest.mark.parametrize(
    ("r_y", "s", "asked"),
    [
        (P - 1, L - 1, True),  # both at the largest value allowed, compared in full (top bytes 0x7f and 0x10)
        (P - 1, L, False),  # S = L
        (P - 1, 2**256 - 1, False),
        (P, 5, False),  # y = p: top byte 0x7f, compared in full
        (2**255 - 1, 5, False),
        (2**248 * 0x7F - 1, 2**252 - 1, True),  # just below either top byte: settled by the byte alone
    ],
)
def test_s_and_r_are_range_checked_before_the_library_is_asked(
    test1_key: PrivateKey, r_y: int, s: int, asked: bool
) -> None:
    key = PublicKey.from_raw(test1_key.public_key.raw)
    library = _AcceptsAll()
    object.__setattr__(key, "_verifier", library)
    signature = _encode(r_y, False) + s.to_bytes(32, "little")
    assert key.verify(signature, b"x") is asked
    assert library.asked == int(asked)


# --- JWK, JWKS, PEM, paste box -------------------------------------------------------------------------------


def test_key_id_and_fingerprints(test1_key: PrivateKey) -> None:
    key = test1_key.public_key
    digest = hashlib.sha256(key.raw).hexdigest()
    assert key.fingerprint == digest and re.fullmatch(r"[0-9a-f]{64}", digest)
    assert key.key_id == "ed25519-" + digest[:16]
    groups = key.fingerprint_grouped.split(" ")
    assert len(groups) == 16 and all(len(g) == 4 for g in groups) and "".join(groups) == digest
    assert repr(key) == f"PublicKey(key_id={key.key_id!r})"


def test_public_key_copies_and_pickles(test1_key: PrivateKey) -> None:
    key = test1_key.public_key
    assert copy.deepcopy(key) == key
    restored = pickle.loads(pickle.dumps(key))  # noqa: S301 - our own bytes
    assert restored == key and hash(restored) == hash(key)
    assert restored.verify(test1_key.sign(b"m"), b"m")


def test_to_jwk_round_trip(test1_key: PrivateKey) -> None:
    key = test1_key.public_key
    jwk = key.to_jwk()
    assert jwk == {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
        "kid": key.key_id,
        "use": "sig",
        "alg": "EdDSA",
    }
    assert PublicKey.from_jwk(jwk) == key
    assert PublicKey.from_text(json.dumps(jwk, indent=2)) == key


def test_kid_that_does_not_match_x_is_refused(test1_key: PrivateKey) -> None:
    other = PrivateKey.from_seed(bytes(range(32))).public_key
    jwk = test1_key.public_key.to_jwk()
    assert _refused(PublicKey.from_jwk, {**jwk, "kid": other.key_id}) is Reason.KID_MISMATCH
    assert _refused(PublicKey.from_jwk, {**jwk, "kid": jwk["kid"].upper()}) is Reason.KID_MISMATCH
    assert _refused(PublicKey.from_jwk, {**jwk, "kid": None}) is Reason.KID_MISMATCH
    assert _refused(PublicKey.from_jwk, {**other.to_jwk(), "kid": jwk["kid"]}) is Reason.KID_MISMATCH


@pytest.mark.parametrize(
    "change",
    [
        {"kty": "EC"},
        {"kty": None},
        {"crv": "Ed448"},
        {"crv": "X25519"},
        {"x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo="},  # padded
        {"x": "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo"},  # standard alphabet
        {"x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURp"},  # non-zero trailing bits: not canonical base64url
        {"x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHUQ"},  # 31 bytes
        {"x": 12},
        {"alg": "ES256"},
        {"alg": None},
        {"use": "enc"},
        {"d": "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"},
    ],
)
def test_malformed_jwk(change: dict[str, Any]) -> None:
    jwk: dict[str, Any] = {"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
    assert PublicKey.from_jwk(jwk).x == jwk["x"]  # the unchanged JWK is fine
    assert _refused(PublicKey.from_jwk, {**jwk, **change}) is Reason.MALFORMED_KEY


def test_jwk_missing_members_and_non_mappings() -> None:
    assert _refused(PublicKey.from_jwk, {"kty": "OKP", "crv": "Ed25519"}) is Reason.MALFORMED_KEY
    assert _refused(PublicKey.from_jwk, {"crv": "Ed25519", "x": "AA"}) is Reason.MALFORMED_KEY
    assert _refused(PublicKey.from_jwk, ["OKP"]) is Reason.MALFORMED_KEY
    assert _refused(PublicKey.from_jwk, "{}") is Reason.MALFORMED_KEY


def test_pem_round_trip_and_refusals(test1_key: PrivateKey) -> None:
    key = test1_key.public_key
    pem = key.to_pem()
    assert pem.startswith("-----BEGIN PUBLIC KEY-----\n")
    assert PublicKey.from_pem(pem) == key
    assert PublicKey.from_pem(pem.encode("ascii")) == key
    assert PublicKey.from_pem("\n  " + pem.replace("\n", "\r\n") + "  \n") == key
    assert PublicKey.from_text(pem) == key
    ec_pem = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    body = base64.b64encode(SPKI_PREFIX + key.raw + b"\x00").decode("ascii")
    for bad in (
        ec_pem,  # another algorithm
        test1_key.to_pem(),  # a private key
        pem + pem,  # two blocks
        pem.replace("MCowBQYDK2Vw", "MCowBQYDK2Vx"),  # another OID
        "-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----",
        f"-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----",  # trailing DER bytes
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----",
        "",
        "pém",
        b"\xff\xfe",
    ):
        assert _refused(PublicKey.from_pem, bad) is Reason.MALFORMED_KEY, bad


def test_from_text_refusals(test1_key: PrivateKey) -> None:
    x = test1_key.public_key.x
    assert _refused(PublicKey.from_text, '{"kty":"OKP","crv":"Ed25519","x":"' + x + '","x":"' + x + '"}') is (
        Reason.MALFORMED_KEY  # duplicate members: the strict parser refuses, the paste box says malformed
    )
    assert _refused(PublicKey.from_text, json.dumps({"keys": [test1_key.public_key.to_jwk()]})) is Reason.MALFORMED_KEY
    assert _refused(PublicKey.from_text, test1_key.public_key.fingerprint) is Reason.MALFORMED_KEY
    assert _refused(PublicKey.from_text, "{not json") is Reason.MALFORMED_KEY
    assert _refused(PublicKey.from_text, "") is Reason.MALFORMED_KEY
    assert _refused(PublicKey.from_text, b"{}") is Reason.MALFORMED_KEY


def test_load_jwks(test1_key: PrivateKey) -> None:
    first = test1_key.public_key
    second = PrivateKey.from_seed(bytes(range(32))).public_key
    assert load_jwks({"keys": [first.to_jwk(), second.to_jwk()]}) == [first, second]
    assert load_jwks({"keys": []}) == []
    assert _refused(load_jwks, {"keys": [first.to_jwk(), first.to_jwk()]}) is Reason.MALFORMED_KEY
    assert _refused(load_jwks, {"keys": {"a": first.to_jwk()}}) is Reason.MALFORMED_KEY
    assert _refused(load_jwks, {}) is Reason.MALFORMED_KEY
    assert _refused(load_jwks, [first.to_jwk()]) is Reason.MALFORMED_KEY
    assert _refused(load_jwks, {"keys": ["not a jwk"]}) is Reason.MALFORMED_KEY
    bad_kid = {**second.to_jwk(), "kid": first.key_id}
    assert _refused(load_jwks, {"keys": [first.to_jwk(), bad_kid]}) is Reason.KID_MISMATCH


# --- fingerprints typed by an admin --------------------------------------------------------------------------


def test_fingerprint_matches_every_accepted_form(test1_key: PrivateKey) -> None:
    key = test1_key.public_key
    thumb = key.thumbprint()
    for typed in (
        key.fingerprint,
        key.fingerprint.upper(),
        key.fingerprint_grouped,
        key.fingerprint_grouped.upper(),
        ":".join(key.fingerprint[i : i + 2] for i in range(0, 64, 2)),
        f"  {key.fingerprint_grouped}\n",
        thumb,
        thumb + "=",
        f" {thumb} ",
    ):
        assert fingerprint_matches(key, typed), typed


def test_fingerprint_one_character_change_is_refused(test1_key: PrivateKey) -> None:
    key = test1_key.public_key
    thumb = key.thumbprint()
    for text in (key.fingerprint, thumb):
        for position in (0, len(text) // 2, len(text) - 1):
            original = text[position]
            replacement = "0" if original != "0" else "1"
            changed = text[:position] + replacement + text[position + 1 :]
            assert not fingerprint_matches(key, changed), (text, position)
    other = PrivateKey.from_seed(bytes(range(32))).public_key
    assert not fingerprint_matches(key, other.fingerprint)
    assert not fingerprint_matches(key, other.thumbprint())
    assert not fingerprint_matches(key, thumb.swapcase())  # base64url is case-sensitive
    assert not fingerprint_matches(key, key.fingerprint[:63])
    assert not fingerprint_matches(key, key.key_id)
    assert not fingerprint_matches(key, "")
    assert not fingerprint_matches(key, None)  # type: ignore[arg-type]


def test_normalize_fingerprint(test1_key: PrivateKey) -> None:
    key = test1_key.public_key
    assert normalize_fingerprint(key.fingerprint_grouped.upper()) == key.fingerprint
    assert normalize_fingerprint(key.thumbprint() + "=") == key.thumbprint()
    for garbage in ("", "hello", "zz" * 32, key.fingerprint + "0", key.thumbprint() + "==", key.thumbprint()[:-1]):
        assert _refused(normalize_fingerprint, garbage) is Reason.FINGERPRINT_MISMATCH


# --- private keys --------------------------------------------------------------------------------------------


def test_private_key_round_trips_and_hides_its_seed(test1_key: PrivateKey) -> None:
    assert test1_key.seed == RFC8032_TEST1_SEED
    assert RFC8032_TEST1_SEED.hex() not in repr(test1_key)
    assert repr(test1_key) == f"PrivateKey(key_id={test1_key.public_key.key_id!r})"
    pem = test1_key.to_pem()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----\n")
    assert PrivateKey.from_pem(pem).seed == RFC8032_TEST1_SEED
    assert PrivateKey.from_pem(pem.decode("ascii")).public_key == test1_key.public_key


def test_generate_gives_distinct_working_keys() -> None:
    one, two = PrivateKey.generate(), PrivateKey.generate()
    assert one.seed != two.seed and len(one.seed) == 32
    assert one.public_key.verify(one.sign(b"hello"), b"hello")
    assert not two.public_key.verify(one.sign(b"hello"), b"hello")


def test_private_key_refusals(test1_key: PrivateKey) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    encrypted = Ed25519PrivateKey.from_private_bytes(RFC8032_TEST1_SEED).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    ec_pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    for bad in (encrypted, ec_pem, test1_key.public_key.to_pem(), b"", "garbage"):
        assert _refused(PrivateKey.from_pem, bad) is Reason.MALFORMED_KEY
    for seed in (b"", bytes(31), bytes(33), "00" * 32):
        assert _refused(PrivateKey.from_seed, seed) is Reason.MALFORMED_KEY


# --- detached evidence signatures (T1) -----------------------------------------------------------------------


def test_evidence_signature_round_trip_and_domain(test1_key: PrivateKey) -> None:
    key = test1_key.public_key
    digest = sha256_digest(b"collector output")
    signature = sign_evidence_digest(test1_key, digest)
    assert signature == test1_key.sign((EVIDENCE_SIGNATURE_DOMAIN + digest).encode("utf-8"))
    assert verify_evidence_signature(key, digest, signature)
    assert not verify_evidence_signature(key, sha256_digest(b"other bytes"), signature)
    assert not verify_evidence_signature(PrivateKey.from_seed(bytes(range(32))).public_key, digest, signature)
    # A signature made for another purpose does not count as an evidence signature.
    assert not verify_evidence_signature(key, digest, test1_key.sign(digest.encode("utf-8")))
    proof_domain_sig = test1_key.sign(("acretix-verify/proof-sig/2:" + digest).encode("utf-8"))
    assert not verify_evidence_signature(key, digest, proof_domain_sig)
    assert EVIDENCE_SIGNATURE_DOMAIN == "acretix-verify/evidence-sig/1:"


def test_evidence_digest_must_be_well_formed(test1_key: PrivateKey) -> None:
    digest = sha256_digest(b"x")
    signature = sign_evidence_digest(test1_key, digest)
    assert not verify_evidence_signature(test1_key.public_key, digest.upper(), signature)
    assert not verify_evidence_signature(test1_key.public_key, digest[len("sha256:") :], signature)
    with pytest.raises(InvariantError) as info:
        sign_evidence_digest(test1_key, "sha256:xyz")
    assert info.value.reason is Reason.MALFORMED_RECORD
