"""``validated_data_of``: one bound serializer per class and thread, reused (issue 15), must validate every body
exactly as a new serializer does: the same values, the same refusals, nothing carried over from the call before."""

from __future__ import annotations

import base64
import threading
import uuid
from typing import Any

import pytest
from rest_framework.exceptions import ValidationError

from verification.api.serializers import base
from verification.api.serializers.base import validated_data_of
from verification.api.serializers.submissions import VerificationRequestSerializer

NOTES = base64.b64encode(b"notes v1\n").decode("ascii")


def _body(**extra: Any) -> dict[str, Any]:
    return {"task": "in-process", "evidence": [{"symbol": "notes", "content_base64": NOTES}], **extra}


def _fresh(data: Any) -> dict[str, Any]:
    serializer = VerificationRequestSerializer(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _refusal(data: Any) -> Any:
    with pytest.raises(ValidationError) as caught:
        validated_data_of(VerificationRequestSerializer, data)
    return caught.value.detail


BODIES = [
    _body(),
    _body(wait_ms=250),
    {
        "task": "in-process",
        "evidence": [{"symbol": "a", "content_base64": NOTES}, {"symbol": "b", "content_base64": ""}],
    },
]
BAD_BODIES = [
    _body(surprise=1),  # unknown-field
    {"task": "in-process", "evidence": [{"symbol": "notes", "content_base64": "not base64!"}]},
    {
        "task": "in-process",
        "evidence": [{"symbol": "x", "content_base64": NOTES}, {"symbol": "x", "content_base64": NOTES}],
    },
    [],
]


def test_reused_serializer_gives_a_fresh_serializers_values_in_any_order() -> None:
    for data in BODIES + BODIES[::-1]:
        assert validated_data_of(VerificationRequestSerializer, data) == _fresh(data)


def test_refusals_are_a_fresh_serializers_and_carry_nothing_over() -> None:
    for bad in BAD_BODIES:
        fresh = VerificationRequestSerializer(data=bad)
        assert not fresh.is_valid()
        assert _refusal(bad) == fresh.errors
        # the call after a refusal validates its own body: no errors or values left from the one before
        assert validated_data_of(VerificationRequestSerializer, BODIES[0]) == _fresh(BODIES[0])
        assert _refusal(bad) == fresh.errors


def test_the_kept_instance_holds_no_body_between_calls() -> None:
    validated_data_of(VerificationRequestSerializer, _body())
    kept = base._REUSED.idle[VerificationRequestSerializer]
    assert not {"initial_data", "_validated_data", "_errors", "_data"} & set(kept.__dict__)
    assert validated_data_of(VerificationRequestSerializer, _body()) == _fresh(_body())
    assert base._REUSED.idle[VerificationRequestSerializer] is kept  # reused, not rebuilt


def test_each_thread_validates_with_its_own_instance() -> None:
    seen: list[int] = []
    results: list[bool] = []

    def work(symbol: str) -> None:
        data = {"task": "in-process", "evidence": [{"symbol": symbol, "content_base64": NOTES}]}
        for _ in range(50):
            got = validated_data_of(VerificationRequestSerializer, data)
            results.append(got["evidence"][0]["symbol"] == symbol)
        seen.append(id(base._REUSED.idle[VerificationRequestSerializer]))

    threads = [threading.Thread(target=work, args=(f"s{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results and all(results)
    assert len(set(seen)) == 4


def test_a_nested_call_builds_its_own_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    """A validator that validates another body of the same class meanwhile (the kept instance is in use) must not
    share it."""
    inner: list[dict[str, Any]] = []
    entered: list[bool] = []
    original = VerificationRequestSerializer.validate

    def validate(self: Any, attrs: Any) -> Any:
        if not entered:
            entered.append(True)
            inner.append(validated_data_of(VerificationRequestSerializer, BODIES[1]))
        return original(self, attrs)

    monkeypatch.setattr(VerificationRequestSerializer, "validate", validate)
    outer = validated_data_of(VerificationRequestSerializer, BODIES[0])
    assert inner[0]["wait_ms"] == 250
    assert "wait_ms" not in outer


def test_represented_gives_a_fresh_serializers_data_and_keeps_no_instance() -> None:
    from verification.api.serializers.base import represented
    from verification.api.serializers.verifications import VerificationResponseSerializer

    base_view = {name: None for name in VerificationResponseSerializer().fields}
    first = {
        **base_view,
        "id": uuid.UUID(int=1),
        "status": "queued",
        "flagged": False,
        "submission_hash": "s",
        "proof_ref": "p",
        "verdict": {"results": []},
        "rubric_hash": "r",
        "submitted_at": "t",
        "attempts": 0,
        "awaiting_evidence": False,
        "human_decided": False,
        "claims": [],
        "score": 1.0,
    }
    second = {**first, "id": uuid.UUID(int=2), "flagged": True, "flag_reason": "why", "attempts": 2, "score": None}
    for view in (first, second, first):
        assert represented(VerificationResponseSerializer, view) == dict(VerificationResponseSerializer(view).data)
    kept = base._REUSED.idle[VerificationResponseSerializer]
    assert kept.instance is None and "_data" not in kept.__dict__
