"""The rules a submission's or a delivered result's body must meet that are not about wire shape (SPEC §1, §2).

The wire shape is checked once, by the API's serializers (``verification.runs.submissions`` holds the typed result);
what is left here is who may author which result and what an imported result may say, shared by ``submit`` and
``results``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from verification.actors.models import Actor, ActorKind
from verification.errors import ServiceError
from verification.kernel.criteria import Criterion, CriterionKind
from verification.kernel.reasons import Reason
from verification.kernel.verdicts import Verdict

#: The fields of a delivered imported result (``result_deliver``); anything else is ``unknown-field``.
RESULT_FIELDS: Final = frozenset({"criterion", "verdict", "detail", "evidence", "authority", "claims"})


#: What an imported result may say (never MISMATCH: only the oracle seam authors one, SPEC §2).
IMPORTED_VERDICTS: Final = frozenset({Verdict.PASS, Verdict.FAIL, Verdict.UNKNOWN, Verdict.NOT_RUN})


def invalid(detail: str, **details: Any) -> ServiceError:
    return ServiceError(Reason.INVALID_REQUEST, detail, details=details)


def unknown_fields(entry: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(str(k) for k in entry if k not in allowed)
    if unknown:
        raise ServiceError(Reason.UNKNOWN_FIELD, f"{where}: unknown fields {unknown}", details={"fields": unknown})


def refuse_mismatch(results: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    """SPEC §2: only the oracle seam authors MISMATCH; an imported result cannot bring one (a rule, not a shape)."""
    for index, (_, entry) in enumerate(results):
        if entry.get("verdict") == Verdict.MISMATCH.value:
            raise ServiceError(
                Reason.MISMATCH_NOT_FROM_ORACLE, f"results[{index}]: an imported result cannot be MISMATCH", status=422
            )


def check_imported_body(entry: Mapping[str, Any], where: str) -> None:
    verdict = entry.get("verdict")
    if verdict == Verdict.MISMATCH.value:
        # SPEC §2: only the oracle seam authors MISMATCH; an imported result cannot bring one.
        raise ServiceError(
            Reason.MISMATCH_NOT_FROM_ORACLE, f"{where}: an imported result cannot be MISMATCH", status=422
        )
    if not isinstance(verdict, str) or verdict not in {v.value for v in IMPORTED_VERDICTS}:
        raise invalid(f"{where}.verdict is one of {sorted(v.value for v in IMPORTED_VERDICTS)}")
    if "detail" in entry and not isinstance(entry["detail"], str):
        raise invalid(f"{where}.detail is text")
    cited = entry.get("evidence", [])
    if not isinstance(cited, list) or not all(isinstance(s, str) for s in cited):
        raise invalid(f"{where}.evidence is a list of bound symbols")


def _expected_author(kind: CriterionKind) -> ActorKind:
    return ActorKind.SEMANTIC_WORKER if kind is CriterionKind.SEMANTIC else ActorKind.EXTERNAL_VERIFIER


def check_author(actor: Actor, criterion: Criterion | None, criterion_id: str, *, kind: CriterionKind) -> None:
    """SPEC §1: a semantic judgment comes from a semantic worker's token, an imported result from an external
    verifier's; the criterion must be of that kind in the contract."""
    if actor.kind != _expected_author(kind):
        raise ServiceError(
            Reason.ACTOR_CANNOT_AUTHOR_RESULT,
            f"a {actor.kind} cannot deliver a {kind.value} result",
            status=403,
        )
    if criterion is not None and criterion.kind is not kind:
        raise invalid(f"criterion {criterion_id!r} is not a {kind.value} criterion of the contract")
