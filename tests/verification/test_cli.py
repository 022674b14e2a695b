"""``manage.py export_proof`` and ``manage.py verify_proof`` (SPEC §7): exit codes and the last line on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.conftest import DATABASE_VARIABLES
from tests.verification.conftest import REPO_ROOT
from verification.kernel.keys import PrivateKey
from verification.trust.selectors import jwks_document

# The identity point: one of the 14 small-order encodings.
SMALL_ORDER_JWK = '{"kty":"OKP","crv":"Ed25519","x":"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}'

#: What a subprocess must not inherit from this run (the CI pass sets them).
_INHERITED_NOT = (*DATABASE_VARIABLES, "DJANGO_SETTINGS_MODULE")


@pytest.fixture
def exported(chain: tuple[Any, list[Any]], tmp_path: Path) -> dict[str, Any]:
    """A real proof exported to a file, the portal's JWKS beside it, and what export_proof printed."""
    verification, receipts = chain
    proof_path = tmp_path / "proof.json"
    err = StringIO()
    call_command("export_proof", str(verification.id), out=str(proof_path), stderr=err)
    keys_path = tmp_path / "keys.json"
    keys_path.write_text(json.dumps(jwks_document()))
    lines = err.getvalue().splitlines()
    printed = dict(line.split(": ", 1) for line in lines if line.startswith(("head", "verif", "sub")))
    return {
        "verification": verification,
        "receipts": receipts,
        "proof": proof_path,
        "keys": keys_path,
        "printed": printed,
        "tmp": tmp_path,
    }


def verify(ex: dict[str, Any], *extra: str, proof: Path | None = None, keys: Path | None = None,
           head: str | None = "default", **overrides: str) -> tuple[int, str, str]:
    """Run verify_proof in-process; (exit code, stdout, stderr)."""
    args = [str(proof or ex["proof"]), "--keys", str(keys or ex["keys"])]
    if head == "default":
        head = ex["printed"]["head"]
    if head is not None:
        args += ["--head", head]
    args += ["--verification-id", overrides.get("verification_id", ex["printed"]["verification-id"])]
    args += ["--submission-hash", overrides.get("submission_hash", ex["printed"]["submission-hash"])]
    out, err = StringIO(), StringIO()
    try:
        call_command("verify_proof", *args, *extra, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def rewrite(ex: dict[str, Any], name: str, change: Any) -> Path:
    proof = json.loads(ex["proof"].read_text())
    change(proof)
    path: Path = ex["tmp"] / name
    path.write_text(json.dumps(proof))
    return path


def test_export_prints_what_verify_needs(exported: dict[str, Any]) -> None:
    verification, receipts = exported["verification"], exported["receipts"]
    assert exported["printed"] == {
        "head": receipts[-1].content_hash,
        "verification-id": str(verification.id),
        "submission-hash": verification.submission_hash,
    }
    proof = json.loads(exported["proof"].read_text())
    assert [e["content_hash"] for e in proof["entries"]] == [r.content_hash for r in receipts]


def test_export_to_stdout_and_unknown_ids(chain: tuple[Any, list[Any]]) -> None:
    verification, _ = chain
    out = StringIO()
    call_command("export_proof", str(verification.id), stdout=out, stderr=StringIO())
    assert json.loads(out.getvalue())["verification_id"] == str(verification.id)
    with pytest.raises(CommandError, match="not-found"):
        call_command("export_proof", "00000000-0000-4000-8000-000000000000", stderr=StringIO())


def test_a_real_proof_verifies(exported: dict[str, Any]) -> None:
    assert verify(exported) == (0, "ok\n", "")


def test_pins_accept_the_fingerprint_or_the_thumbprint(exported: dict[str, Any], signing_key: Any) -> None:
    public = signing_key.public
    assert verify(exported, "--pin", public.fingerprint_grouped)[0] == 0
    # --pin=VALUE: a thumbprint is base64url, and 1 in 64 begin with "-", which argparse would read as an option
    assert verify(exported, f"--pin={public.thumbprint()}")[0] == 0
    assert verify(exported, f"--pin={public.fingerprint_grouped}")[0] == 0


def test_reversed_entries_still_verify(exported: dict[str, Any]) -> None:
    path = rewrite(exported, "reversed.json", lambda p: p["entries"].reverse())
    assert verify(exported, proof=path)[0] == 0


def _flip(entry: dict[str, Any]) -> None:
    entry["envelope"] = entry["envelope"].replace('"seq":1', '"seq":7')


@pytest.mark.parametrize(
    ("name", "change", "code"),
    [
        ("flipped", lambda p: _flip(p["entries"][1]), "content-hash-mismatch"),
        ("dropped-first", lambda p: p["entries"].pop(0), "non-contiguous-seq"),
        ("dropped-last", lambda p: p["entries"].pop(), "terminal-head-mismatch"),
        ("bad-signature", lambda p: p["entries"][0].update(signature="!!"), "malformed-proof"),
        ("empty", lambda p: p.update(entries=[]), "empty-proof"),
        ("side-channel", lambda p: p["entries"][2].update(key_id="ed25519-0000000000000000"), "envelope-mismatch"),
    ],
)
def test_tampered_proofs_fail_with_their_code(exported: dict[str, Any], name: str, change: Any, code: str) -> None:
    status, out, err = verify(exported, proof=rewrite(exported, f"{name}.json", change))
    assert status == 1 and out == ""
    assert last_line(err) == code


def test_the_head_and_the_subject_come_from_the_caller(exported: dict[str, Any]) -> None:
    assert last_line(verify(exported, head=None)[2]) == "missing-trusted-head"
    assert last_line(verify(exported, head="0" * 64)[2]) == "terminal-head-mismatch"
    assert last_line(verify(exported, submission_hash="9" * 64)[2]) == "subject-mismatch"
    assert last_line(verify(exported, verification_id="00000000-0000-4000-8000-000000000000")[2]) == "subject-mismatch"
    # A head planted in the proof is never trusted: dropping the last entry and naming the new last one as the
    # proof's head still fails against the caller's head.
    def truncate(proof: dict[str, Any]) -> None:
        proof["entries"].pop()
        proof["proof_head_hash"] = proof["entries"][-1]["content_hash"]

    truncated = rewrite(exported, "truncated.json", truncate)
    assert last_line(verify(exported, proof=truncated)[2]) == "terminal-head-mismatch"
    planted = rewrite(exported, "planted.json", lambda p: p.update(proof_head_hash="0" * 64))
    assert last_line(verify(exported, proof=planted)[2]) == "terminal-head-mismatch"


def test_keys_come_only_from_the_key_set_and_the_pins(exported: dict[str, Any], signing_key: Any) -> None:
    other = PrivateKey.from_seed(bytes(32)).public_key
    both = exported["tmp"] / "both.json"
    both.write_text(json.dumps({"keys": [signing_key.public.to_jwk(), other.to_jwk()]}))
    assert verify(exported, keys=both)[0] == 0
    # Pinning only the other key (its right fingerprint) leaves the signer untrusted.
    assert last_line(verify(exported, "--pin", other.fingerprint, keys=both)[2]) == "unknown-key"
    only_other = exported["tmp"] / "other.json"
    only_other.write_text(json.dumps({"keys": [other.to_jwk()]}))
    assert last_line(verify(exported, keys=only_other)[2]) == "unknown-key"
    assert last_line(verify(exported, "--revoked", signing_key.key_id)[2]) == "revoked-key"


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("not json", "malformed-key"),
        ('{"keys": [{"kty": "RSA"}]}', "malformed-key"),
        (f'{{"keys": [{SMALL_ORDER_JWK}]}}', "small-order-key"),
        ('{"keys": [], "keys": []}', "malformed-key"),
    ],
)
def test_malformed_key_sets_are_refused_without_a_traceback(exported: dict[str, Any], content: str, code: str) -> None:
    path = exported["tmp"] / "bad-keys.json"
    path.write_text(content)
    status, _, err = verify(exported, keys=path)
    assert status == 1 and last_line(err) == code and "Traceback" not in err


@pytest.mark.parametrize("content", [b"not json", b'{"entries": 3}', b"\xff\xfe", b'{"a":1,"a":2}', b"[" * 100_000])
def test_malformed_proof_files_are_refused_without_a_traceback(exported: dict[str, Any], content: bytes) -> None:
    path = exported["tmp"] / "bad-proof.json"
    path.write_bytes(content)
    status, _, err = verify(exported, proof=path)
    assert status == 1 and last_line(err) == "malformed-proof" and "Traceback" not in err


def test_unreadable_files(exported: dict[str, Any]) -> None:
    assert last_line(verify(exported, proof=exported["tmp"] / "missing.json")[2]) == "malformed-proof"
    assert last_line(verify(exported, keys=exported["tmp"] / "missing.json")[2]) == "malformed-key"


def test_a_malformed_pin_is_refused(exported: dict[str, Any]) -> None:
    status, _, err = verify(exported, "--pin", "not-a-fingerprint")
    assert status == 1 and last_line(err) == "fingerprint-mismatch"


def test_json_report(exported: dict[str, Any]) -> None:
    status, out, _ = verify(exported, "--json")
    report = json.loads(out)
    assert status == 0 and report["ok"] is True and report["reason"] is None
    assert [s["name"] for s in report["steps"]] == [
        "well-formed", "contiguous-seq", "content-hash", "supported-format", "side-channel", "signature", "chain",
        "terminal-head", "subject",
    ]
    assert all(s["status"] == "passed" for s in report["steps"])
    assert [e["status"] for e in report["entries"]] == ["passed"] * 3
    status, out, err = verify(exported, "--json", head="0" * 64)
    report = json.loads(out)
    assert status == 1 and report["reason"] == "terminal-head-mismatch" and report["failed_step"] == 7
    assert last_line(err) == "terminal-head-mismatch"


@pytest.mark.slow
def test_the_command_line_itself(exported: dict[str, Any]) -> None:
    """The real process: exit status and the last line of stderr, needing no database."""
    env = {k: v for k, v in os.environ.items() if k not in _INHERITED_NOT}
    env["DJANGO_SETTINGS_MODULE"] = "reviewportal.settings_test"
    env["REVIEWPORTAL_VAR_DIR"] = str(exported["tmp"] / "var")
    env["DATABASE_URL"] = "postgres://nobody@127.0.0.1:1/none"  # proves it never touches the database
    base = [sys.executable, "manage.py", "verify_proof", str(exported["proof"]), "--keys", str(exported["keys"]),
            "--verification-id", exported["printed"]["verification-id"],
            "--submission-hash", exported["printed"]["submission-hash"]]

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *extra], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60,
                              check=False)

    good = run("--head", exported["printed"]["head"])
    assert (good.returncode, good.stdout, good.stderr) == (0, "ok\n", "")
    bad = run("--head", "f" * 64)
    assert bad.returncode == 1 and last_line(bad.stderr) == "terminal-head-mismatch"
