"""STYLE.md's arrows point one way, api -> domain: the domain's submission type and the services that take it never
import ``verification.api`` (issue 13's back-edge, inverted: the API's serializers build a ``Submission`` and the
app's composition root hands their parser to the domain)."""

from __future__ import annotations

from typing import Any

import grimp
import pytest

from verification.api.serializers.submissions import submission_from_body
from verification.runs import submissions

DOMAIN = tuple(
    f"verification.{feature}" for feature in ("actors", "runs", "evidence", "reviews", "trust", "records", "models")
)


def test_no_domain_module_reaches_the_api() -> None:
    graph = grimp.build_graph("verification")
    importers = graph.find_downstream_modules("verification.api", as_package=True)  # directly or through others
    assert importers  # the graph sees the API's importers (the app's root, the URLs)
    assert sorted(m for m in importers if m.startswith(DOMAIN)) == []


def test_the_app_installs_the_apis_parser_and_a_missing_one_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert submissions._parser is submission_from_body
    monkeypatch.setattr(submissions, "_parser", None)
    with pytest.raises(RuntimeError, match="no submission parser"):
        submissions.submission_of({"evidence": []})
    built: Any = submissions.build({}, bindings=[])
    assert submissions.submission_of(built) is built  # a Submission passes as it is, parser or not
