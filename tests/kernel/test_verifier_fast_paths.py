"""The strict parse and step 5 after issue 15's profiling: the shortcuts skip work, never a check."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kernel.test_chain_verifier import KEY, OTHER_KEY, assert_refused, fresh, verify
from verification.kernel.canonical import loads_strict
from verification.kernel.chain import decode_signature
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
    [
        ("999999999999999", 999999999999999),
        ("-999999999999999", -999999999999999),
        ("9007199254740991", 9007199254740991),
        ("-9007199254740991", -9007199254740991),
    ],
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


# --- after the chain-verification profile (issue 15: fetch + verify <= 1.3 x bare Ed25519) -------------------------


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _reference_decode_signature(text: str) -> bytes | None:
    """The definition decode_signature had before it was made of two binascii calls."""
    import binascii

    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if base64.b64encode(raw).decode("ascii") == text else None


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="AQgwBaz09+/=\n \u00e9-_", max_size=12) | st.binary(max_size=70).map(_b64))
def test_decode_signature_accepts_exactly_the_canonical_base64(text: str) -> None:
    assert decode_signature(text) == _reference_decode_signature(text)


@pytest.mark.parametrize("value", [b"AAAA", None, 64, ["AAAA"]])
def test_decode_signature_refuses_what_is_not_a_string(value: Any) -> None:
    assert decode_signature(value) is None


def test_a_valid_non_ascii_side_channel_string_passes_step_0_and_is_judged_later() -> None:
    from tests.kernel.test_chain_verifier import assert_refused

    proof = fresh()
    proof["entries"][1]["key_id"] = "cl\u00e9"  # UTF-8 encodable: well-formed, but not the signed key id
    assert_refused(verify(proof), Reason.ENVELOPE_MISMATCH, 4, 1)


def test_a_string_subclass_is_a_string() -> None:
    class Text(str):
        pass

    proof = fresh()
    for entry in proof["entries"]:
        for name in ("key_id", "algo", "format", "content_hash", "signature"):
            entry[name] = Text(entry[name])
    assert verify(proof).ok


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"signature": 1, "algo": None}, "algo"),  # the first wrong field in wire order is the one named
        ({"content_hash": ["x"], "envelope": 3}, "content_hash"),
        ({"envelope": {}}, "envelope"),
        ({"format": "\ud800", "signature": 2}, "format"),
    ],
)
def test_step_0_names_the_first_wrong_wire_string(changes: dict[str, Any], named: str) -> None:
    from tests.kernel.test_chain_verifier import assert_refused

    proof = fresh()
    proof["entries"][1].update(changes)
    report = verify(proof)
    assert_refused(report, Reason.MALFORMED_PROOF, 0, 1)
    assert report.detail.startswith(named + " ")


def test_passing_results_follow_the_sorted_order_after_a_failure_in_a_later_step() -> None:
    # The "ok" results are made once and re-ordered after step 1: in a failing step, every other entry's result
    # carries its own seq and array index, in seq order.
    proof = fresh()
    proof["entries"].reverse()
    count = len(proof["entries"])
    proof["entries"][0]["algo"] = "rsa"  # the last seq, first in the array: a side-channel mismatch (step 4)
    report = verify(proof)
    assert report.failed_step == 4 and report.failed_seq == count - 1
    step4 = report.steps[4]
    assert [r.seq for r in step4.entries] == list(range(count))
    assert [r.index for r in step4.entries] == list(range(count - 1, -1, -1))
    assert [r.ok for r in step4.entries] == [True] * (count - 1) + [False]
    assert all(step.entries[i] == step4.entries[i] for step in report.steps[1:4] for i in range(count - 1))
    assert [r.index for r in report.steps[0].entries] == list(range(count))  # step 0 reports in array order


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("as_bytes", [True, False])
def test_the_cyclic_collector_pauses_during_a_verification_and_is_left_as_it_was(
    monkeypatch: pytest.MonkeyPatch, enabled: bool, as_bytes: bool
) -> None:
    import gc

    from tests.kernel.test_chain_verifier import EXPECTED
    from verification.kernel import verifier

    seen: list[bool] = []
    step3 = verifier.step3_format

    def observed(work: Any) -> None:
        seen.append(gc.isenabled())
        step3(work)

    monkeypatch.setattr(verifier, "step3_format", observed)
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        proof = fresh()
        if as_bytes:
            report = verifier.verify_proof_bytes(json.dumps(proof).encode(), **EXPECTED)
        else:
            report = verifier.verify_report(proof, **EXPECTED)
        after = gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert report.ok
    assert seen and not any(seen)  # paused while the steps ran
    assert after is enabled


def test_the_collector_comes_back_when_a_verification_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from tests.kernel.test_chain_verifier import EXPECTED
    from verification.kernel import verifier

    def broken(work: Any) -> None:
        raise RuntimeError("a bug, not a refusal")

    monkeypatch.setattr(verifier, "step3_format", broken)
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        verifier.verify_report(fresh(), **EXPECTED)
    assert gc.isenabled()


@pytest.mark.parametrize(
    "promote_after, own_frozen, promoted",
    [
        (0, 0, True),  # many containers made: moved to the oldest generation without the young pass
        (0, 3, False),  # the process froze objects of its own: gc.unfreeze would release them, so not
        (None, 0, False),  # a short proof: the usual young collection
    ],
)
def test_containers_of_a_long_verification_skip_the_young_pass(
    monkeypatch: pytest.MonkeyPatch, promote_after: int | None, own_frozen: int, promoted: bool
) -> None:
    import gc

    from tests.kernel.test_chain_verifier import EXPECTED
    from verification.kernel import verifier

    calls: list[str] = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
    monkeypatch.setattr(gc, "get_freeze_count", lambda: own_frozen)
    if promote_after is not None:
        monkeypatch.setattr(verifier, "_PROMOTE_AFTER", promote_after)
    assert gc.isenabled()
    report = verifier.verify_report(fresh(), **EXPECTED)
    assert report.ok
    assert gc.isenabled()
    assert calls == (["freeze", "unfreeze"] if promoted else [])


def test_promoting_leaves_nothing_frozen() -> None:
    import gc

    from tests.kernel.test_chain_verifier import EXPECTED
    from verification.kernel import verifier

    before = gc.get_freeze_count()
    assert before == 0
    garbage = [[] for _ in range(verifier._PROMOTE_AFTER + 1)]  # counted by the collector while it is paused below
    with verifier._cyclic_gc_paused():
        garbage += [[] for _ in range(verifier._PROMOTE_AFTER + 1)]
        assert gc.get_count()[0] > verifier._PROMOTE_AFTER
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()
    assert verifier.verify_report(fresh(), **EXPECTED).ok


def test_stored_columns_make_the_same_proof_as_the_checked_entries() -> None:
    # proof_for builds the wire entries straight from the stored columns (wire_entries), no Entry in between.
    from tests.kernel.test_chain_verifier import CHAIN, HEAD, PROOF, VID
    from verification.kernel.chain import WIRE_COLUMNS, proof_document, wire_entries

    rows = [tuple(getattr(entry, column) for column in WIRE_COLUMNS) for entry in CHAIN]
    entries = wire_entries(rows)
    assert entries == [entry.as_json() for entry in CHAIN]
    assert json.dumps(proof_document(verification_id=VID, entries=entries, proof_head_hash=HEAD)) == json.dumps(PROOF)


def _counting_verifies(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Record the message of every Ed25519 verification the public keys make."""
    from verification.kernel.keys import PublicKey

    made: list[bytes] = []
    real = PublicKey.verified_prefix  # ``verify`` checks one pair through it

    def counted(self: PublicKey, pairs: Any) -> int:
        pairs = list(pairs)
        verified = real(self, pairs)
        tried = pairs[: verified + 1]  # the loop stops at the first that does not verify
        made.extend(message for _, message in tried)
        return verified

    monkeypatch.setattr(PublicKey, "verified_prefix", counted)
    return made


def test_a_chain_under_one_key_is_verified_in_one_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The usual proof, every entry under one pinned key: one ``verified_prefix`` call over every signature."""
    from verification.kernel.keys import PublicKey

    calls: list[int] = []
    real = PublicKey.verified_prefix

    def counted(self: PublicKey, pairs: Any) -> int:
        pairs = list(pairs)
        calls.append(len(pairs))
        return real(self, pairs)

    monkeypatch.setattr(PublicKey, "verified_prefix", counted)
    proof = fresh()
    assert verify(proof).ok
    assert calls == [len(proof["entries"])]


def test_a_chain_under_two_pinned_keys_is_verified_entry_by_entry() -> None:
    """Entries signed under two keys (a rotation) take step 5 entry by entry: with both pinned the proof verifies;
    with one revoked, each entry under it is refused and the others pass."""
    from tests.kernel.test_chain_verifier import resign_body

    proof = fresh()
    last = len(proof["entries"]) - 1  # re-signing the last entry leaves the chain's links as they were
    resign_body(proof["entries"][last], lambda b: b.update(key_id=OTHER_KEY.public_key.key_id), OTHER_KEY)
    both = {
        KEY.public_key.key_id: TrustedKey(KEY.public_key),
        OTHER_KEY.public_key.key_id: TrustedKey(OTHER_KEY.public_key),
    }
    head = proof["entries"][-1]["content_hash"]
    proof["proof_head_hash"] = head
    assert verify(proof, keys=both, head=head).ok
    revoked = {**both, OTHER_KEY.public_key.key_id: TrustedKey(OTHER_KEY.public_key, revoked=True)}
    report = verify(proof, keys=revoked, head=head)
    assert_refused(report, Reason.REVOKED_KEY, 5, last)
    assert [r.reason for r in report.steps[5].entries] == [None] * last + [Reason.REVOKED_KEY]


def test_one_pass_then_step_by_step_verifies_each_signature_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every entry fails step 8 (the signed submission hash is not the expected one): the pass over the cheap checks
    # stops at the first entry, before any signature is verified; the steps then run one by one, and step 5 verifies
    # each signature once.
    made = _counting_verifies(monkeypatch)
    proof = fresh()
    report = verify(proof, sub="9" * 64)
    assert_refused(report, Reason.SUBJECT_MISMATCH, 8, 0)
    assert [r.ok for r in report.steps[8].entries] == [False] * len(proof["entries"])
    assert len(made) == len(proof["entries"]) == len(set(made))


def test_a_failing_signature_is_found_by_step_5_with_every_other_entry_passing(monkeypatch: pytest.MonkeyPatch) -> None:
    made = _counting_verifies(monkeypatch)
    proof = fresh()
    count = len(proof["entries"])
    proof["entries"][1]["signature"] = proof["entries"][0]["signature"]  # well-formed, but not over entry 1
    report = verify(proof)
    assert_refused(report, Reason.SIGNATURE_FAILURE, 5, 1)
    assert [r.ok for r in report.steps[5].entries] == [True, False] + [True] * (count - 2)
    # Entry 0 once (the pass), entry 1 twice (the pass stopped there, then step 5 found it), every later one once.
    assert len(made) == count + 1
    assert made.count(made[1]) == 2


def test_a_proof_that_passes_records_every_entry_in_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    made = _counting_verifies(monkeypatch)
    proof = fresh()
    report = verify(proof)
    assert report.ok
    assert len(made) == len(proof["entries"])
    per_entry_steps = [step for step in report.steps if step.number != 7]
    for step in per_entry_steps:
        assert step.status is StepStatus.PASSED
        assert [(r.seq, r.ok) for r in step.entries] == [(seq, True) for seq in range(len(proof["entries"]))]
