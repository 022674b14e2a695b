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
