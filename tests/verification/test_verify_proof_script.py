"""The stand-alone verifier ``scripts/verify_proof.py`` (docs/proofs.md), run as a user runs it, against real proofs.

It runs with ``python -I -S``: isolated, and without site-packages, so nothing but the standard library can be
imported (no ``cryptography``, nothing of this repository). Its Ed25519 is checked against Wycheproof and
RFC 8032 §7.1; its answers against the library verifier, tamper by tamper. The bundle History downloads goes through
it in tests/history/test_exports.py and tests/history/test_bundle_roundtrip.py.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.verification.conftest import REPO_ROOT
from verification.kernel.keys import PrivateKey, PublicKey
from verification.kernel.verifier import TrustedKey, verify_proof_bytes
from verification.trust.selectors import head_of, jwks_document, proof_for

SCRIPT = REPO_ROOT / "scripts" / "verify_proof.py"


def run_verify_proof(args: list[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -I -S scripts/verify_proof.py ARGS``: no environment, no site-packages, only the standard library."""
    return subprocess.run([sys.executable, "-I", "-S", str(SCRIPT), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


def script_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("verify_proof_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def setup(chain: tuple[Any, list[Any]], signing_key: Any, tmp_path: Path) -> dict[str, Any]:
    verification, _ = chain
    keys = tmp_path / "keys.json"
    other = PrivateKey.from_seed(bytes([7]) * 32).public_key
    keys.write_text(json.dumps({"keys": [*jwks_document()["keys"], other.to_jwk()]}))
    head = head_of(verification)
    assert head is not None
    return {
        "keys": keys,
        "proof": proof_for(verification),
        "head": head.content_hash,
        "verification": verification,
        "fingerprint": signing_key.public.fingerprint_grouped,
        "other_fingerprint": other.fingerprint,
        "tmp": tmp_path,
    }


def run_script(s: dict[str, Any], proof: dict[str, Any], *, fingerprint: str | None = None,
               head: str | None = None, submission_hash: str | None = None) -> subprocess.CompletedProcess[str]:
    path = s["tmp"] / "proof.json"
    path.write_text(json.dumps(proof, indent=2), encoding="utf-8")
    args = [
        fingerprint or s["fingerprint"],
        str(s["keys"]),
        str(path),
        s["head"] if head is None else head,
        str(s["verification"].id),
        submission_hash or s["verification"].submission_hash,
    ]
    return run_verify_proof(args, cwd=s["tmp"])


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_the_script_imports_only_the_standard_library() -> None:
    tree = ast.parse(SCRIPT.read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported == {"base64", "hashlib", "json", "sys"}
    assert imported <= sys.stdlib_module_names


def test_its_ed25519_gives_every_wycheproof_result(vectors_dir: Path) -> None:
    doc = json.loads((vectors_dir / "wycheproof" / "ed25519_test.json").read_text(encoding="utf-8"))
    verify = script_module().ed25519_verify
    outcomes = [
        (case["tcId"], verify(bytes.fromhex(group["publicKey"]["pk"]), bytes.fromhex(case["sig"]),
                              bytes.fromhex(case["msg"])), case["result"] == "valid")
        for group in doc["testGroups"] for case in group["tests"]
    ]
    assert len(outcomes) == doc["numberOfTests"] == 151
    assert [tc for tc, got, expected in outcomes if got != expected] == []
    assert sum(expected for _, _, expected in outcomes) > 0 and not all(expected for _, _, expected in outcomes)


def test_its_ed25519_accepts_rfc8032_section_7_1_and_refuses_a_flipped_bit(vectors_dir: Path) -> None:
    cases = json.loads((vectors_dir / "rfc" / "rfc8032_ed25519_section7.1.json").read_text(encoding="utf-8"))
    verify = script_module().ed25519_verify
    for case in cases:
        key, message = bytes.fromhex(case["public_key"]), bytes.fromhex(case["message"])
        signature = bytes.fromhex(case["signature"])
        assert verify(key, signature, message), case["name"]
        flipped = bytes([signature[0] ^ 1]) + signature[1:]
        assert not verify(key, flipped, message), case["name"]
        assert not verify(key, signature, message + b"x"), case["name"]


@pytest.mark.slow
def test_a_real_proof_verifies(setup: dict[str, Any]) -> None:
    proc = run_script(setup, setup["proof"])
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ok\n", "")


@pytest.mark.slow
def test_a_tampered_proof_is_refused(setup: dict[str, Any]) -> None:
    proof = json.loads(json.dumps(setup["proof"]))
    proof["entries"][1]["envelope"] = proof["entries"][1]["envelope"].replace('"verdict":"UNKNOWN"', '"verdict":"PASS"')
    assert proof["entries"][1]["envelope"] != setup["proof"]["entries"][1]["envelope"]
    proc = run_script(setup, proof)
    assert proc.returncode != 0 and last_line(proc.stderr) == "content-hash-mismatch"


@pytest.mark.slow
def test_the_right_fingerprint_of_another_key_is_refused(setup: dict[str, Any]) -> None:
    proc = run_script(setup, setup["proof"], fingerprint=setup["other_fingerprint"])
    assert proc.returncode != 0 and last_line(proc.stderr) == "unknown-key"


def _drop(index: int) -> Any:
    return lambda p: p["entries"].pop(index)


def _set(index: int, **values: Any) -> Any:
    return lambda p: p["entries"][index].update(values)


TAMPERS = {
    "reversed": lambda p: p["entries"].reverse(),
    "dropped-first": _drop(0),
    "dropped-middle": _drop(1),
    "dropped-last": _drop(-1),
    "empty": lambda p: p.update(entries=[]),
    "not-base64": _set(0, signature="%%%"),
    "side-channel-key-id": _set(2, key_id="ed25519-0000000000000000"),
    "side-channel-seq": _set(2, seq=5),
    "other-signature": lambda p: p["entries"][0].update(signature=p["entries"][1]["signature"]),
    "not-strict-envelope": _set(0, envelope="{", content_hash=hashlib.sha256(b"{").hexdigest()),
    "duplicate-key-envelope": lambda p: p["entries"][0].update(
        envelope=p["entries"][0]["envelope"][:-1] + ',"seq":0}',
        content_hash=hashlib.sha256((p["entries"][0]["envelope"][:-1] + ',"seq":0}').encode()).hexdigest(),
    ),
    "planted-head": lambda p: p.update(proof_head_hash="0" * 64),
    "other-format": lambda p: p.update(format="acretix-verify/proof/1"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_the_script_agrees_with_verify_proof(setup: dict[str, Any], name: str) -> None:
    """Same proof, same inputs: scripts/verify_proof.py and the library verifier give the same answer and code."""
    proof = json.loads(json.dumps(setup["proof"]))
    TAMPERS[name](proof)
    # The library is given exactly what the script is given: the one key whose fingerprint is pinned.
    signer = PublicKey.from_jwk(jwks_document()["keys"][0])
    keys = {signer.key_id: TrustedKey(signer)}
    report = verify_proof_bytes(
        json.dumps(proof).encode(),
        keys=keys,
        trusted_head=setup["head"],
        expected_verification_id=str(setup["verification"].id),
        expected_submission_hash=setup["verification"].submission_hash,
    )
    proc = run_script(setup, proof)
    if report.ok:
        assert (proc.returncode, proc.stdout) == (0, "ok\n"), proc.stderr
    else:
        assert proc.returncode == 1
        assert report.reason is not None
        assert last_line(proc.stderr) == report.reason.value, (name, proc.stderr)
