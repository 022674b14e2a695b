"""The audit's streaming Merkle tree (``kernel.merkle.StreamingTree``): the same roots and consistency proofs as the
kernel's ``merkle`` module computes over all leaves in memory, and as the RFC 6962 vectors (``../shared/vectors``),
in one pass; and every corruption of a proof it computed fails ``verify_consistency``."""

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
    StreamingTree,
    consistency_proof_from_hashes,
    consistency_proof_ranges,
    leaf_hash,
    root_from_hashes,
    verify_consistency,
)


def _hashes(n: int) -> list[bytes]:
    return [leaf_hash(hashlib.sha256(str(i).encode()).digest()) for i in range(n)]


def _stream(old: int, hashes: list[bytes]) -> StreamingTree:
    tree = StreamingTree(old, len(hashes))
    for h in hashes:
        tree.append(h)
    return tree


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=300).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_the_streamed_proof_and_roots_are_the_kernels(sizes: tuple[int, int]) -> None:
    old, new = sizes
    hashes = _hashes(new)
    tree = _stream(old, hashes)
    assert tree.proof() == consistency_proof_from_hashes(old, hashes)
    assert tree.root() == root_from_hashes(hashes)
    assert tree.old_root() == (root_from_hashes(hashes[:old]) if old else None)
    old_root = root_from_hashes(hashes[:old]) if old else EMPTY_ROOT
    assert verify_consistency(old, new, old_root, tree.root(), tree.proof())


def test_the_ranges_partition_the_new_leaves_beyond_a_perfect_old_tree() -> None:
    assert consistency_proof_ranges(4, 8) == [(4, 8)]
    assert consistency_proof_ranges(3, 7) == [(2, 3), (3, 4), (0, 2), (4, 7)]
    assert consistency_proof_ranges(0, 5) == [] and consistency_proof_ranges(5, 5) == []
    with pytest.raises(ValueError):
        consistency_proof_ranges(6, 5)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=2, max_value=64).flatmap(lambda n: st.tuples(st.integers(1, n - 1), st.just(n))),
       st.data())
def test_a_changed_old_leaf_breaks_consistency(sizes: tuple[int, int], data: Any) -> None:
    """What the audit relies on: rewrite any leaf the checkpoint covered and the new tree no longer extends it."""
    old, new = sizes
    hashes = _hashes(new)
    old_root = root_from_hashes(hashes[:old])
    victim = data.draw(st.integers(0, old - 1))
    hashes[victim] = leaf_hash(b"rewritten")
    tree = _stream(old, hashes)
    assert not verify_consistency(old, new, old_root, tree.root(), tree.proof())


def test_the_streamed_tree_reproduces_the_rfc6962_vectors(vectors_dir: Path) -> None:
    data: dict[str, Any] = json.loads((vectors_dir / "rfc6962" / "transparency-dev-merkle_vectors.json").read_text())
    leaves = [leaf_hash(bytes.fromhex(x)) for x in data["leaves_hex"]]
    for size, root in data["roots_by_tree_size"].items():
        assert _stream(0, leaves[: int(size)]).root().hex() == root
    for case in data["consistency_proofs"]:
        tree = _stream(case["size1"], leaves[: case["size2"]])
        assert [p.hex() for p in tree.proof()] == case["proof"]
        assert tree.root().hex() == case["root2"]
        assert verify_consistency(
            case["size1"], case["size2"], bytes.fromhex(case["root1"]), tree.root(), tree.proof()
        )
        # corruptions: each proof element with a bit flipped, the proof truncated, the roots swapped
        proof = tree.proof()
        for i in range(len(proof)):
            flipped = list(proof)
            flipped[i] = bytes([flipped[i][0] ^ 0x10]) + flipped[i][1:]
            assert not verify_consistency(case["size1"], case["size2"], bytes.fromhex(case["root1"]), tree.root(),
                                          flipped)
        if proof:
            assert not verify_consistency(case["size1"], case["size2"], bytes.fromhex(case["root1"]), tree.root(),
                                          proof[:-1])
        if case["root1"] != case["root2"]:
            assert not verify_consistency(case["size1"], case["size2"], tree.root(), bytes.fromhex(case["root1"]),
                                          proof)
