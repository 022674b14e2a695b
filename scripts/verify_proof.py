#!/usr/bin/env python3
"""Verify an acretix-verify/proof/2 proof with the Python standard library alone: no package to install.

usage: python verify_proof.py FINGERPRINT KEYS.json PROOF.json HEAD VERIFICATION_ID SUBMISSION_HASH
FINGERPRINT: the sha256 hex of the portal's key, as you confirmed it out of band (spaces allowed).
HEAD, VERIFICATION_ID, SUBMISSION_HASH: from your own records, never from the proof.
A proof bundle {"proof", "jwks"} may stand for both KEYS.json and PROOF.json: only the key whose sha256 is
FINGERPRINT is used, so a bundle's key set is never trusted by itself.
Exit 0 and "ok" when the proof verifies; otherwise exit 1 with the reason code as the last line on stderr.

It follows the recipe step by step (the numbered comments) and names the first failure with the same reason codes
as `manage.py verify_proof` (SPEC §7). Ed25519 (RFC 8032 §5.1.7) is written out below in plain Python: slow (a few
milliseconds a signature) but short enough to read, and it needs nothing but hashlib. See docs/proofs.md.
"""
import base64
import hashlib
import json
import sys

# --- Ed25519 signature verification, RFC 8032 §5.1.7, in extended coordinates (§5.1.4) -----------------------
P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493  # the order of the base point
D = -121665 * pow(121666, -1, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)


def _point_add(a, b):
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    pa, pb = (y1 - x1) * (y2 - x2) % P, (y1 + x1) * (y2 + x2) % P
    pc, pd = 2 * t1 * t2 * D % P, 2 * z1 * z2 % P
    e, f, g, h = pb - pa, pd - pc, pd + pc, pb + pa
    return e * f % P, g * h % P, f * g % P, e * h % P


def _scalar_mul(s, point):
    result = (0, 1, 1, 0)  # the neutral element
    while s:
        if s & 1:
            result = _point_add(result, point)
        point = _point_add(point, point)
        s >>= 1
    return result


def _decode_point(data):
    """The point a 32-byte encoding names, or None (RFC 8032 §5.1.3: y below p, x recoverable, no negative zero)."""
    if len(data) != 32:
        return None
    y = int.from_bytes(data, "little")
    sign, y = y >> 255, y & ((1 << 255) - 1)
    if y >= P:
        return None
    x2 = (y * y - 1) * pow(D * y * y + 1, -1, P) % P
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P or (x == 0 and sign):
        return None
    if x & 1 != sign:
        x = P - x
    return x, y, 1, x * y % P


def _encode_point(point):
    x, y, z, _ = point
    zinv = pow(z, -1, P)
    x, y = x * zinv % P, y * zinv % P
    return (y | (x & 1) << 255).to_bytes(32, "little")


BASE = _decode_point((4 * pow(5, -1, P) % P).to_bytes(32, "little"))


def ed25519_verify(public_key, signature, message):
    """True when signature is a valid Ed25519 signature of message under the 32-byte public_key."""
    if len(signature) != 64:
        return False
    point_a, r_bytes = _decode_point(public_key), signature[:32]
    s = int.from_bytes(signature[32:], "little")
    if point_a is None or _decode_point(r_bytes) is None or s >= L:
        return False
    k = int.from_bytes(hashlib.sha512(r_bytes + public_key + message).digest(), "little") % L
    x, y, z, t = _scalar_mul(k, point_a)
    # [S]B - [k]A must encode to exactly R's bytes
    return _encode_point(_point_add(_scalar_mul(s, BASE), (P - x, y, z, P - t))) == r_bytes


# --- the recipe -------------------------------------------------------------------------------------------------
FORMAT, ALGO, DOMAIN = "acretix-verify/proof/2", "ed25519", "acretix-verify/proof-sig/2:"
FIELDS = ("seq", "key_id", "algo", "format", "prev_hash", "content_hash", "signature", "envelope")
SIGNED = ("format", "algo", "key_id", "verification_id", "seq", "rubric_hash", "submission_hash", "prev_hash",
          "payload", "created_at")


def fail(reason):
    sys.exit(f"proof refused\n{reason}")


def read(path, reason):
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        fail(reason)


def strict_json(data, reason):
    def no_duplicates(pairs):
        if len({key for key, _ in pairs}) != len(pairs):
            fail(reason)
        return dict(pairs)

    def no_constants(name):  # NaN, Infinity
        fail(reason)

    try:
        return json.loads(data, object_pairs_hook=no_duplicates, parse_constant=no_constants)
    except (ValueError, RecursionError):
        fail(reason)


def pinned_key(fingerprint, keys_path):
    """The key of the key set whose sha256 is the fingerprint you confirmed; None when there is none."""
    wanted = fingerprint.replace(" ", "").replace(":", "").lower()
    keys = strict_json(read(keys_path, "malformed-key"), "malformed-key")
    if isinstance(keys, dict) and isinstance(keys.get("jwks"), dict):  # a proof bundle
        keys = keys["jwks"]
    if not isinstance(keys, dict) or not isinstance(keys.get("keys"), list):
        fail("malformed-key")
    for jwk in keys["keys"]:
        if not isinstance(jwk, dict) or (jwk.get("kty"), jwk.get("crv")) != ("OKP", "Ed25519"):
            continue
        try:
            raw = base64.urlsafe_b64decode(jwk["x"] + "=" * (-len(jwk["x"]) % 4))
        except (KeyError, TypeError, ValueError):
            continue
        if hashlib.sha256(raw).hexdigest() == wanted:
            return "ed25519-" + wanted[:16], raw
    return None, None


def main(fingerprint, keys_path, proof_path, head, verification_id, submission_hash):
    key_id, key = pinned_key(fingerprint, keys_path)
    # 0: a trusted head; a well-formed, non-empty proof (every field, right types, standard base64 signatures)
    if not head:
        fail("missing-trusted-head")
    proof = strict_json(read(proof_path, "malformed-proof"), "malformed-proof")
    if isinstance(proof, dict) and isinstance(proof.get("proof"), dict):  # a proof bundle
        proof = proof["proof"]
    if not isinstance(proof, dict) or not isinstance(proof.get("entries"), list):
        fail("malformed-proof")
    if not proof["entries"]:
        fail("empty-proof")
    entries = []
    for e in proof["entries"]:
        if not isinstance(e, dict) or any(f not in e for f in FIELDS) or type(e["seq"]) is not int \
                or not all(isinstance(e[f], str) for f in FIELDS[1:4] + FIELDS[5:]) \
                or not isinstance(e["prev_hash"], (str, type(None))):
            fail("malformed-proof")
        try:
            signature = base64.b64decode(e["signature"], validate=True)
            envelope = e["envelope"].encode("utf-8")
        except ValueError:
            fail("malformed-proof")
        if base64.b64encode(signature).decode() != e["signature"]:
            fail("malformed-proof")
        entries.append({"entry": e, "signature": signature, "envelope": envelope})
    # 1: sort by seq; contiguous from 0
    entries.sort(key=lambda w: w["entry"]["seq"])
    if [w["entry"]["seq"] for w in entries] != list(range(len(entries))):
        fail("non-contiguous-seq")
    # 2: sha256 over each exact envelope byte string; the envelope is strict JSON with every signed field
    for w in entries:
        w["hash"] = hashlib.sha256(w["envelope"]).hexdigest()
        if w["hash"] != w["entry"]["content_hash"]:
            fail("content-hash-mismatch")
        w["body"] = strict_json(w["envelope"], "malformed-envelope")
        if not isinstance(w["body"], dict) or any(f not in w["body"] for f in SIGNED):
            fail("malformed-envelope")
    # 3: signed format and algo supported (and the document names the same format)
    for w in entries:
        if w["body"]["format"] != FORMAT:
            fail("unsupported-format")
        if w["body"]["algo"] != ALGO:
            fail("unsupported-algo")
    if (proof.get("format"), proof.get("signing_domain")) != (FORMAT, DOMAIN):
        fail("unsupported-format")
    # 4: the side-channel key_id, algo, format, seq and prev_hash equal the signed body
    for w in entries:
        if any(w["entry"][f] != w["body"][f] for f in ("key_id", "algo", "format", "seq", "prev_hash")):
            fail("envelope-mismatch")
    # 5: signed by the pinned key: Ed25519 over the domain followed by the recomputed content hash
    for w in entries:
        if key is None or w["body"]["key_id"] != key_id:
            fail("unknown-key")
        if not ed25519_verify(key, w["signature"], (DOMAIN + w["hash"]).encode("utf-8")):
            fail("signature-failure")
    # 6: every prev_hash is the previous entry's recomputed content hash
    for i, w in enumerate(entries):
        if w["body"]["prev_hash"] != (entries[i - 1]["hash"] if i else None):
            fail("broken-chain")
    # 7: the final content hash is the head you trust (the proof's own proof_head_hash must agree)
    if entries[-1]["hash"] != head or proof.get("proof_head_hash") != head:
        fail("terminal-head-mismatch")
    # 8: the signed subject is the request you made
    for w in entries:
        if (w["body"]["verification_id"], w["body"]["submission_hash"]) != (verification_id, submission_hash):
            fail("subject-mismatch")
    if proof.get("verification_id") != verification_id:
        fail("subject-mismatch")
    print("ok")


if __name__ == "__main__":
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    main(*sys.argv[1:])
