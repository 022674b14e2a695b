"""``chain.proof_json``: the proof document written as text, character for character what ``json.dumps`` writes."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from verification.kernel.chain import proof_document, proof_json, wire_entries

#: Any text, including quotes, backslashes, control characters, non-ASCII, U+2028/U+2029 and lone surrogates.
TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40)
#: What a stored column could hold: its own type, and others (a tampered or odd row is written as json.dumps would).
NUMBER = st.one_of(st.integers(-(2**60), 2**60), st.floats(allow_nan=False, allow_infinity=False))
VALUE = st.one_of(TEXT, st.none(), NUMBER, st.booleans())
ROW = st.tuples(st.integers(0, 10**6), VALUE, VALUE, VALUE, VALUE, VALUE)


def _dumps(document: Any) -> str:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(ROW, max_size=6), TEXT, TEXT)
def test_the_text_is_what_json_dumps_writes_for_the_document(rows: list[tuple[Any, ...]], vid: str, head: str) -> None:
    document = proof_document(verification_id=vid, entries=wire_entries(rows), proof_head_hash=head)
    assert proof_json(verification_id=vid, rows=rows, proof_head_hash=head) == _dumps(document)


def test_a_stored_envelope_is_escaped_as_a_json_string() -> None:
    envelope = '{"a":"line\u2028sep \\\\ caf\u00e9 \x00 \ud83d\ude02"}'
    rows = [(0, "ed25519-0123456789abcdef", None, "a" * 64, "c2ln", envelope)]
    text = proof_json(verification_id="v", rows=rows, proof_head_hash="a" * 64)
    assert json.loads(text)["entries"][0]["envelope"] == envelope
    assert '"prev_hash":null' in text and '"seq":0,' in text
