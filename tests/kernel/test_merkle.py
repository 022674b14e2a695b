"""RFC 6962 Merkle tree: the transparency-dev vectors, their corruption list and edge cases, and properties."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verification.kernel.merkle import (
    EMPTY_ROOT,
    CompactTree,
    consistency_proof,
    consistency_proof_from_hashes,
    inclusion_proof,
    inclusion_proof_from_hashes,
    leaf_hash,
    node_hash,
    root,
    root_from_hashes,
    verify_consistency,
    verify_inclusion,
)

H = bytes.fromhex


@pytest.fixture(scope="module")
def vectors(vectors_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((vectors_dir / "rfc6962" / "transparency-dev-merkle_vectors.json").read_text())
    return data


@pytest.fixture(scope="module")
def leaves(vectors: dict[str, Any]) -> list[bytes]:
    return [H(x) for x in vectors["leaves_hex"]]


def _flip(b: bytes, bit: int) -> bytes:
    return bytes([b[0] ^ (1 << bit)]) + b[1:]


def _reference_mth(data: list[bytes]) -> bytes:
    """Straight from RFC 6962 §2.1, recursive: the oracle for the property tests."""
    n = len(data)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + data[0]).digest()
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + _reference_mth(data[:k]) + _reference_mth(data[k:])).digest()


# --- hashing and roots ---------------------------------------------------------------------------------------


def test_hash_prefixes() -> None:
    assert leaf_hash(b"abc") == hashlib.sha256(b"\x00abc").digest()
    a, b = b"\x11" * 32, b"\x22" * 32
    assert node_hash(a, b) == hashlib.sha256(b"\x01" + a + b).digest()
    assert node_hash(a, b) != node_hash(b, a)


def test_empty_tree_root(vectors: dict[str, Any]) -> None:
    assert root([]) == EMPTY_ROOT == H(vectors["empty_tree_root"])
    assert CompactTree().root() == EMPTY_ROOT
    assert root_from_hashes([]) == EMPTY_ROOT


def test_roots_by_tree_size(vectors: dict[str, Any], leaves: list[bytes]) -> None:
    assert len(vectors["roots_by_tree_size"]) == 8
    tree = CompactTree()
    for size_text, expected in vectors["roots_by_tree_size"].items():
        size = int(size_text)
        assert root(leaves[:size]) == H(expected)
        assert root_from_hashes([leaf_hash(x) for x in leaves[:size]]) == H(expected)
    for i, data in enumerate(leaves, start=1):
        tree.append_data(data)
        assert tree.size == i
        assert tree.root() == H(vectors["roots_by_tree_size"][str(i)])
        assert len(tree.hashes) == i.bit_count()


# --- inclusion -----------------------------------------------------------------------------------------------


def test_inclusion_vectors_generate_and_verify(vectors: dict[str, Any], leaves: list[bytes]) -> None:
    assert len(vectors["inclusion_proofs"]) == 5
    for case in vectors["inclusion_proofs"]:
        idx, size = case["leaf_index"], case["tree_size"]
        proof = [H(p) for p in case["proof"]]
        lh = H(case["leaf_hash"])
        assert leaf_hash(H(case["leaf_hex"])) == lh
        assert inclusion_proof(idx, leaves[:size]) == proof
        assert verify_inclusion(idx, size, lh, proof, H(case["root"])) is True


def _inclusion_corruptions(idx: int, size: int, lh: bytes, proof: list[bytes], rt: bytes) -> dict[str, tuple[Any, ...]]:
    """The upstream list ``corruptions_that_must_fail.inclusion``, each as verify_inclusion arguments."""
    out: dict[str, tuple[Any, ...]] = {
        "leaf_index-1": (idx - 1, size, lh, proof, rt),
        "leaf_index+1": (idx + 1, size, lh, proof, rt),
        "leaf_index^2": (idx ^ 2, size, lh, proof, rt),
        "tree_size*2": (idx, size * 2, lh, proof, rt),
        "tree_size/2": (idx, size // 2, lh, proof, rt),
        "wrong leaf hash": (idx, size, leaf_hash(b"WrongLeaf"), proof, rt),
        "empty-tree root": (idx, size, lh, proof, EMPTY_ROOT),
        "random root": (idx, size, lh, proof, hashlib.sha256(b"random").digest()),
        "trailing empty element": (idx, size, lh, [*proof, b""], rt),
        "trailing root": (idx, size, lh, [*proof, rt], rt),
        "preceding empty element": (idx, size, lh, [b"", *proof], rt),
        "preceding root": (idx, size, lh, [rt, *proof], rt),
    }
    if proof:
        out["remove last element"] = (idx, size, lh, proof[:-1], rt)
        out["insert extra element after first"] = (idx, size, lh, [proof[0], b"\x00" * 32, *proof[1:]], rt)
    for i in range(len(proof)):
        flipped = list(proof)
        flipped[i] = _flip(flipped[i], 3)
        out[f"flip bit 3 of byte 0 in each proof element #{i}"] = (idx, size, lh, flipped, rt)
    # Also the 32-byte "empty element" (the hash of nothing) rather than zero bytes.
    out["trailing empty-hash element"] = (idx, size, lh, [*proof, EMPTY_ROOT], rt)
    return out


def test_inclusion_corruptions_are_refused(vectors: dict[str, Any]) -> None:
    listed = set(vectors["corruptions_that_must_fail"]["inclusion"])
    covered: set[str] = set()
    for case in vectors["inclusion_proofs"]:
        idx, size = case["leaf_index"], case["tree_size"]
        proof = [H(p) for p in case["proof"]]
        lh, rt = H(case["leaf_hash"]), H(case["root"])
        for name, args in _inclusion_corruptions(idx, size, lh, proof, rt).items():
            assert verify_inclusion(*args) is False, (case, name)
            covered.add(name.split(" #")[0])
    assert listed <= covered


def test_inclusion_edge_cases(vectors: dict[str, Any]) -> None:
    cases = [c for c in vectors["edge_cases"] if c["kind"] == "inclusion"]
    assert cases
    some = hashlib.sha256(b"leaf").digest()
    for case in cases:
        assert case["expect"] == "fail"
        assert verify_inclusion(case["leaf_index"], case["tree_size"], some, [], some) is False
        assert verify_inclusion(case["leaf_index"], case["tree_size"], some, [], EMPTY_ROOT) is False


def test_verify_inclusion_never_raises_on_junk() -> None:
    good = hashlib.sha256(b"x").digest()
    junk: list[tuple[Any, ...]] = [
        (-1, 1, good, [], good),
        (0, -1, good, [], good),
        (True, 2, good, [good], good),
        (0, 1, good[:31], [], good[:31]),
        (0, 1, "not bytes", [], good),
        (0, 2, good, "not a list", good),
        (0, 2, good, [None], good),
        (0, 1, good, None, good),
        ("0", 1, good, [], good),
        (0, 2**70, good, [good] * 100, good),
    ]
    for args in junk:
        assert verify_inclusion(*args) is False


# --- consistency ---------------------------------------------------------------------------------------------


def test_consistency_vectors_generate_and_verify(vectors: dict[str, Any], leaves: list[bytes]) -> None:
    assert len(vectors["consistency_proofs"]) == 5
    for case in vectors["consistency_proofs"]:
        s1, s2 = case["size1"], case["size2"]
        proof = [H(p) for p in case["proof"]]
        r1, r2 = H(case["root1"]), H(case["root2"])
        assert root(leaves[:s1]) == r1 and root(leaves[:s2]) == r2
        assert consistency_proof(s1, leaves[:s2]) == proof
        assert verify_consistency(s1, s2, r1, r2, proof) is True


def _consistency_corruptions(s1: int, s2: int, r1: bytes, r2: bytes, proof: list[bytes]) -> dict[str, tuple[Any, ...]]:
    """The upstream list ``corruptions_that_must_fail.consistency``, each as verify_consistency arguments."""
    wrong = hashlib.sha256(b"wrong").digest()
    out: dict[str, tuple[Any, ...]] = {
        "size1-1": (s1 - 1, s2, r1, r2, proof),
        "size1+1": (s1 + 1, s2, r1, r2, proof),
        "size1^2": (s1 ^ 2, s2, r1, r2, proof),
        "size2*2": (s1, s2 * 2, r1, r2, proof),
        "size2/2": (s1, s2 // 2, r1, r2, proof),
        "wrong root1": (s1, s2, wrong, r2, proof),
        "wrong root2": (s1, s2, r1, wrong, proof),
        "swapped roots": (s1, s2, r2, r1, proof),
        "empty proof": (s1, s2, r1, r2, []),
        "trailing empty element": (s1, s2, r1, r2, [*proof, b""]),
        "trailing root1": (s1, s2, r1, r2, [*proof, r1]),
        "trailing root2": (s1, s2, r1, r2, [*proof, r2]),
        "preceding empty element": (s1, s2, r1, r2, [b"", *proof]),
        "preceding root1": (s1, s2, r1, r2, [r1, *proof]),
        "preceding root2": (s1, s2, r1, r2, [r2, *proof]),
    }
    if proof:
        out["preceding proof[0]"] = (s1, s2, r1, r2, [proof[0], *proof])
        out["truncated proof"] = (s1, s2, r1, r2, proof[:-1])
    for i in range(len(proof)):
        flipped = list(proof)
        flipped[i] = _flip(flipped[i], 4)
        out[f"flip bit 4 of byte 0 in each proof element #{i}"] = (s1, s2, r1, r2, flipped)
    out["trailing empty-hash element"] = (s1, s2, r1, r2, [*proof, EMPTY_ROOT])
    return out


def test_consistency_corruptions_are_refused(vectors: dict[str, Any]) -> None:
    listed = set(vectors["corruptions_that_must_fail"]["consistency"])
    covered: set[str] = set()
    for case in vectors["consistency_proofs"]:
        s1, s2 = case["size1"], case["size2"]
        proof = [H(p) for p in case["proof"]]
        r1, r2 = H(case["root1"]), H(case["root2"])
        for name, args in _consistency_corruptions(s1, s2, r1, r2, proof).items():
            if tuple(args) == (s1, s2, r1, r2, proof):
                continue  # the 1→1 case: "swapped roots" of two equal roots changes nothing
            assert verify_consistency(*args) is False, (case, name)
            covered.add(name.split(" #")[0])
    assert listed <= covered


def test_consistency_edge_cases(vectors: dict[str, Any]) -> None:
    """Upstream's trivial sizes; with real 32-byte roots since we refuse anything else."""
    r_a, r_b = hashlib.sha256(b"a").digest(), hashlib.sha256(b"b").digest()
    cases = [c for c in vectors["edge_cases"] if c["kind"] == "consistency"]
    assert len(cases) == 10
    for case in cases:
        s1, s2 = case["size1"], case["size2"]
        if "roots" in case:  # "both empty-tree hash", with a non-empty proof
            args: tuple[Any, ...] = (s1, s2, EMPTY_ROOT, EMPTY_ROOT, [EMPTY_ROOT])
        elif "roots_equal" in case:
            old = EMPTY_ROOT if s1 == 0 else r_a
            args = (s1, s2, old, old if case["roots_equal"] else r_b, [])
        else:
            args = (s1, s2, r_a, r_a, [])
        expected = case["expect"] == "ok"
        assert verify_consistency(*args) is expected, case


def test_consistency_from_empty_needs_the_empty_root() -> None:
    r = hashlib.sha256(b"r").digest()
    assert verify_consistency(0, 5, EMPTY_ROOT, r, []) is True
    assert verify_consistency(0, 5, r, r, []) is False
    assert verify_consistency(0, 5, EMPTY_ROOT, r, [r]) is False


def test_verify_consistency_never_raises_on_junk() -> None:
    good = hashlib.sha256(b"x").digest()
    junk: list[tuple[Any, ...]] = [
        (-1, 2, good, good, [good]),
        (1, 2, good, good, [good[:5]]),
        (1, 2, good, good, "abc"),
        (1, 2, None, good, [good]),
        (1.0, 2, good, good, [good]),
        (False, 2, good, good, [good]),
        (1, 2**80, good, good, [good] * 200),
        (3, 2, good, good, [good]),
    ]
    for args in junk:
        assert verify_consistency(*args) is False


# --- properties against the recursive RFC definition ---------------------------------------------------------

leaf_lists = st.lists(st.binary(max_size=8), min_size=1, max_size=70)


@settings(max_examples=200, deadline=None)
@given(data=leaf_lists, pick=st.integers(min_value=0))
def test_inclusion_round_trip(data: list[bytes], pick: int) -> None:
    n = len(data)
    idx = pick % n
    rt = root(data)
    assert rt == _reference_mth(data)
    proof = inclusion_proof(idx, data)
    assert verify_inclusion(idx, n, leaf_hash(data[idx]), proof, rt)
    assert not verify_inclusion(idx, n, leaf_hash(data[idx] + b"!"), proof, rt)
    if proof:
        bad = list(proof)
        bad[-1] = bytes([bad[-1][0] ^ 0x80]) + bad[-1][1:]
        assert not verify_inclusion(idx, n, leaf_hash(data[idx]), bad, rt)
        assert not verify_inclusion(idx, n, leaf_hash(data[idx]), proof[:-1], rt)


@settings(max_examples=200, deadline=None)
@given(data=leaf_lists, pick=st.integers(min_value=0), flip=st.integers(min_value=0))
def test_consistency_round_trip(data: list[bytes], pick: int, flip: int) -> None:
    n = len(data)
    m = pick % (n + 1)
    proof = consistency_proof(m, data)
    old, new = _reference_mth(data[:m]), _reference_mth(data)
    assert verify_consistency(m, n, old, new, proof)
    if proof:
        i = flip % len(proof)
        bad = list(proof)
        bad[i] = bytes([bad[i][0] ^ 0x01]) + bad[i][1:]
        assert not verify_consistency(m, n, old, new, bad)
        assert not verify_consistency(m, n, old, new, proof[:-1])
        assert not verify_consistency(m, n, old, new, [*proof, proof[0]])
    if 0 < m < n:
        other = _reference_mth([*data[: m - 1], data[m - 1] + b"#"])  # a different history of the same size
        assert not verify_consistency(m, n, other, new, proof)


@settings(max_examples=200, deadline=None)
@given(data=st.lists(st.binary(max_size=4), max_size=40))
def test_compact_tree_matches_and_resumes(data: list[bytes]) -> None:
    tree = CompactTree()
    for i, d in enumerate(data):
        tree.append_data(d)
        assert tree.root() == _reference_mth(data[: i + 1])
    resumed = CompactTree.from_state(tree.size, tree.hashes)
    assert resumed.root() == tree.root()
    resumed.append_data(b"next")
    assert resumed.root() == _reference_mth([*data, b"next"])


def test_compact_tree_refuses_bad_state() -> None:
    h = hashlib.sha256(b"h").digest()
    with pytest.raises(ValueError):
        CompactTree.from_state(3, [h])  # 3 = 0b11 needs two hashes
    with pytest.raises(ValueError):
        CompactTree.from_state(-1, [])
    with pytest.raises(ValueError):
        CompactTree.from_state(1, [h[:16]])
    with pytest.raises(ValueError):
        CompactTree().append(b"short")


def test_generators_refuse_out_of_range() -> None:
    hashes = [leaf_hash(bytes([i])) for i in range(4)]
    for bad in (-1, 4, True):
        with pytest.raises(ValueError):
            inclusion_proof_from_hashes(bad, hashes)
    with pytest.raises(ValueError):
        consistency_proof_from_hashes(5, hashes)
    assert consistency_proof_from_hashes(0, hashes) == []
    assert consistency_proof_from_hashes(4, hashes) == []


def test_large_tree_root_and_proofs() -> None:
    """100,000 leaves: the root, one inclusion proof and one consistency proof, all linear-time."""
    hashes = [hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(100_000)]
    rt = root_from_hashes(hashes)
    proof = inclusion_proof_from_hashes(77_777, hashes)
    assert len(proof) == 17
    assert verify_inclusion(77_777, 100_000, hashes[77_777], proof, rt)
    cproof = consistency_proof_from_hashes(65_537, hashes)
    assert verify_consistency(65_537, 100_000, root_from_hashes(hashes[:65_537]), rt, cproof)
