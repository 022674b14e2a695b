"""The API's JSON renderer: DRF's ``JSONRenderer``, which also serves a document already written as JSON text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rest_framework.renderers import JSONRenderer


@dataclass(frozen=True)
class JSONText:
    """A document already written as compact JSON text, as ``json.dumps(..., separators=(",", ":"),
    ensure_ascii=False)`` writes it (``kernel.chain.proof_json``)."""

    text: str


class ApiJSONRenderer(JSONRenderer):
    """``JSONRenderer``; given a ``JSONText``, the bytes ``JSONRenderer`` would write for the parsed document, without
    parsing it: the text as it is, with U+2028 and U+2029 escaped as ``JSONRenderer.render`` escapes them after
    ``json.dumps`` (so the answer stays a strict JavaScript subset). With an ``indent`` asked for in ``Accept`` (or
    another layout configured), the document is parsed and written again."""

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Mapping[str, Any] | None = None
    ) -> bytes:
        if not isinstance(data, JSONText):
            return super().render(data, accepted_media_type, renderer_context)
        indent = self.get_indent(accepted_media_type, renderer_context or {})
        if indent is not None or not self.compact or self.ensure_ascii:
            return super().render(json.loads(data.text), accepted_media_type, renderer_context)
        return data.text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()
