"""A long chain's signatures verified on two threads (issue 15): the same count, the same report, as on one."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.kernel.test_chain_verifier import KEY, SUB, VID, make_chain, verify
from verification.kernel import verifier
from verification.kernel.chain import build_proof
from verification.kernel.reasons import Reason

N = 2 * verifier.PARALLEL_FROM + 52
SIGNER = Ed25519PrivateKey.from_private_bytes(KEY.seed)
MESSAGES = [b"acretix-verify/proof-sig/2:%064x" % n for n in range(N)]
SIGNATURES = [SIGNER.sign(message) for message in MESSAGES]


@pytest.fixture(autouse=True)
def two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two-thread path is taken on any machine (one with a single CPU takes one thread otherwise)."""
    monkeypatch.setattr(verifier, "_usable_cpus", lambda: 2)


def _pairs(bad: tuple[int, ...]) -> list[tuple[bytes, bytes]]:
    pairs = list(zip(SIGNATURES, MESSAGES, strict=True))
    for at in bad:
        signature = bytearray(pairs[at][0])
        signature[0] ^= 0x01
        pairs[at] = (bytes(signature), pairs[at][1])
    return pairs


@pytest.mark.parametrize(
    "bad", [(), (0,), (N // 2 - 1,), (N // 2,), (N // 2 + 1,), (N - 1,), (10, N - 10), (N - 10, 10)]
)
def test_two_threads_count_what_one_counts(bad: tuple[int, ...]) -> None:
    pairs = _pairs(bad)
    expected = KEY.public_key.verified_prefix(pairs)
    assert expected == (min(bad) if bad else N)
    assert verifier.verified_prefix(KEY.public_key, pairs) == expected


def test_a_thread_that_cannot_start_leaves_it_to_one(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Any) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(verifier.threading.Thread, "start", refuse)
    assert verifier.verified_prefix(KEY.public_key, _pairs((N - 3,))) == N - 3
    assert verifier.verified_prefix(KEY.public_key, _pairs(())) == N


def _long_proof(bad_seq: int | None = None) -> dict[str, Any]:
    chain = make_chain(kinds=("run",) * (verifier.PARALLEL_FROM + 40))
    proof = build_proof(verification_id=VID, entries=chain, proof_head_hash=chain[-1].content_hash)
    if bad_seq is not None:
        entry = proof["entries"][bad_seq]
        signature = bytearray(base64.b64decode(entry["signature"]))
        signature[5] ^= 0x40
        entry["signature"] = base64.b64encode(bytes(signature)).decode("ascii")
    return proof


def test_a_half_that_answers_nothing_is_checked_entry_by_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never more than the truth: a second half with no answer counts as unverified, and step 5 then checks those
    entries one by one: the proof still verifies, and a bad signature among them is still found."""

    class Mute:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def start(self) -> None:
            pass

        def join(self) -> None:
            pass

    monkeypatch.setattr(verifier.threading, "Thread", Mute)
    proof = _long_proof()
    assert verifier.verified_prefix(KEY.public_key, _pairs(())) == N // 2
    assert verify(proof, head=proof["proof_head_hash"]).ok
    broken = _long_proof(bad_seq=verifier.PARALLEL_FROM)
    report = verify(broken, head=broken["proof_head_hash"])
    assert (report.reason, report.failed_step, report.failed_seq) == (
        Reason.SIGNATURE_FAILURE,
        5,
        verifier.PARALLEL_FROM,
    )


@pytest.mark.parametrize("bad_seq", [None, 3, verifier.PARALLEL_FROM // 2 + 20, verifier.PARALLEL_FROM + 39])
def test_a_long_chain_reports_as_it_does_on_one_thread(monkeypatch: pytest.MonkeyPatch, bad_seq: int | None) -> None:
    proof = _long_proof(bad_seq)
    two = verify(proof, head=proof["proof_head_hash"], sub=SUB)
    monkeypatch.setattr(verifier, "PARALLEL_FROM", 10**9)
    one = verify(proof, head=proof["proof_head_hash"], sub=SUB)
    outcome = (two.ok, two.reason, two.failed_step, two.failed_seq)
    assert outcome == (one.ok, one.reason, one.failed_step, one.failed_seq)
    assert two.steps == one.steps
    assert two.ok is (bad_seq is None)
