"""``manage.py verify_proof PROOF.json --keys JWKS.json [--pin FP ...] [--revoked KID ...] --head HEX
--verification-id ID --submission-hash HEX [--json]``: strict proof verification offline (SPEC §7).

Every trusted input comes from the arguments, never from the proof (the seed's anti-forgery warning): keys only
from ``--keys``, narrowed to the ``--pin`` fingerprints (sha256 hex or RFC 7638 thumbprint) when any is given;
``--revoked`` marks key ids revoked; the head and the subject come from the caller's own records. Needs no database.

``--bundle BUNDLE.json`` (instead of PROOF.json and ``--keys``) reads a proof bundle ``{"proof", "jwks"}`` as the
history page exports it. Its key set came with the proof, so it is never trusted by itself: a bundle is accepted
only with at least one ``--pin`` (else ``key-not-pinned``), and the head still comes from ``--head``.

Exit 0 and ``ok`` when the proof verifies. Otherwise exit 1 with the reason code as the last line on stderr (also
for unreadable or malformed files: ``malformed-proof``, ``malformed-key``; never a traceback). ``--json`` prints the
step report as JSON on stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandParser

from verification.kernel.canonical import loads_strict
from verification.kernel.errors import KernelError
from verification.kernel.keys import PublicKey, fingerprint_matches, load_jwks, normalize_fingerprint
from verification.kernel.reasons import Reason, explain
from verification.kernel.verifier import TrustedKey, VerificationReport, verify_proof_bytes


def report_as_json(report: VerificationReport) -> dict[str, Any]:
    """The verifier's report as plain JSON: the result, every step, every entry."""

    def code(reason: Reason | None) -> str | None:
        return None if reason is None else reason.value

    return {
        "ok": report.ok,
        "reason": code(report.reason),
        "failed_step": report.failed_step,
        "failed_seq": report.failed_seq,
        "detail": report.detail,
        "computed_head": report.computed_head,
        "steps": [
            {
                "number": step.number,
                "name": step.name,
                "status": step.status.value,
                "reason": code(step.reason),
                "seq": step.seq,
                "detail": step.detail,
                "entries": [
                    {"seq": e.seq, "index": e.index, "ok": e.ok, "reason": code(e.reason), "detail": e.detail}
                    for e in step.entries
                ],
            }
            for step in report.steps
        ],
        "entries": [
            {
                "seq": view.seq,
                "index": view.index,
                "content_hash": view.content_hash,
                "key_id": view.key_id,
                "status": view.status.value,
                "reason": code(view.reason),
            }
            for view in report.entries
        ],
    }


class _Refused(Exception):
    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _read(path: str, reason: Reason, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise _Refused(reason, f"cannot read the {what} {path}: {exc.strerror}") from None


def trusted_keys_from_args(jwks: bytes, pins: list[str], revoked: list[str]) -> dict[str, TrustedKey]:
    """The trust store the arguments describe: JWKS keys, narrowed to the pins, with revocation marks."""
    try:
        keys = load_jwks(loads_strict(jwks))
    except KernelError as exc:
        # A key set that is not strict JSON is a malformed key set; a refused key keeps its own code.
        reason = exc.reason if exc.reason in {Reason.SMALL_ORDER_KEY, Reason.NON_CANONICAL_KEY,
                                              Reason.KID_MISMATCH} else Reason.MALFORMED_KEY
        raise _Refused(reason, f"the key set: {exc.detail or explain(exc.reason)}") from None
    for pin in pins:
        try:
            normalize_fingerprint(pin)
        except KernelError as exc:
            raise _Refused(exc.reason, f"--pin {pin!r}: {exc.detail}") from None
    chosen: list[PublicKey] = keys
    if pins:
        chosen = [key for key in keys if any(fingerprint_matches(key, pin) for pin in pins)]
    revoked_ids = set(revoked)
    return {key.key_id: TrustedKey(key, revoked=key.key_id in revoked_ids) for key in chosen}


def _read_bundle(options: dict[str, Any]) -> tuple[bytes, bytes]:
    """The proof and key set of a bundle file, as bytes for the strict parsers. Refused without a pin: the bundle's
    key set came with the proof, and a key from the issuer proves nothing (SPEC §12)."""
    if options["proof"] is not None or options["keys"] is not None:
        raise _Refused(Reason.MALFORMED_PROOF, "--bundle replaces PROOF.json and --keys; give one or the other")
    if not options["pin"]:
        raise _Refused(
            Reason.KEY_NOT_PINNED,
            "a bundle's key set is never trusted by itself: pass --pin with the fingerprint you confirmed out of band",
        )
    raw = _read(options["bundle"], Reason.MALFORMED_PROOF, "bundle")
    try:
        bundle = loads_strict(raw)
    except KernelError as exc:
        raise _Refused(Reason.MALFORMED_PROOF, f"the bundle: {exc.detail or explain(exc.reason)}") from None
    if not isinstance(bundle, dict) or not isinstance(bundle.get("proof"), dict) or not isinstance(
        bundle.get("jwks"), dict
    ):
        raise _Refused(Reason.MALFORMED_PROOF, 'a bundle is an object {"proof": {...}, "jwks": {...}}')
    # Re-serialized for the strict parsers; the envelopes inside are strings, so their exact bytes are kept.
    return (
        json.dumps(bundle["proof"], ensure_ascii=False).encode("utf-8"),
        json.dumps(bundle["jwks"], ensure_ascii=False).encode("utf-8"),
    )


class Command(BaseCommand):
    help = "Verify a proof strictly against keys, head and subject given here (never taken from the proof)."
    requires_system_checks: list[str] = []  # offline: needs neither the database nor the portal's state

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("proof", metavar="PROOF.json", nargs="?", default=None)
        parser.add_argument("--keys", default=None, metavar="JWKS.json", help="the key set to trust (a JWKS file)")
        parser.add_argument(
            "--bundle", default=None, metavar="BUNDLE.json",
            help='a proof bundle {"proof", "jwks"} instead of PROOF.json and --keys; needs --pin',
        )
        parser.add_argument(
            "--pin", action="append", default=[], metavar="FINGERPRINT",
            help="trust only keys with this fingerprint (sha256 hex or RFC 7638 thumbprint); repeatable; write "
            "--pin=VALUE when a thumbprint begins with '-' (1 in 64 do)",
        )
        parser.add_argument("--revoked", action="append", default=[], metavar="KID", help="a revoked key id")
        parser.add_argument(
            "--head", default=None, metavar="HEX", help="the trusted head (from the server or your own receipt log)"
        )
        parser.add_argument("--verification-id", required=True, metavar="ID")
        parser.add_argument("--submission-hash", required=True, metavar="HEX")
        parser.add_argument("--json", action="store_true", help="print the step report as JSON on stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["bundle"] is not None:
                proof, jwks = _read_bundle(options)
            else:
                if options["proof"] is None or options["keys"] is None:
                    raise _Refused(Reason.MALFORMED_PROOF, "give PROOF.json and --keys JWKS.json, or --bundle")
                proof = _read(options["proof"], Reason.MALFORMED_PROOF, "proof")
                jwks = _read(options["keys"], Reason.MALFORMED_KEY, "key set")
            keys = trusted_keys_from_args(jwks, options["pin"], options["revoked"])
        except _Refused as refused:
            self._fail(refused.reason, refused.detail)
        report = verify_proof_bytes(
            proof,
            keys=keys,
            trusted_head=options["head"],
            expected_verification_id=options["verification_id"],
            expected_submission_hash=options["submission_hash"],
        )
        if options["json"]:
            self.stdout.write(json.dumps(report_as_json(report), indent=2))
        if report.ok:
            if not options["json"]:
                self.stdout.write("ok")
            return
        reason = report.reason or Reason.MALFORMED_PROOF  # a failed report always names its reason
        where = f"step {report.failed_step}" + (f", seq {report.failed_seq}" if report.failed_seq is not None else "")
        self._fail(reason, f"{where}: {report.detail or explain(reason)}")

    def _fail(self, reason: Reason, detail: str) -> NoReturn:
        self.stderr.write(f"proof refused: {detail}")
        self.stderr.write(reason.value)  # the last line on stderr is the reason code
        self.stderr.flush()
        sys.stdout.flush()
        raise SystemExit(1)
