"""The strict parse and step 5 after issue 15's profiling: the shortcuts skip work, never a check."""

from __future__ import annotations

import json

import pytest

from tests.kernel.test_chain_verifier import KEY, OTHER_KEY, fresh, verify
from verification.kernel.canonical import loads_strict
from verification.kernel.errors import StrictJSONError
from verification.kernel.reasons import Reason
from verification.kernel.verifier import StepStatus, TrustedKey


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "caf\u00e9 \ud800"}',  # non-ASCII text carrying a raw lone surrogate (str input)
        '{"caf\u00e9": 1, "\udfff": 2}',  # ... in a key
        '{"a": "plain ascii \\uDC00"}',  # ASCII text with an upper-case escape of a lone low surrogate
        '["\\u00e9", "\\ud83d"]',  # a harmless escape before the lone one
    ],
)
def test_lone_surrogates_still_refused(text: str) -> None:
    with pytest.raises(StrictJSONError) as caught:
        loads_strict(text)
    assert caught.value.reason is Reason.LONE_SURROGATE


def test_escapes_that_are_not_lone_surrogates_parse() -> None:
    assert loads_strict(b'["\\u00e9", "\\ud83d\\ude02", "\\\\ud800"]') == ["\u00e9", "\U0001f602", "\\ud800"]


def test_every_entry_under_a_mislabeled_key_is_refused_not_only_the_first() -> None:
    # The per-key lookup is remembered within one verification: the refusal must be too, for every entry.
    report = verify(fresh(), keys={KEY.public_key.key_id: TrustedKey(OTHER_KEY.public_key)})
    assert report.reason is Reason.UNKNOWN_KEY
    step5 = report.steps[5]
    assert step5.status is StepStatus.FAILED
    assert step5.entries and all(r.reason is Reason.UNKNOWN_KEY for r in step5.entries)


def test_bytes_round_trip_through_the_fast_path() -> None:
    proof = fresh()
    assert loads_strict(json.dumps(proof).encode("utf-8")) == proof
    assert loads_strict(json.dumps(proof, ensure_ascii=False).encode("utf-8")) == proof


@pytest.mark.parametrize(
    ("literal", "value"),
    [("999999999999999", 999999999999999), ("-999999999999999", -999999999999999),
     ("9007199254740991", 9007199254740991), ("-9007199254740991", -9007199254740991)],
)
def test_integers_up_to_the_safe_limit_parse(literal: str, value: int) -> None:
    assert loads_strict(f'{{"n": {literal}}}') == {"n": value}


@pytest.mark.parametrize("literal", ["9007199254740992", "-9007199254740992", "10000000000000000000", "1" * 5000])
def test_integers_past_the_safe_limit_are_refused(literal: str) -> None:
    with pytest.raises(StrictJSONError) as caught:
        loads_strict(f"[{literal}]")
    assert caught.value.reason is Reason.INTEGER_OUT_OF_RANGE


@pytest.mark.parametrize("text", ['{"a": 1, "b": 2, "a": 1}', '[{"x": {"y": 1, "y": 1}}]', '{"k": 1, "k": 2}'])
def test_repeated_keys_are_refused_at_any_depth(text: str) -> None:
    with pytest.raises(StrictJSONError) as caught:
        loads_strict(text)
    assert caught.value.reason is Reason.DUPLICATE_KEY


def test_a_bad_created_at_is_refused_every_time_it_is_met() -> None:
    # The check of a created_at text is remembered: a refusal must be remembered as a refusal.
    from tests.kernel.test_chain_verifier import assert_refused, resign_body

    for _ in range(2):
        proof = fresh()
        resign_body(proof["entries"][1], lambda b: b.update(created_at="2026-02-30T00:00:00Z"))
        assert_refused(verify(proof), Reason.MALFORMED_ENVELOPE, 2, 1)


@pytest.mark.parametrize(("name", "value"), [("key_id", "k\u00e9\ud800"), ("prev_hash", "\udc00"), ("algo", "\ud83d")])
def test_a_lone_surrogate_in_a_side_channel_field_is_malformed_proof(name: str, value: str) -> None:
    from tests.kernel.test_chain_verifier import assert_refused

    proof = fresh()
    proof["entries"][1][name] = value
    assert_refused(verify(proof), Reason.MALFORMED_PROOF, 0, 1)
