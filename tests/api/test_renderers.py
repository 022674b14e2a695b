"""``ApiJSONRenderer``: a document already written as JSON text is served as DRF's renderer would write it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.renderers import JSONRenderer

from verification.api.renderers import ApiJSONRenderer, JSONText

DOCUMENTS: list[Any] = [
    {"entries": [{"seq": 0, "envelope": '{"a":"line\u2028sep\u2029para"}', "prev_hash": None}], "x": "caf\u00e9"},
    {"quote": '"\\', "control": "\x00\x1f\t", "emoji": "\U0001f600", "n": [1, -2, 2**53 - 1], "t": True},
    [],
]


@pytest.mark.parametrize("document", DOCUMENTS)
@pytest.mark.parametrize("accepted", [None, "application/json", "application/json; indent=2"])
def test_the_text_renders_to_the_bytes_of_the_document(document: Any, accepted: str | None) -> None:
    text = JSONText(json.dumps(document, separators=(",", ":"), ensure_ascii=False))
    expected = JSONRenderer().render(document, accepted, {})
    assert ApiJSONRenderer().render(text, accepted, {}) == expected
    assert ApiJSONRenderer().render(document, accepted, {}) == expected  # anything else: JSONRenderer itself


def test_line_and_paragraph_separators_are_escaped() -> None:
    rendered = ApiJSONRenderer().render(JSONText('{"a":"x\u2028y\u2029z"}'))
    assert rendered == b'{"a":"x\\u2028y\\u2029z"}'
