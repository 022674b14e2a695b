"""The reason-code registry is complete, well-formed and used (SPEC §11).

- every ``Reason`` has a one-line plain-language explanation, and codes are unique lowercase kebab-case;
- every code the SPEC names is registered (a new code in SPEC.md breaks this test until it is added to the registry);
- every code the SPEC names is asserted (in an ``assert`` statement) by at least one other test of the suite;
- no kernel module passes a bare string where a reason is expected.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import verification.kernel as kernel_package
from tests.conftest import vectors_required
from verification.kernel.errors import KernelError
from verification.kernel.reasons import EXPLANATIONS, Reason, explain, explain_if_registered, is_registered

REPO = Path(__file__).resolve().parents[2]
KERNEL_DIR = REPO / "verification" / "kernel"
TESTS_DIR = Path(__file__).resolve().parent

KEBAB = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

# The sections whose codes a decision function emits (the brief's "SPEC §2–6, 9, 10"); each code named there must
# also be asserted by a kernel test. §1, §7 and §8 name codes too: they must be registered and asserted as well.
DECISION_SECTIONS = (2, 3, 4, 5, 6, 9, 10)
OTHER_SECTIONS = (1, 7, 8)

# Backticked lowercase words in those sections that are *values or names*, not reason codes. Everything else
# backticked there is a code and must be a ``Reason`` value. Rules applied before this list (not listed here):
# verdicts are UPPERCASE (``PASS``), snake_case words are field names or seed values (``cannot_determine``,
# ``self_attested``, ``cited_support``, ``min_trust_tier``, ``rubric_hash``), dotted words are observables or
# file/function names (``evidence.content-digest``, ``manage.py``, ``json.dumps``), numbers (``0``) are values, and
# anything with a space or punctuation is an expression or a formula.
NON_CODES: dict[str, str] = {
    # criterion kinds (§5) and authorities (§1, §2)
    "digest": "criterion kind",
    "unchanged": "criterion kind",
    "semantic": "criterion kind / authority",
    "imported": "criterion kind / authority",
    "deterministic": "authority",
    "human": "authority",
    # determinations and lifecycle states (§3)
    "met": "determination",
    "partial": "determination",
    "running": "lifecycle status",
    "succeeded": "lifecycle status",
    "failed": "lifecycle status",
    # payload and rubric field names (§3, §4, §7, §8)
    "score": "payload field",
    "confidence": "payload field",
    "flagged": "payload field",
    "hard": "rubric field",
    "deadline": "rubric field",
    "kid": "JWK field",
    "x": "JWK field",
    "signature": "proof entry field",
    "envelope": "proof entry field",
    # evidence axis values (§4)
    "independent": "independence value",
    "derived": "independence value",
    "unknown": "axis value (independence, freshness, accessibility)",
    # receipt kinds (§7)
    "run": "receipt kind",
    "decision": "receipt kind",
    "result": "receipt kind",
    # wire constants, packages and key purposes (§7, §8)
    "null": "JSON literal",
    "ed25519": "algorithm name",
    "ed25519-": "key id prefix",
    "cryptography": "Python package",
    "proof-signing": "key purpose",
    "evidence-source": "key purpose",
}


# --- the registry itself ------------------------------------------------------------------------------------------


def test_every_reason_has_a_one_line_explanation_ending_with_a_period() -> None:
    assert set(EXPLANATIONS) == set(Reason), "every member has an explanation, and nothing else does"
    for reason in Reason:
        text = EXPLANATIONS[reason]
        assert isinstance(text, str) and text.strip(), reason
        assert text == text.strip(), f"{reason.value}: explanation has surrounding whitespace"
        assert "\n" not in text and "\r" not in text, f"{reason.value}: explanation is not one line"
        assert text.endswith("."), f"{reason.value}: explanation does not end with a period"
        assert explain(reason) == text and explain(reason.value) == text


def test_codes_are_lowercase_kebab_case() -> None:
    bad = [r.value for r in Reason if KEBAB.fullmatch(r.value) is None]
    assert bad == []


def test_no_two_members_share_a_value() -> None:
    # An Enum silently turns a repeated value into an alias: it shows in __members__ but not in iteration.
    assert len(Reason.__members__) == len(list(Reason))
    values = [r.value for r in Reason]
    assert len(values) == len(set(values))


def test_registration_lookups() -> None:
    assert is_registered("missing-baseline") and not is_registered("missing_baseline")
    assert not is_registered("") and not is_registered("MISSING-BASELINE")
    # reasons.explain documents KeyError for an unknown code, Reason(code) raises ValueError (see the report).
    with pytest.raises((KeyError, ValueError)):
        explain("no-such-code")


def test_explain_if_registered_is_explain_or_none() -> None:
    """The one lenient lookup the API's view and the portal's pages share (issue 12: it was written three times)."""
    assert explain_if_registered("missing-baseline") == explain(Reason.MISSING_BASELINE)
    assert explain_if_registered(Reason.MISSING_BASELINE) == explain(Reason.MISSING_BASELINE)
    for nothing in (None, "", "no-such-code", 0, "MISSING-BASELINE"):
        assert explain_if_registered(nothing) is None


# --- every code the SPEC names is registered (SPEC §11) -----------------------------------------------------------


def spec_sections(spec: str) -> dict[int, str]:
    """The text of each numbered section (``## N. Title``) of SPEC.md."""
    parts = re.split(r"^## (\d+)\.[^\n]*$", spec, flags=re.MULTILINE)
    sections = {int(parts[i]): parts[i + 1] for i in range(1, len(parts) - 1, 2)}
    assert sections, "SPEC.md has no '## N.' section headings"
    return sections


def backticked_words(text: str) -> set[str]:
    """Backticked lowercase words (starting with a letter; no spaces, punctuation or uppercase): candidate codes."""
    words = {m.group(1) for m in re.finditer(r"`([^`]+)`", text)}
    return {w for w in words if re.fullmatch(r"[a-z][a-z0-9._-]*", w)}


def codes_in(text: str) -> set[str]:
    """The reason codes named in ``text``: candidates minus snake_case, dotted names and the NON_CODES list."""
    return {w for w in backticked_words(text) if "_" not in w and "." not in w and w not in NON_CODES}


@pytest.fixture(scope="module")
def spec(vectors_dir: Path) -> dict[int, str]:
    path = vectors_dir.parent / "SPEC.md"
    if not path.is_file():
        reason = f"SPEC.md not found at {path} (it lives beside vectors/ in ../shared)"
        if vectors_required():
            pytest.fail(f"{reason}; under CI a missing SPEC is a failure")
        pytest.skip(reason)
    sections = spec_sections(path.read_text(encoding="utf-8"))
    missing = [n for n in (*DECISION_SECTIONS, *OTHER_SECTIONS) if n not in sections]
    assert missing == [], f"SPEC.md lost its sections {missing}"
    return sections


def decision_codes(spec: dict[int, str]) -> set[str]:
    return set().union(*(codes_in(spec[n]) for n in DECISION_SECTIONS))


def other_codes(spec: dict[int, str]) -> set[str]:
    return set().union(*(codes_in(spec[n]) for n in OTHER_SECTIONS))


def test_the_extraction_finds_the_codes_it_should(spec: dict[int, str]) -> None:
    # Guard against a parser that finds nothing and so proves nothing.
    codes = decision_codes(spec)
    assert {
        "missing-baseline",
        "authority-not-trusted-for-pass",
        "pending-expired",
        "worker-self-verification",
    } <= codes
    assert {"cannot_determine", "digest", "evidence.content-digest", "PASS"}.isdisjoint(codes)
    assert len(codes) >= 25
    assert {"broken-chain", "no-accepted-contract", "revoked-key"} <= other_codes(spec)


def test_a_new_code_in_the_spec_is_caught_until_registered() -> None:
    doc = (
        "# Title\n\n## 1. Actors\n`no-accepted-contract`\n\n## 2. Verdicts\n"
        "A `digest` check answers `PASS` or `cannot_determine`, reading `evidence.content-digest`;\n"
        "a brand-new rule refuses with `quota-exceeded` (and `missing-baseline`), or `x-y z`.\n"
        "## 3. Determinations\n`met`\n"
    )
    sections = spec_sections(doc)
    assert sorted(sections) == [1, 2, 3]
    assert codes_in(sections[2]) == {"quota-exceeded", "missing-baseline"}
    assert [c for c in sorted(codes_in(sections[2])) if not is_registered(c)] == ["quota-exceeded"]
    assert codes_in(sections[1]) == {"no-accepted-contract"} and codes_in(sections[3]) == set()


def test_the_non_code_list_hides_no_code_and_names_only_what_the_spec_says(spec: dict[int, str]) -> None:
    registered = {r.value for r in Reason}
    assert sorted(set(NON_CODES) & registered) == [], "a registered code must not be filtered out as a value"
    named = set().union(*(backticked_words(spec[n]) for n in (*DECISION_SECTIONS, *OTHER_SECTIONS)))
    assert sorted(set(NON_CODES) - named) == [], "stale NON_CODES entries: the SPEC no longer names them"


def test_every_code_of_the_decision_sections_is_registered(spec: dict[int, str]) -> None:
    unregistered = sorted(c for c in decision_codes(spec) if not is_registered(c))
    assert unregistered == [], f"SPEC names codes that reasons.Reason lacks: {unregistered}"


def test_every_code_of_sections_1_7_8_is_registered(spec: dict[int, str]) -> None:
    unregistered = sorted(c for c in other_codes(spec) if not is_registered(c))
    assert unregistered == [], f"SPEC names codes that reasons.Reason lacks: {unregistered}"


# --- every SPEC code is asserted by a test ---------------------------------------------------------------------------


def reason_attributes(tree: ast.AST) -> Iterator[str]:
    """The member names of every ``Reason.NAME`` reference in ``tree``."""
    for node in ast.walk(tree):
        is_reason = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Reason"
        # Reason.__members__ and the like are not members.
        if is_reason and isinstance(node, ast.Attribute) and not node.attr.startswith("__"):
            yield node.attr


def asserted_codes(tree: ast.AST) -> set[str]:
    """The codes an assertion of ``tree`` names: as ``Reason.NAME`` or as the code's own string.

    An assertion is an ``assert`` statement or a call of an ``assert_*`` helper (which asserts on its arguments). A
    mention elsewhere (a fixture, a comment, a parameter list nobody checks) does not count: a code is asserted only
    where a failing comparison would break the test.
    """
    values = {r.value for r in Reason}
    found: set[str] = set()
    for statement in ast.walk(tree):
        if not (isinstance(statement, ast.Assert) or _is_assert_helper_call(statement)):
            continue
        found |= {Reason[name].value for name in reason_attributes(statement) if name in Reason.__members__}
        found |= {
            node.value for node in ast.walk(statement) if isinstance(node, ast.Constant) and node.value in values
        }
    return found


def _is_assert_helper_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name.startswith("assert_")


def asserted_by_tests() -> dict[str, set[str]]:
    """Every code asserted by a test module of the whole suite (this module aside), with the modules asserting it."""
    refs: dict[str, set[str]] = {}
    for path in sorted(TESTS_DIR.parent.rglob("test_*.py")):
        if path.resolve() == Path(__file__).resolve():
            continue
        for code in asserted_codes(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            refs.setdefault(code, set()).add(str(path.relative_to(TESTS_DIR.parent)))
    return refs


def test_the_assertion_scan_counts_asserts_only() -> None:
    tree = ast.parse(
        "x = Reason.MISSING_BASELINE\n"
        "assert result.reason == Reason.STALE_CYCLE\n"
        "assert body['error']['code'] == 'not-task-owner'\n"
        "codes = ['revoked-key']\n"
        "assert_refused(report, Reason.BROKEN_CHAIN, 6, 1)\n"
        "refused(report, Reason.EMPTY_PROOF)\n"
    )
    assert asserted_codes(tree) == {"stale-cycle", "not-task-owner", "broken-chain"}


def test_every_spec_code_is_asserted_by_another_test(spec: dict[int, str]) -> None:
    refs = asserted_by_tests()
    codes = decision_codes(spec) | other_codes(spec)
    unasserted = sorted(c for c in codes if is_registered(c) and c not in refs)
    assert unasserted == [], f"no test (besides this one) asserts these codes in an assert statement: {unasserted}"


def test_every_reason_reference_in_kernel_and_tests_names_a_member() -> None:
    # A typo such as Reason.MISING_BASELINE would only fail when that line runs; catch it statically.
    members = set(Reason.__members__)
    unknown: list[str] = []
    for path in [*sorted(KERNEL_DIR.glob("*.py")), *sorted(TESTS_DIR.glob("*.py"))]:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        unknown += [f"{path.name}: Reason.{n}" for n in reason_attributes(tree) if n not in members]
    assert unknown == []


# --- no bare strings where a reason is expected ----------------------------------------------------------------------


@dataclass(frozen=True)
class ReasonParam:
    position: int | None  # positional index of the reason argument, None when keyword-only
    keyword: str


def reason_parameters() -> dict[str, set[ReasonParam]]:
    """Every kernel callable (function, dataclass, error class) with a parameter annotated ``Reason``, by name.

    Found by inspecting the imported modules, so a new one is covered without editing this test.
    """
    found: dict[str, set[ReasonParam]] = {}
    for info in pkgutil.iter_modules(kernel_package.__path__):
        module = importlib.import_module(f"{kernel_package.__name__}.{info.name}")
        for name, obj in vars(module).items():
            if getattr(obj, "__module__", None) != module.__name__ or not callable(obj):
                continue
            try:
                params = list(inspect.signature(obj).parameters.values())
            except (TypeError, ValueError):
                continue
            for index, param in enumerate(params):
                if re.search(r"\bReason\b", str(param.annotation)):
                    positional = param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD)
                    found.setdefault(name, set()).add(ReasonParam(index if positional else None, param.name))
    # dataclasses.replace(check, reason=...) sets a reason too.
    found.setdefault("replace", set()).add(ReasonParam(None, "reason"))
    return found


def _is_text(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(node, ast.JoinedStr)


def _callee(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


@dataclass(frozen=True)
class Scan:
    bare: list[str]
    calls: dict[str, int]


def scan(source: str, filename: str, params: dict[str, set[ReasonParam]]) -> Scan:
    """Calls that pass a string literal as a reason, and how many calls of each reason-taking name were seen."""
    bare: list[str] = []
    calls: dict[str, int] = {}
    for node in ast.walk(ast.parse(source, filename=filename)):
        if not isinstance(node, ast.Call):
            continue
        name = _callee(node)
        if name is None:
            continue
        if name == "Reason" and node.args and _is_text(node.args[0]):
            # Reason("some-code") spells a code as text instead of naming the member.
            bare.append(f"{filename}:{node.lineno}: Reason({ast.unparse(node.args[0])})")
            continue
        if name not in params:
            continue
        calls[name] = calls.get(name, 0) + 1
        for spec in params[name]:
            args: list[ast.expr] = []
            if spec.position is not None and len(node.args) > spec.position:
                args.append(node.args[spec.position])
            args += [kw.value for kw in node.keywords if kw.arg == spec.keyword]
            bare += [f"{filename}:{node.lineno}: {name}(... {ast.unparse(a)} ...)" for a in args if _is_text(a)]
    return Scan(bare, calls)


@pytest.fixture(scope="module")
def params() -> dict[str, set[ReasonParam]]:
    return reason_parameters()


def test_the_scanner_knows_the_reason_taking_callables(params: dict[str, set[ReasonParam]]) -> None:
    assert ReasonParam(3, "reason") in params["Check"]
    assert ReasonParam(1, "reason") in params["RailRefusal"]
    assert ReasonParam(1, "reason") in params["to_unknown"]
    # Only the kernel's own error classes: the Django layer subclasses KernelError too (e.g. ServiceError).
    error_classes = [c.__name__ for c in KernelError.__subclasses__() if c.__module__.startswith("verification.kernel")]
    assert {"InvariantError", "RubricError", "DecisionRefused", "StrictJSONError"} <= set(error_classes)
    for name in ["KernelError", *error_classes]:
        assert ReasonParam(0, "reason") in params[name], name


def test_the_scanner_catches_bare_strings(params: dict[str, set[ReasonParam]]) -> None:
    planted = """
Check("c1", Authority.DETERMINISTIC, Verdict.UNKNOWN, "missing-baseline")
Check("c1", Authority.DETERMINISTIC, Verdict.UNKNOWN, reason=f"{code}")
InvariantError("malformed-record", "detail")
errors.RubricError(reason="malformed-rubric")
RailRefusal(1, "worker-self-verification")
to_unknown(check, "below-trust-tier", "ev-1")
replace(check, verdict=Verdict.UNKNOWN, reason="evidence-redacted")
Reason("pending-expired")
Check("c1", Authority.DETERMINISTIC, Verdict.UNKNOWN, Reason.MISSING_BASELINE, detail="fine")
to_unknown(check, Reason.BELOW_TRUST_TIER, "a detail string is fine")
InvariantError(Reason.MALFORMED_RECORD, "so is this one")
"""
    found = scan(planted, "planted.py", params).bare
    assert [line.split(":")[1] for line in found] == ["2", "3", "4", "5", "6", "7", "8", "9"]


def test_no_kernel_module_passes_a_bare_string_as_a_reason(params: dict[str, set[ReasonParam]]) -> None:
    bare: list[str] = []
    calls: dict[str, int] = {}
    for path in sorted(KERNEL_DIR.glob("*.py")):
        result = scan(path.read_text(encoding="utf-8"), f"verification/kernel/{path.name}", params)
        bare += result.bare
        for name, count in result.calls.items():
            calls[name] = calls.get(name, 0) + count
    assert bare == [], "pass a Reason member, never its text:\n" + "\n".join(bare)
    # The scan really looked at the calls that matter.
    for name in ("Check", "InvariantError", "RubricError", "RailRefusal", "to_unknown", "DecisionRefused"):
        assert calls.get(name, 0) > 0, f"no call of {name} was scanned"


def _returns_reason(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return node.returns is not None and re.search(r"\bReason\b", ast.unparse(node.returns)) is not None


def test_no_kernel_function_returns_a_bare_string_as_a_reason() -> None:
    bare: list[str] = []
    for path in sorted(KERNEL_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and _returns_reason(fn):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Return) and node.value is not None and _is_text(node.value):
                        bare.append(f"{path.name}:{node.lineno}: {fn.name} returns {ast.unparse(node.value)}")
    assert bare == []
