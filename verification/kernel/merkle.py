"""The RFC 6962 / RFC 9162 Merkle tree behind the audit's signed checkpoints (SPEC §8).

Hashing (RFC 6962 §2.1): ``leaf = SHA-256(0x00 || data)``, ``node = SHA-256(0x01 || left || right)``, and the
root of the empty tree is ``SHA-256("")``. A tree of ``n`` leaves splits at the largest power of two below ``n``.

Two families of functions:
- ``root``, ``inclusion_proof``, ``consistency_proof`` take the leaves' *data* (RFC 6962's ``D[n]``); the
  ``*_from_hashes`` twins take already computed leaf hashes (what the audit stores: one per receipt).
- ``verify_inclusion`` and ``verify_consistency`` follow RFC 9162 §2.1.3.2 and §2.1.4.2 step by step. They never
  raise: any malformed input (wrong types, hashes that are not 32 bytes, impossible sizes) answers False.

Deliberately stricter than transparency-dev/merkle (fail closed): every hash handed to a verifier must be exactly
32 bytes, and a consistency check from the empty tree requires the old root to be the empty-tree hash.

``CompactTree`` keeps only the roots of the perfect subtrees along the right edge (one per set bit of the size),
so appending is amortized O(1) and a checkpoint can be resumed from ``(size, hashes)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

HASH_SIZE: Final = 32
LEAF_PREFIX: Final = b"\x00"
NODE_PREFIX: Final = b"\x01"
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    """RFC 6962 §2.1 leaf hash: SHA-256 of 0x00 followed by the leaf data."""
    return hashlib.sha256(LEAF_PREFIX + bytes(data)).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 §2.1 interior node hash: SHA-256 of 0x01, the left child hash and the right child hash."""
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def _largest_power_of_two_below(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (n ≥ 2): RFC 6962's split point ``k``."""
    return 1 << ((n - 1).bit_length() - 1)


def _is_hash(value: object) -> bool:
    return isinstance(value, bytes) and len(value) == HASH_SIZE


def _check_hashes(hashes: Sequence[bytes]) -> list[bytes]:
    out = list(hashes)
    for h in out:
        if not _is_hash(h):
            raise ValueError("a leaf hash must be exactly 32 bytes")
    return out


# --- building -----------------------------------------------------------------------------------------------


class CompactTree:
    """An append-only tree that remembers only its right-edge perfect subtrees (a compact range from 0).

    ``hashes`` holds the roots of the perfect subtrees, largest (leftmost) first: one per set bit of ``size``.
    """

    __slots__ = ("_hashes", "_size")

    def __init__(self) -> None:
        self._size = 0
        self._hashes: list[bytes] = []

    @classmethod
    def from_state(cls, size: int, hashes: Sequence[bytes]) -> CompactTree:
        """Resume from a stored ``(size, hashes)``; refuses a state whose shape does not fit its size."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError("size must be a non-negative integer")
        checked = _check_hashes(hashes)
        if len(checked) != size.bit_count():
            raise ValueError("a compact tree of this size holds one hash per set bit of the size")
        tree = cls()
        tree._size = size
        tree._hashes = checked
        return tree

    @property
    def size(self) -> int:
        return self._size

    @property
    def hashes(self) -> tuple[bytes, ...]:
        return tuple(self._hashes)

    def append(self, leaf: bytes) -> None:
        """Append one leaf *hash* (use ``append_data`` for raw data); merges equal-sized subtrees as binary carry."""
        if not _is_hash(leaf):
            raise ValueError("a leaf hash must be exactly 32 bytes")
        self._hashes.append(leaf)
        self._size += 1
        # Each trailing zero bit of the new size is a carry: two perfect subtrees of equal height merge.
        size = self._size
        while size & 1 == 0:
            right = self._hashes.pop()
            left = self._hashes.pop()
            self._hashes.append(node_hash(left, right))
            size >>= 1

    def append_data(self, data: bytes) -> None:
        """Append one leaf given by its data."""
        self.append(leaf_hash(data))

    def root(self) -> bytes:
        """The RFC 6962 root hash of the tree so far (the empty-tree hash for size 0)."""
        if not self._hashes:
            return EMPTY_ROOT
        acc = self._hashes[-1]
        for h in reversed(self._hashes[:-1]):
            acc = node_hash(h, acc)
        return acc


def root_from_hashes(leaf_hashes: Sequence[bytes]) -> bytes:
    """The root over leaf hashes, in O(n) with O(log n) memory."""
    tree = CompactTree()
    for h in leaf_hashes:
        tree.append(h)
    return tree.root()


def root(leaves: Sequence[bytes]) -> bytes:
    """RFC 6962 MTH(D[n]) over the leaves' data; the empty tree's root is SHA-256 of the empty string."""
    tree = CompactTree()
    for data in leaves:
        tree.append(leaf_hash(data))
    return tree.root()


def _subtree_root(hashes: Sequence[bytes], lo: int, hi: int) -> bytes:
    """MTH over ``hashes[lo:hi]`` (hi > lo), iteratively via a compact tree."""
    tree = CompactTree()
    for i in range(lo, hi):
        tree.append(hashes[i])
    return tree.root()


def inclusion_proof_from_hashes(index: int, leaf_hashes: Sequence[bytes]) -> list[bytes]:
    """RFC 6962 §2.1.1 PATH(m, D[n]) over leaf hashes; ValueError for an index outside the tree."""
    hashes = _check_hashes(leaf_hashes)
    n = len(hashes)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
        raise ValueError("leaf index outside the tree")
    path: list[bytes] = []
    lo, hi, m = 0, n, index
    # Walk down from the root; each level contributes the root of the sibling subtree (O(n) in total).
    while hi - lo > 1:
        k = _largest_power_of_two_below(hi - lo)
        if m < k:
            path.append(_subtree_root(hashes, lo + k, hi))
            hi = lo + k
        else:
            path.append(_subtree_root(hashes, lo, lo + k))
            lo, m = lo + k, m - k
    path.reverse()  # PATH lists siblings from the leaf up.
    return path


def inclusion_proof(index: int, leaves: Sequence[bytes]) -> list[bytes]:
    """RFC 6962 §2.1.1 audit path for leaf ``index`` over the leaves' data."""
    return inclusion_proof_from_hashes(index, [leaf_hash(d) for d in leaves])


def consistency_proof_from_hashes(old_size: int, leaf_hashes: Sequence[bytes]) -> list[bytes]:
    """RFC 6962 §2.1.2 PROOF(m, D[n]) over leaf hashes; empty for m == 0 or m == n, ValueError for m > n."""
    hashes = _check_hashes(leaf_hashes)
    n = len(hashes)
    if isinstance(old_size, bool) or not isinstance(old_size, int) or not 0 <= old_size <= n:
        raise ValueError("old size outside the tree")
    return [_subtree_root(hashes, lo, hi) for lo, hi in consistency_proof_ranges(old_size, n)]


def consistency_proof_ranges(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """The leaf ranges ``[lo, hi)`` whose subtree roots, in order, are RFC 6962 §2.1.2's PROOF(m, D[n]).

    The walk over sizes only, so a proof can also be computed while the leaves stream past (``StreamingTree``: the
    ranges are disjoint). Empty for m == 0 or m == n; ValueError for m outside ``[0, n]``.
    """
    if not _is_size(old_size) or not _is_size(new_size) or old_size > new_size:
        raise ValueError("old size outside the tree")
    if old_size in (0, new_size):
        return []
    ranges: list[tuple[int, int]] = []
    lo, hi, m, complete = 0, new_size, old_size, True
    # SUBPROOF(m, D[lo:hi], complete), unrolled; siblings are collected top-down and reversed at the end.
    while m != hi - lo:
        k = _largest_power_of_two_below(hi - lo)
        if m <= k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo, m, complete = lo + k, m - k, False
    if not complete:
        ranges.append((lo, hi))
    ranges.reverse()
    return ranges


class StreamingTree:
    """The root of all leaves, the root of the first ``old_size``, and PROOF(old_size, D[new_size]), in one pass.

    Memory: one compact tree for the whole and one per proof range (O(log n) ranges of O(log n) hashes each).
    """

    def __init__(self, old_size: int, new_size: int) -> None:
        self.old_size = old_size
        self.new_size = new_size
        self._all = CompactTree()
        self._old_root: bytes | None = None
        self._ranges = consistency_proof_ranges(old_size, new_size)
        # Feed each leaf to the range that holds it: ranges are disjoint, so keep them sorted by start.
        self._trees = [CompactTree() for _ in self._ranges]
        self._by_start = sorted(range(len(self._ranges)), key=lambda i: self._ranges[i][0])
        self._cursor = 0

    @property
    def size(self) -> int:
        return self._all.size

    def append(self, leaf: bytes) -> None:
        """Append one leaf hash (32 bytes)."""
        index = self._all.size
        self._all.append(leaf)
        if self._all.size == self.old_size:
            self._old_root = self._all.root()
        while self._cursor < len(self._by_start) and self._ranges[self._by_start[self._cursor]][1] <= index:
            self._cursor += 1
        if self._cursor < len(self._by_start):
            i = self._by_start[self._cursor]
            lo, hi = self._ranges[i]
            if lo <= index < hi:
                self._trees[i].append(leaf)

    def root(self) -> bytes:
        return self._all.root()

    def old_root(self) -> bytes | None:
        """The root over the first ``old_size`` leaves, once that many were appended."""
        return self._old_root

    def proof(self) -> list[bytes]:
        """PROOF(old_size, D[new_size]); call after all ``new_size`` leaves were appended."""
        if self._all.size != self.new_size:
            raise ValueError(f"{self._all.size} leaves appended, {self.new_size} expected")
        return [tree.root() for tree in self._trees]


def consistency_proof(old_size: int, leaves: Sequence[bytes]) -> list[bytes]:
    """RFC 6962 §2.1.2 consistency proof between the first ``old_size`` leaves and all of them (leaves' data)."""
    return consistency_proof_from_hashes(old_size, [leaf_hash(d) for d in leaves])


# --- verifying (RFC 9162) ------------------------------------------------------------------------------------


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _proof_ok(proof: object) -> bool:
    return isinstance(proof, (list, tuple)) and all(_is_hash(p) for p in proof)


def verify_inclusion(index: int, size: int, leaf_hash: bytes, proof: Sequence[bytes], root: bytes) -> bool:
    """RFC 9162 §2.1.3.2: does ``proof`` show ``leaf_hash`` at ``index`` in the tree of ``size`` with ``root``?"""
    if not (_is_size(index) and _is_size(size) and _is_hash(leaf_hash) and _is_hash(root) and _proof_ok(proof)):
        return False
    # 1. leaf_index must lie inside the tree.
    if index >= size:
        return False
    # 2-3. fn = leaf_index, sn = tree_size - 1, r = hash.
    fn, sn, r = index, size - 1, leaf_hash
    # 4. fold in each proof element.
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while not (fn & 1 or fn == 0):
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    # 5. sn must be 0 and r must equal the root.
    return sn == 0 and r == root


def verify_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]) -> bool:
    """RFC 9162 §2.1.4.2: is the tree (new_size, new_root) an append-only extension of (old_size, old_root)?"""
    if not (_is_size(old_size) and _is_size(new_size) and _is_hash(old_root) and _is_hash(new_root)):
        return False
    if not _proof_ok(proof):
        return False
    if old_size > new_size:
        return False  # time travel
    if old_size == new_size:
        return len(proof) == 0 and old_root == new_root
    if old_size == 0:
        # Every tree extends the empty one; the old root must still be the empty-tree hash (stricter than upstream).
        return len(proof) == 0 and old_root == EMPTY_ROOT
    # 1. An empty path proves nothing.
    if len(proof) == 0:
        return False
    path = list(proof)
    # 2. If first is an exact power of 2, prepend first_hash.
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    # 3. fn = first - 1, sn = second - 1.
    fn, sn = old_size - 1, new_size - 1
    # 4. Shift right while LSB(fn) is set.
    while fn & 1:
        fn >>= 1
        sn >>= 1
    # 5. fr = sr = the first value.
    fr = sr = path[0]
    # 6. Fold in each subsequent value.
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while not (fn & 1 or fn == 0):
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    # 7. fr must be the old root, sr the new root, and sn 0.
    return fr == old_root and sr == new_root and sn == 0
