"""The README's "Verify a proof without our code" script, run exactly as printed, against real proofs."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.verification.conftest import REPO_ROOT
from verification.kernel.keys import PrivateKey, PublicKey
from verification.kernel.verifier import TrustedKey, verify_proof_bytes
from verification.selectors import head_of, jwks_document, proof_for

BEGIN, END = "<!-- verify-proof-script:begin -->", "<!-- verify-proof-script:end -->"


def readme_script() -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "the README must hold the script between its markers once"
    block = text[text.index(BEGIN) + len(BEGIN) : text.index(END)]
    match = re.fullmatch(r"\s*```python\n(.*?)```\s*", block, re.DOTALL)
    assert match is not None, "the script is one ```python fenced block between the markers"
    return match.group(1)


@pytest.fixture
def setup(chain: tuple[Any, list[Any]], signing_key: Any, tmp_path: Path) -> dict[str, Any]:
    verification, _ = chain
    script = tmp_path / "verify_proof.py"
    script.write_text(readme_script(), encoding="utf-8")
    keys = tmp_path / "keys.json"
    other = PrivateKey.from_seed(bytes([7]) * 32).public_key
    keys.write_text(json.dumps({"keys": [*jwks_document()["keys"], other.to_jwk()]}))
    head = head_of(verification)
    assert head is not None
    return {
        "script": script,
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
    # -I: isolated mode, so nothing of this repository can be imported by the script.
    return subprocess.run([sys.executable, "-I", str(s["script"]), *args], cwd=s["tmp"], capture_output=True,
                          text=True, timeout=60, check=False)


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_the_script_imports_only_the_allowed_modules() -> None:
    imports = set(re.findall(r"^(?:import|from) ([\w.]+)", readme_script(), re.MULTILINE))
    assert imports == {"base64", "hashlib", "json", "sys", "cryptography.hazmat.primitives.asymmetric.ed25519"}


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
    """Same proof, same inputs: the README script and the library verifier give the same answer and code."""
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
