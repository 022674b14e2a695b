"""The pin journal's format (kernel/journal.py; SPEC §8): chaining, signers, the anchor, and the fold."""

from __future__ import annotations

import json
from typing import Any

import pytest

from verification.kernel.canonical import canonical_text
from verification.kernel.journal import JOURNAL_DOMAIN, JournalRefused, build_line, line_hash, verify_journal
from verification.kernel.keys import PrivateKey
from verification.kernel.reasons import Reason


def _own(key: PrivateKey, status: str = "active") -> dict[str, Any]:
    return {"action": "own-key", "key_id": key.public_key.key_id, "jwk": key.public_key.to_jwk(), "status": status,
            "at": "2026-01-01T00:00:00.000000Z"}


def _pin(key: PrivateKey, purpose: str = "proof-signing", action: str = "pin") -> dict[str, Any]:
    return {"action": action, "key_id": key.public_key.key_id, "jwk": key.public_key.to_jwk(), "purpose": purpose,
            "at": "2026-01-02T00:00:00.000000Z"}


def _journal(events: list[tuple[dict[str, Any], PrivateKey]]) -> list[str]:
    lines: list[str] = []
    head = None
    for seq, (event, signer) in enumerate(events):
        lines.append(build_line(seq=seq, prev_hash=head, event=event, signer=signer))
        head = line_hash(json.loads(lines[-1]))
    return lines


def _refused(lines: list[str], **kwargs: Any) -> str:
    with pytest.raises(JournalRefused) as refused:
        verify_journal(lines, **kwargs)
    assert refused.value.reason is Reason.PIN_JOURNAL_INVALID
    return refused.value.detail


@pytest.fixture
def portal() -> PrivateKey:
    return PrivateKey.from_seed(bytes(range(32)))


def test_a_journal_folds_pins_rotation_and_revocation(portal: PrivateKey) -> None:
    issuer, rotated = PrivateKey.generate(), PrivateKey.generate()
    lines = _journal([
        (_own(portal), portal), (_pin(portal), portal), (_pin(issuer, "evidence-source"), portal),
        (_own(rotated), rotated), (_pin(rotated), rotated),
        ({"action": "revoke", "key_id": portal.public_key.key_id, "jwk": portal.public_key.to_jwk(),
          "reason": "lost", "at": "2026-02-01T00:00:00.000000Z"}, rotated),
        (_pin(issuer, "evidence-source", "unpin"), rotated),
    ])
    state = verify_journal(lines, anchors=frozenset({rotated.public_key.key_id}))
    assert state.active == rotated.public_key.key_id and state.size == 7
    assert state.is_revoked(portal.public_key.key_id) and not state.is_revoked(rotated.public_key.key_id)
    assert state.keys[portal.public_key.key_id].revoked_reason == "lost"
    assert state.is_pinned(portal.public_key.key_id, "proof-signing")  # pinned and revoked: verification says so
    assert not state.is_pinned(issuer.public_key.key_id, "evidence-source")
    assert set(state.own_keys()) == {portal.public_key.key_id, rotated.public_key.key_id}


def test_the_signature_covers_the_domain_and_the_line_hash(portal: PrivateKey) -> None:
    [line] = _journal([(_own(portal), portal)])
    doc = json.loads(line)
    import base64

    message = JOURNAL_DOMAIN.encode() + line_hash(doc).encode()
    assert portal.public_key.verify(base64.b64decode(doc["signature"]), message)
    assert line == canonical_text(doc)


def test_every_tampering_is_refused(portal: PrivateKey) -> None:
    other = PrivateKey.generate()
    lines = _journal([(_own(portal), portal), (_pin(portal), portal), (_pin(other), portal)])
    assert verify_journal(lines).size == 3
    edited = json.loads(lines[2])
    edited["event"]["purpose"] = "evidence-source"
    assert "signature does not verify" in _refused([lines[0], lines[1], canonical_text(edited)])
    assert "prev_hash" in _refused([lines[0], lines[2]]) or "seq" in _refused([lines[0], lines[2]])
    assert "seq" in _refused([lines[1]])
    assert "not strict JSON" in _refused([lines[0], lines[1][:-1]])
    # a line signed by a key that is not the active one, even with a valid signature of its own
    mallory = PrivateKey.generate()
    forged = build_line(seq=3, prev_hash=line_hash(json.loads(lines[2])), event=_pin(mallory), signer=mallory)
    assert "expected" in _refused([*lines, forged])


def test_the_anchor_is_the_private_key_the_portal_holds(portal: PrivateKey) -> None:
    mallory = PrivateKey.generate()
    honest = _journal([(_own(portal), portal)])
    assert verify_journal(honest, anchors=frozenset({portal.public_key.key_id})).active == portal.public_key.key_id
    # someone without the portal's key rotates "to" their own key: the line verifies, the anchor does not
    takeover = build_line(seq=1, prev_hash=line_hash(json.loads(honest[0])), event=_own(mallory), signer=mallory)
    assert verify_journal([*honest, takeover]).active == mallory.public_key.key_id
    assert "private material" in _refused([*honest, takeover], anchors=frozenset({portal.public_key.key_id}))
