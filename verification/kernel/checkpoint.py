"""The audit's signed tree heads: the checkpoint line format, its signature and its strict parser (SPEC §8).

A checkpoint line is the RFC 8785 JSON of ``{format, tree_size, root_hash, timestamp, key_id, signature}``; the
signature is standard base64 of Ed25519 over ``CHECKPOINT_DOMAIN`` followed by the canonical JSON of the other five
fields (its own domain: a checkpoint signature can never pass for a receipt's, whose domain is
``acretix-verify/proof-sig/2:``, nor for a pin-journal line's). Which keys may sign one is the caller's to decide.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from verification.kernel.canonical import canonical_text, canonicalize
from verification.kernel.chain import format_created_at
from verification.kernel.errors import KernelError
from verification.kernel.keys import PrivateKey, PublicKey
from verification.kernel.loglines import parse_fields_line
from verification.kernel.reasons import Reason

CHECKPOINT_FORMAT: Final = "acretix-verify/checkpoint/1"
CHECKPOINT_DOMAIN: Final = "acretix-verify/checkpoint-sig/1:"
CHECKPOINT_FIELDS: Final = ("format", "tree_size", "root_hash", "timestamp", "key_id", "signature")
_HEX: Final = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Checkpoint:
    """A signed tree head as it stands in the checkpoint log (``line`` is 1-based; 0 when not read from a log)."""

    tree_size: int
    root_hash: str
    timestamp: str
    key_id: str
    signature: str
    line: int = 0

    def body(self) -> dict[str, Any]:
        """The signed fields (all but the signature)."""
        return {
            "format": CHECKPOINT_FORMAT,
            "tree_size": self.tree_size,
            "root_hash": self.root_hash,
            "timestamp": self.timestamp,
            "key_id": self.key_id,
        }

    def as_line(self) -> str:
        """The log line: canonical JSON of the body and the signature (no newline)."""
        return canonical_text({**self.body(), "signature": self.signature})

    @property
    def root_bytes(self) -> bytes:
        return bytes.fromhex(self.root_hash)


class CheckpointRefused(KernelError):
    """A checkpoint-log line that is not a well-formed signed tree head (its reason says why)."""


def checkpoint_message(body: Mapping[str, Any]) -> bytes:
    """What a checkpoint signature covers: the checkpoint domain, then the canonical JSON of the unsigned fields."""
    return CHECKPOINT_DOMAIN.encode("ascii") + canonicalize(dict(body))


def sign_checkpoint(*, private_key: PrivateKey, tree_size: int, root_hash: str, timestamp: datetime) -> Checkpoint:
    """A tree head signed by ``private_key`` under the checkpoint domain."""
    unsigned = Checkpoint(tree_size, root_hash, format_created_at(timestamp), private_key.public_key.key_id, "")
    signature = private_key.sign(checkpoint_message(unsigned.body()))
    return Checkpoint(
        tree_size, root_hash, unsigned.timestamp, unsigned.key_id, base64.b64encode(signature).decode("ascii")
    )


def _malformed(detail: str) -> CheckpointRefused:
    return CheckpointRefused(Reason.MALFORMED_CHECKPOINT, detail)


def parse_checkpoint(text: str, *, line: int = 0) -> Checkpoint:
    """A checkpoint line, strictly: exactly the six fields, of the right types; ``malformed-checkpoint`` otherwise.

    The signature is not checked here (``verify_checkpoint``)."""
    doc = parse_fields_line(text, CHECKPOINT_FIELDS, where=f"line {line}", refuse=_malformed)
    size, root, stamp, key_id, signature = (
        doc["tree_size"],
        doc["root_hash"],
        doc["timestamp"],
        doc["key_id"],
        doc["signature"],
    )
    well_formed = (
        doc["format"] == CHECKPOINT_FORMAT
        and isinstance(size, int)
        and not isinstance(size, bool)
        and size >= 0
        and isinstance(root, str)
        and len(root) == 64
        and set(root) <= _HEX
        and all(isinstance(v, str) for v in (stamp, key_id, signature))
    )
    if not well_formed:
        raise _malformed(f"line {line}: a field has the wrong form")
    return Checkpoint(size, root, stamp, key_id, signature, line)


def verify_checkpoint(checkpoint: Checkpoint, key: PublicKey) -> bool:
    """True iff the checkpoint's signature verifies under ``key`` (whose id it names)."""
    if key.key_id != checkpoint.key_id:
        return False
    try:
        signature = base64.b64decode(checkpoint.signature, validate=True)
    except (binascii.Error, ValueError):
        return False
    return key.verify(signature, checkpoint_message(checkpoint.body()))
