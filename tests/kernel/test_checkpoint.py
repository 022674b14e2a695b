"""The checkpoint line format (``kernel.checkpoint``) and the strict log-line parser it shares with the pin journal
(``kernel.loglines``): a signed line round-trips; anything else is ``malformed-checkpoint`` or fails to verify."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from verification.kernel.canonical import canonical_text
from verification.kernel.checkpoint import (
    CheckpointRefused,
    parse_checkpoint,
    sign_checkpoint,
    verify_checkpoint,
)
from verification.kernel.errors import KernelError
from verification.kernel.keys import PrivateKey
from verification.kernel.loglines import parse_fields_line
from verification.kernel.reasons import Reason

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _signed() -> tuple[PrivateKey, str]:
    key = PrivateKey.generate()
    return key, sign_checkpoint(private_key=key, tree_size=7, root_hash="ab" * 32, timestamp=WHEN).as_line()


def test_a_signed_line_round_trips_and_verifies() -> None:
    key, line = _signed()
    parsed = parse_checkpoint(line, line=3)
    assert (parsed.tree_size, parsed.root_hash, parsed.line, parsed.root_bytes) == (7, "ab" * 32, 3, b"\xab" * 32)
    assert parsed.as_line() == line
    assert verify_checkpoint(parsed, key.public_key)


@pytest.mark.parametrize(
    "change",
    [
        {"tree_size": -1},
        {"tree_size": True},
        {"tree_size": "7"},
        {"root_hash": "AB" * 32},
        {"root_hash": "ab" * 31},
        {"format": "acretix-verify/checkpoint/2"},
        {"key_id": 5},
        {"signature": None},
    ],
)
def test_a_field_of_the_wrong_form_is_malformed(change: dict[str, object]) -> None:
    _, line = _signed()
    with pytest.raises(CheckpointRefused) as refused:
        parse_checkpoint(canonical_text({**json.loads(line), **change}), line=2)
    assert refused.value.reason is Reason.MALFORMED_CHECKPOINT
    assert refused.value.detail.startswith("line 2: ")


@pytest.mark.parametrize("text", ["{", "[]", '{"format": "x"}', '{"a": 1, "a": 2}'])
def test_a_line_that_is_not_the_six_fields_is_malformed(text: str) -> None:
    with pytest.raises(CheckpointRefused) as refused:
        parse_checkpoint(text)
    assert refused.value.reason is Reason.MALFORMED_CHECKPOINT


def test_extra_and_missing_fields_are_refused_by_the_shared_parser() -> None:
    def refuse(detail: str) -> KernelError:
        return KernelError(Reason.MALFORMED_CHECKPOINT, detail)

    assert parse_fields_line('{"b": 1, "a": 2}', ("a", "b"), where="line 1", refuse=refuse) == {"a": 2, "b": 1}
    for text in ('{"a": 2}', '{"a": 2, "b": 1, "c": 0}'):
        with pytest.raises(KernelError, match="line 1: expected exactly the fields"):
            parse_fields_line(text, ("a", "b"), where="line 1", refuse=refuse)
    with pytest.raises(KernelError, match="line 1: not strict JSON"):
        parse_fields_line("{'a': 1}", ("a",), where="line 1", refuse=refuse)


def test_a_signature_that_is_not_base64_or_by_another_key_does_not_verify() -> None:
    key, line = _signed()
    parsed = parse_checkpoint(line)
    assert not verify_checkpoint(
        parse_checkpoint(canonical_text({**json.loads(line), "signature": "!!"})), key.public_key
    )
    assert not verify_checkpoint(parsed, PrivateKey.generate().public_key)
