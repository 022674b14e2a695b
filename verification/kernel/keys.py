"""Ed25519 keys where they enter and leave the kernel (SPEC §7 "Hardening", §8).

``cryptography`` (OpenSSL) loads any 32 bytes as an Ed25519 public key, including the identity point, under
which the signature ``R = identity, S = 0`` verifies for every message. So every public key is checked here,
in ``PublicKey.__post_init__``, before the library ever sees it; every way in (raw bytes, JWK, JWKS, PEM, the
admin's paste box) goes through that one constructor.

Order of the key checks, and so which code a key gets (documented, tested):

1. not 32 bytes → ``malformed-key``;
2. the encoding, read leniently (y reduced mod p, "x = −0" tolerated), is a point P with [8]P = identity
   → ``small-order-key``. Small order wins: all 14 small-order encodings of the CCTV list, including the six
   non-canonical ones (y ≥ p, x = −0), are refused as ``small-order-key``;
3. y ≥ p = 2^255 − 19, or the sign bit set on x = 0 → ``non-canonical-key`` (whether or not it is on the curve);
4. y is not the y of any curve point → ``malformed-key``.

Keys with a small-order *component* but of large order (CCTV ``low_order_component_A``) are accepted: a
blocklist cannot see them, honest keys never have one, and SPEC §7 asks for the 14 encodings and y ≥ p.

Signatures (``PublicKey.verify``): not 64 bytes, R with y ≥ p, or S ≥ L are false before the library is
asked; the library's cofactorless check decides the rest. ``verify`` never raises.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from verification.kernel.canonical import canonicalize, loads_strict
from verification.kernel.digests import is_digest
from verification.kernel.errors import InvariantError, KeyRefused, StrictJSONError
from verification.kernel.reasons import Reason

KEY_ID_PREFIX: Final = "ed25519-"
EVIDENCE_SIGNATURE_DOMAIN: Final = "acretix-verify/evidence-sig/1:"  # T1 detached signatures (SPEC §4)

# --- edwards25519, just enough to classify an encoding (RFC 8032 §5.1) ---------------------------------------

_P: Final = 2**255 - 19
_D: Final = -121665 * pow(121666, -1, _P) % _P
_SQRT_M1: Final = pow(2, (_P - 1) // 4, _P)
_L: Final = 2**252 + 27742317777372353535851937790883648493  # order of the prime-order subgroup
_Y_MASK: Final = (1 << 255) - 1
_IDENTITY: Final = (0, 1)

_Point = tuple[int, int]


def _recover_x(y: int, sign: int) -> int | None:
    """The x with the given sign bit for which (x, y) is on the curve, or None (RFC 8032 §5.1.3 steps 2–4).

    ``y`` must be reduced. When x = 0 the sign bit is ignored (the caller decides about "x = −0").
    """
    u = (y * y - 1) % _P
    v = (_D * y * y + 1) % _P  # never 0: −1/d is not a square mod p
    x2 = u * pow(v, -1, _P) % _P
    if x2 == 0:
        return 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P != 0:
        return None
    return _P - x if (x & 1) != sign else x


def _add(a: _Point, b: _Point) -> _Point:
    """Affine addition on −x² + y² = 1 + d·x²·y² (complete: d is not a square)."""
    (x1, y1), (x2, y2) = a, b
    t = _D * x1 * x2 * y1 * y2 % _P
    x3 = (x1 * y2 + x2 * y1) * pow(1 + t, -1, _P) % _P
    y3 = (y1 * y2 + x1 * x2) * pow(1 - t, -1, _P) % _P
    return x3, y3


def _has_small_order(point: _Point) -> bool:
    """[8]P is the identity: P is one of the eight points of order 1, 2, 4 or 8."""
    for _ in range(3):
        point = _add(point, point)
    return point == _IDENTITY


def _key_refusal(raw: bytes) -> tuple[Reason, str] | None:
    """Why these 32 bytes are not acceptable as a public key, or None (see the module docstring for the order)."""
    if len(raw) != 32:
        return Reason.MALFORMED_KEY, f"an Ed25519 public key is 32 bytes, not {len(raw)}"
    encoded = int.from_bytes(raw, "little")
    y, sign = encoded & _Y_MASK, encoded >> 255
    x = _recover_x(y % _P, sign)
    if x is not None and _has_small_order((x, y % _P)):
        return Reason.SMALL_ORDER_KEY, "the key decodes to a point of small order"
    if y >= _P:
        return Reason.NON_CANONICAL_KEY, "the key's y coordinate is not reduced modulo p"
    if x == 0 and sign == 1:  # pragma: no cover - only y = ±1 give x = 0, and both are small order (step 2)
        return Reason.NON_CANONICAL_KEY, "the key encodes x = -0"
    if x is None:
        return Reason.MALFORMED_KEY, "the key is not the encoding of a curve point"
    return None


def _r_is_canonical(signature: bytes) -> bool:
    return int.from_bytes(signature[:32], "little") & _Y_MASK < _P


# --- encodings -----------------------------------------------------------------------------------------------

_B64URL_RE: Final = re.compile(r"[A-Za-z0-9_-]*")
_HEX64_RE: Final = re.compile(r"[0-9A-Fa-f]{64}")
_FINGERPRINT_IGNORED_RE: Final = re.compile(r"[\s:]+")
_SPKI_ED25519_PREFIX: Final = bytes.fromhex("302a300506032b6570032100")  # DER is unique: prefix + 32 bytes
_PEM_PUBLIC_RE: Final = re.compile(
    r"-----BEGIN PUBLIC KEY-----\s*([A-Za-z0-9+/=\s]+?)\s*-----END PUBLIC KEY-----", re.ASCII
)


def b64url_encode(data: bytes) -> str:
    """Base64url without padding (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode_strict(text: str) -> bytes | None:
    """Decode base64url without padding; None unless ``text`` is exactly the canonical encoding of its bytes."""
    if not isinstance(text, str) or not _B64URL_RE.fullmatch(text) or len(text) % 4 == 1:
        return None
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return data if b64url_encode(data) == text else None


def _as_ascii(data: str | bytes, what: str) -> str:
    """PEM is ASCII armour: anything else is refused as a malformed key, whether given as text or bytes."""
    try:
        if isinstance(data, str):
            data.encode("ascii")
            return data
        if isinstance(data, (bytes, bytearray, memoryview)):
            return bytes(data).decode("ascii")
    except UnicodeError:
        raise KeyRefused(Reason.MALFORMED_KEY, f"{what} is not ASCII") from None
    raise KeyRefused(Reason.MALFORMED_KEY, f"{what} must be text or bytes")


# --- public keys ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PublicKey:
    """A checked Ed25519 public key (32 raw bytes). Build it with ``from_raw``/``from_jwk``/``from_pem``/``from_text``.

    Every constructor ends in ``__post_init__``, which refuses malformed, small-order and non-canonical keys.
    """

    raw: bytes
    _verifier: Ed25519PublicKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.raw, bytes):
            raise KeyRefused(Reason.MALFORMED_KEY, "the raw key must be bytes")
        refusal = _key_refusal(self.raw)
        if refusal is not None:
            raise KeyRefused(refusal[0], refusal[1])
        try:
            verifier = Ed25519PublicKey.from_public_bytes(self.raw)
        except (ValueError, UnsupportedAlgorithm) as exc:  # pragma: no cover - OpenSSL takes any 32 bytes
            raise KeyRefused(Reason.MALFORMED_KEY, str(exc)) from None
        object.__setattr__(self, "_verifier", verifier)

    def __repr__(self) -> str:
        return f"PublicKey(key_id={self.key_id!r})"

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        # copy/pickle rebuild through the checks; the library object itself does not pickle.
        return (PublicKey.from_raw, (self.raw,))

    # -- constructors --

    @classmethod
    def from_raw(cls, raw: bytes) -> PublicKey:
        """The key for these 32 bytes; ``KeyRefused`` (malformed / small-order / non-canonical) otherwise."""
        if not isinstance(raw, (bytes, bytearray, memoryview)):
            raise KeyRefused(Reason.MALFORMED_KEY, "the raw key must be bytes")
        return cls(bytes(raw))

    @classmethod
    def from_jwk(cls, jwk: Mapping[str, Any]) -> PublicKey:
        """Import a public OKP/Ed25519 JWK (RFC 8037). A ``kid`` that is not our key id → ``kid-mismatch``."""
        if not isinstance(jwk, Mapping):
            raise KeyRefused(Reason.MALFORMED_KEY, "a JWK is a JSON object")
        if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            raise KeyRefused(Reason.MALFORMED_KEY, "the JWK is not kty OKP, crv Ed25519")
        if "d" in jwk:
            raise KeyRefused(Reason.MALFORMED_KEY, "the JWK holds a private key; supply only the public key")
        x = jwk.get("x")
        raw = b64url_decode_strict(x) if isinstance(x, str) else None
        if raw is None or len(raw) != 32:
            raise KeyRefused(Reason.MALFORMED_KEY, "x is not the unpadded base64url of 32 bytes")
        key = cls.from_raw(raw)
        if "alg" in jwk and jwk["alg"] != "EdDSA":
            raise KeyRefused(Reason.MALFORMED_KEY, "alg, when present, must be EdDSA")
        if "use" in jwk and jwk["use"] != "sig":
            raise KeyRefused(Reason.MALFORMED_KEY, "use, when present, must be sig")
        if "kid" in jwk and jwk["kid"] != key.key_id:
            raise KeyRefused(Reason.KID_MISMATCH, f"kid {jwk['kid']!r} is not {key.key_id!r}, derived from x")
        return key

    @classmethod
    def from_pem(cls, text: str | bytes) -> PublicKey:
        """Import a SubjectPublicKeyInfo PEM (``BEGIN PUBLIC KEY``) holding an Ed25519 key."""
        data = _as_ascii(text, "the PEM")
        if "PRIVATE KEY-----" in data:
            raise KeyRefused(Reason.MALFORMED_KEY, "this is a private key; supply only the public key")
        match = _PEM_PUBLIC_RE.fullmatch(data.strip())
        if match is None:
            raise KeyRefused(Reason.MALFORMED_KEY, "not a single PEM block of type PUBLIC KEY")
        try:
            der = base64.b64decode(re.sub(r"\s+", "", match.group(1)), validate=True)
        except ValueError:
            raise KeyRefused(Reason.MALFORMED_KEY, "the PEM body is not base64") from None
        if len(der) != len(_SPKI_ED25519_PREFIX) + 32 or not der.startswith(_SPKI_ED25519_PREFIX):
            raise KeyRefused(Reason.MALFORMED_KEY, "not an Ed25519 SubjectPublicKeyInfo")
        return cls.from_raw(der[len(_SPKI_ED25519_PREFIX) :])

    @classmethod
    def from_text(cls, text: str) -> PublicKey:
        """What an admin pastes: a JWK JSON object or a PEM public key (SPEC §8 pinning)."""
        if not isinstance(text, str):
            raise KeyRefused(Reason.MALFORMED_KEY, "expected text")
        stripped = text.strip()
        if stripped.startswith("{"):
            try:
                doc = loads_strict(stripped)
            except StrictJSONError as exc:
                raise KeyRefused(Reason.MALFORMED_KEY, f"the JWK is not strict JSON ({exc.reason.value})") from None
            if isinstance(doc, dict) and "keys" in doc and "kty" not in doc:
                raise KeyRefused(Reason.MALFORMED_KEY, "this is a key set; paste a single key")
            return cls.from_jwk(doc)
        if stripped.startswith("-----BEGIN"):
            return cls.from_pem(stripped)
        raise KeyRefused(Reason.MALFORMED_KEY, "paste a JWK (JSON object) or a PEM public key")

    # -- identity --

    @property
    def fingerprint(self) -> str:
        """The full lowercase sha256 hex of the raw key (SPEC §8)."""
        return hashlib.sha256(self.raw).hexdigest()

    @property
    def fingerprint_grouped(self) -> str:
        """The fingerprint in groups of four hex digits, for reading aloud out of band."""
        return group_fingerprint(self.fingerprint)

    @property
    def key_id(self) -> str:
        """``ed25519-`` + the first 16 hex digits of the fingerprint (SPEC §8)."""
        return KEY_ID_PREFIX + self.fingerprint[:16]

    @property
    def x(self) -> str:
        """The JWK ``x`` member: unpadded base64url of the raw key."""
        return b64url_encode(self.raw)

    def to_jwk(self) -> dict[str, str]:
        """The public JWK as the portal's JWKS serves it (SPEC §7)."""
        return {"kty": "OKP", "crv": "Ed25519", "x": self.x, "kid": self.key_id, "use": "sig", "alg": "EdDSA"}

    def thumbprint(self) -> str:
        """RFC 7638 JWK thumbprint: sha256 over the canonical required members, unpadded base64url."""
        return b64url_encode(hashlib.sha256(canonicalize({"crv": "Ed25519", "kty": "OKP", "x": self.x})).digest())

    def to_pem(self) -> str:
        """SubjectPublicKeyInfo PEM."""
        return self._verifier.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode("ascii")

    # -- verification --

    def verify(self, signature: bytes, message: bytes) -> bool:
        """True iff ``signature`` is a valid Ed25519 signature of ``message``; False for anything else, never raises."""
        return self.verified_prefix(((signature, message),)) == 1

    def verified_prefix(self, pairs: Iterable[tuple[object, object]]) -> int:
        """How many of ``pairs`` (signature, message), from the first, are valid Ed25519 signatures under this key:
        the count stops at the first that is not (``verify`` of each, in one loop: a chain's signatures are checked
        as tightly as the bare benchmark checks them). Never raises."""
        verified = 0
        check = self._verifier.verify
        for signature, message in pairs:
            if type(signature) is not bytes or type(message) is not bytes:  # the usual call, bytes, in one test
                if not isinstance(signature, (bytes, bytearray)) or not isinstance(message, (bytes, bytearray)):
                    return verified  # callers pass anything; never raise
                signature, message = bytes(signature), bytes(message)
            if len(signature) != 64:
                return verified
            # RFC 8032 §5.1.7: S < L (malleability) and R's y < p (canonical). The top byte settles each at once (S
            # below 2^252 < L; y below 2^255 - 2^248 < p) for all but about one signature in 2^128 (S) and one in 128
            # (R), which are compared in full.
            if signature[63] >= 0x10 and int.from_bytes(signature[32:], "little") >= _L:
                return verified
            if signature[31] & 0x7F == 0x7F and not _r_is_canonical(signature):
                return verified
            try:
                check(signature, message)
            except InvalidSignature:
                return verified
            except Exception:  # noqa: BLE001 - fail closed: a verifier that cannot decide says no
                return verified
            verified += 1
        return verified


# --- private keys --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PrivateKey:
    """An Ed25519 private key: the 32-byte seed (RFC 8032 §5.1.5). Never printed, never compared by value."""

    seed: bytes = field(repr=False)
    _signer: Ed25519PrivateKey = field(init=False, repr=False)
    _public: PublicKey = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.seed, bytes) or len(self.seed) != 32:
            raise KeyRefused(Reason.MALFORMED_KEY, "an Ed25519 seed is 32 bytes")
        signer = Ed25519PrivateKey.from_private_bytes(self.seed)
        object.__setattr__(self, "_signer", signer)
        object.__setattr__(self, "_public", PublicKey.from_raw(signer.public_key().public_bytes_raw()))

    def __repr__(self) -> str:
        return f"PrivateKey(key_id={self._public.key_id!r})"

    @classmethod
    def generate(cls) -> PrivateKey:
        """A fresh key from the operating system's randomness (via ``cryptography``)."""
        return cls(Ed25519PrivateKey.generate().private_bytes_raw())

    @classmethod
    def from_seed(cls, seed: bytes) -> PrivateKey:
        """The key for a 32-byte seed."""
        if not isinstance(seed, (bytes, bytearray, memoryview)):
            raise KeyRefused(Reason.MALFORMED_KEY, "an Ed25519 seed is 32 bytes")
        return cls(bytes(seed))

    @classmethod
    def from_pem(cls, data: str | bytes) -> PrivateKey:
        """Load an unencrypted PKCS#8 PEM Ed25519 private key."""
        try:
            loaded = serialization.load_pem_private_key(_as_ascii(data, "the PEM").encode("ascii"), password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
            raise KeyRefused(Reason.MALFORMED_KEY, f"not an unencrypted PEM private key ({exc})") from None
        if not isinstance(loaded, Ed25519PrivateKey):
            raise KeyRefused(Reason.MALFORMED_KEY, "not an Ed25519 private key")
        return cls(loaded.private_bytes_raw())

    def to_pem(self) -> bytes:
        """PKCS#8 PEM, unencrypted (the file itself is protected by its mode, SPEC §8)."""
        return self._signer.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    @property
    def public_key(self) -> PublicKey:
        return self._public

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message`` (deterministic, RFC 8032)."""
        return self._signer.sign(bytes(message))


# --- key sets and fingerprints -------------------------------------------------------------------------------


def load_jwks(doc: Mapping[str, Any]) -> list[PublicKey]:
    """The keys of a JWKS document ``{"keys": [...]}``, each through ``PublicKey.from_jwk``; no key id twice."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("keys"), (list, tuple)):
        raise KeyRefused(Reason.MALFORMED_KEY, 'a JWKS is an object with a "keys" array')
    keys: list[PublicKey] = []
    seen: set[str] = set()
    for entry in doc["keys"]:
        key = PublicKey.from_jwk(entry)
        if key.key_id in seen:
            raise KeyRefused(Reason.MALFORMED_KEY, f"key {key.key_id} appears twice in the key set")
        seen.add(key.key_id)
        keys.append(key)
    return keys


def normalize_fingerprint(typed: str) -> str:
    """Normalize what an admin typed to compare with a key (SPEC §8).

    A sha256 hex fingerprint (any case; spaces and colons ignored) → 64 lowercase hex digits. An RFC 7638
    thumbprint (base64url, one ``=`` of padding tolerated) → its unpadded base64url. Anything else is refused
    with ``fingerprint-mismatch``.
    """
    if not isinstance(typed, str):
        raise KeyRefused(Reason.FINGERPRINT_MISMATCH, "the fingerprint must be text")
    cleaned = _FINGERPRINT_IGNORED_RE.sub("", typed)
    if _HEX64_RE.fullmatch(cleaned):
        return cleaned.lower()
    unpadded = cleaned.removesuffix("=")
    decoded = b64url_decode_strict(unpadded)
    if decoded is not None and len(decoded) == 32:
        return unpadded
    raise KeyRefused(Reason.FINGERPRINT_MISMATCH, "neither a sha256 hex fingerprint nor an RFC 7638 thumbprint")


def fingerprint_matches(key: PublicKey, typed: str) -> bool:
    """True iff ``typed`` is this key's fingerprint or thumbprint (compared in constant time)."""
    try:
        normalized = normalize_fingerprint(typed).encode("ascii")
    except KeyRefused:
        return False
    by_fingerprint = hmac.compare_digest(normalized, key.fingerprint.encode("ascii"))
    by_thumbprint = hmac.compare_digest(normalized, key.thumbprint().encode("ascii"))
    return by_fingerprint | by_thumbprint


# --- detached evidence signatures (trust tier T1, SPEC §4) ---------------------------------------------------


def _evidence_message(digest: str) -> bytes:
    return (EVIDENCE_SIGNATURE_DOMAIN + digest).encode("utf-8")


def sign_evidence_digest(key: PrivateKey, digest: str) -> bytes:
    """A source's detached signature over ``EVIDENCE_SIGNATURE_DOMAIN + digest`` (``sha256:<hex>``)."""
    if not is_digest(digest):
        raise InvariantError(Reason.MALFORMED_RECORD, "an evidence signature covers a sha256:<64 hex> digest")
    return key.sign(_evidence_message(digest))


def verify_evidence_signature(key: PublicKey, digest: str, signature: bytes) -> bool:
    """True iff ``signature`` is ``key``'s evidence signature over ``digest``; False for anything else."""
    return is_digest(digest) and key.verify(signature, _evidence_message(digest))


def group_fingerprint(fingerprint: str) -> str:
    """A fingerprint in groups of four hex digits (SPEC §8), for reading aloud out of band."""
    return " ".join(fingerprint[i : i + 4] for i in range(0, len(fingerprint), 4))
