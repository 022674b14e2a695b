"""Golden receipt envelopes (issue 15): the pipeline may get faster, never different.

A fixed set of submissions — every verdict (PASS, FAIL, MISMATCH, UNKNOWN, NOT_RUN, PENDING), the rail refusals
(self-verification, verifier-authored work, shared execution boundary, producer-declared and producer-reported
change manifests, baselines not independent or captured after the work started, no accepted contract, imported
PASS), every evidence kind (inline, by id, collector-admitted, source-signed under a pinned key, as manifest, gone
bytes, changed bytes, redacted, stale) and claims (match and contradicted) — is run with a fixed clock, a fixed
signing key and deterministic ids, and every receipt envelope it produces must equal, byte for byte, the one
recorded in ``golden/receipt_envelopes.json`` before the pipeline was optimised.

Regenerate (only for a deliberate change of the receipt format, never to make an optimisation pass):
``REVIEWPORTAL_REGENERATE_GOLDEN=1 .venv/bin/python -m pytest tests/verification/test_golden_envelopes.py``.
"""

from __future__ import annotations

import itertools
import json
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.db import models

from tests.verification.service_world import (
    CONFIG_AFTER,
    CONFIG_BEFORE,
    LOG,
    MANIFEST,
    NOTES,
    NOTES_DIGEST,
    OTHER_DIGEST,
    World,
    digest_entry,
    imported_entry,
    inline,
    semantic_entry,
    unchanged_entry,
)
from verification.actors.services.actors import actor_create, token_issue
from verification.evidence import storage
from verification.evidence.models import VerificationEvidence
from verification.evidence.services import evidence_admit, evidence_redact
from verification.kernel.digests import sha256_digest
from verification.kernel.evidence import quote_hash
from verification.kernel.keys import PrivateKey, sign_evidence_digest
from verification.runs.models import Verification
from verification.runs.services.results import result_deliver
from verification.runs.services.rubrics import rubric_register
from verification.runs.services.tasks import (
    baseline_capture,
    case_freeze,
    contract_accept,
    link_record,
    manifest_report,
    task_create,
)
from verification.trust.models import Receipt
from verification.trust.services.keys import key_pin

pytestmark = pytest.mark.django_db

GOLDEN = Path(__file__).resolve().parent / "golden" / "receipt_envelopes.json"
REGENERATE_ENV = "REVIEWPORTAL_REGENERATE_GOLDEN"
PORTAL_SEED = bytes(range(32))
SOURCE_SEED = bytes(range(100, 132))
EPOCH = datetime(2026, 3, 1, 9, 0, 0, tzinfo=UTC)


class Clock:
    """The fixed clock: it reads the same instant until the test moves it (never by how often it is read)."""

    def __init__(self) -> None:
        self.now = EPOCH

    def __call__(self) -> datetime:
        return self.now

    def step(self, seconds: int = 1) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def deterministic(monkeypatch: pytest.MonkeyPatch, var_dir: Path) -> Iterator[Clock]:
    """Fixed clock, counter ids for every UUID primary key, the portal's key and the source key from fixed seeds."""
    from django.utils import timezone

    clock = Clock()
    counter = itertools.count(1)

    def next_uuid() -> uuid.UUID:
        return uuid.UUID(int=(0x60_1D << 96) + next(counter))

    monkeypatch.setattr(timezone, "now", clock)
    monkeypatch.setattr(uuid, "uuid4", next_uuid)
    for model in apps.get_app_config("verification").get_models():
        for model_field in model._meta.concrete_fields:
            if isinstance(model_field, models.UUIDField) and model_field.has_default():
                monkeypatch.setattr(model_field, "_get_default", next_uuid)
            elif isinstance(model_field, models.DateTimeField) and model_field.has_default():
                monkeypatch.setattr(model_field, "_get_default", clock)
    monkeypatch.setattr(PrivateKey, "generate", classmethod(lambda cls: cls.from_seed(PORTAL_SEED)))
    from verification.trust.services.keys import signing_key_create

    signing_key_create()
    yield clock


def _scenario(world: World, clock: Clock, name: str, *entries: dict[str, Any], claim: bool = True) -> None:
    """A task of its own with an accepted contract of ``entries`` (none: no accepted contract)."""
    clock.step()
    world.task = task_create(actor=world.owner.actor, title=name)
    if entries:
        clock.step()
        rubric = rubric_register(actor=world.owner.actor, document={"name": name, "criteria": list(entries)})
        clock.step()
        contract_accept(actor=world.owner.actor, task=world.task, rubric_hash=rubric.rubric_hash)
    if claim:
        clock.step()
        world.claim()


def _run(world: World, clock: Clock, body: dict[str, Any], **kwargs: Any) -> Verification:
    clock.step()
    verification = world.submit(body, **kwargs)
    clock.step()
    world.run(verification)
    return verification


def by_id(symbol: str, evidence: Any) -> dict[str, Any]:
    return {"evidence": [{"symbol": symbol, "evidence_id": str(evidence.pk)}]}


def _collector_baseline(world: World, clock: Clock, actor: Any = None, token: Any = None) -> None:
    clock.step()
    baseline_capture(
        actor=actor or world.collector.actor,
        token=token or world.collector.token,
        task=world.task,
        artifact_key="config",
        digest=sha256_digest(CONFIG_BEFORE),
    )


def _produce(world: World, clock: Clock, key_admin: Any) -> list[tuple[str, Verification]]:  # noqa: PLR0915
    out: list[tuple[str, Verification]] = []

    def case(name: str, verification: Verification) -> None:
        out.append((name, verification))

    # --- digest: PASS, FAIL; claims that match and that contradict ---------------------------------------------------
    _scenario(world, clock, "digest-pass", digest_entry())
    case("digest-pass inline", _run(world, clock, {"evidence": [inline("notes", NOTES)]}))
    _scenario(world, clock, "digest-fail", digest_entry(literal=OTHER_DIGEST))
    case("digest-fail inline", _run(world, clock, {"evidence": [inline("notes", NOTES)]}))
    _scenario(world, clock, "claims", digest_entry())
    claims = [
        {"symbol": "notes", "observable": "evidence.content-digest", "expression": f'(= notes "{NOTES_DIGEST}")'},
        {"symbol": "notes", "observable": "evidence.content-digest", "expression": f'(= notes "{OTHER_DIGEST}")'},
    ]
    case("claims match and contradicted", _run(world, clock, {"evidence": [inline("notes", NOTES)], "claims": claims}))

    # --- unchanged: MISMATCH, PASS, the baseline rails ---------------------------------------------------------------
    _scenario(world, clock, "unchanged-mismatch", unchanged_entry(), claim=False)
    _collector_baseline(world, clock)
    clock.step()
    world.claim()
    case("unchanged mismatch", _run(world, clock, {"evidence": [inline("config", CONFIG_AFTER)]}))
    _scenario(world, clock, "unchanged-pass", unchanged_entry(), claim=False)
    _collector_baseline(world, clock)
    clock.step()
    world.claim()
    case("unchanged pass", _run(world, clock, {"evidence": [inline("config", CONFIG_BEFORE)]}))
    _scenario(world, clock, "unchanged-missing", unchanged_entry())
    case("unchanged missing baseline", _run(world, clock, {"evidence": [inline("config", CONFIG_AFTER)]}))
    _scenario(world, clock, "baseline-by-producer", unchanged_entry(), claim=False)
    _collector_baseline(world, clock, world.agent.actor, world.agent.token)
    clock.step()
    world.claim()
    case("baseline not independent", _run(world, clock, {"evidence": [inline("config", CONFIG_AFTER)]}))
    _scenario(world, clock, "baseline-after-claim", unchanged_entry())
    _collector_baseline(world, clock)
    case("baseline after first claim", _run(world, clock, {"evidence": [inline("config", CONFIG_AFTER)]}))

    # --- evidence kinds and tiers ------------------------------------------------------------------------------------
    _scenario(world, clock, "below-tier", digest_entry(policy={"min_trust_tier": "source_attested"}))
    case("claimant below trust tier", _run(world, clock, {"evidence": [inline("notes", NOTES)]}))
    _scenario(world, clock, "collector", digest_entry(policy={"min_trust_tier": "third_party"}))
    clock.step()
    collected = evidence_admit(actor=world.collector.actor, token=world.collector.token, content=NOTES, task=world.task)
    case("collector evidence by id", _run(world, clock, by_id("notes", collected)))
    source = PrivateKey.from_seed(SOURCE_SEED)
    clock.step()
    key_pin(
        actor_user=key_admin,
        jwk_or_pem_text=source.public_key.to_pem(),
        purpose="evidence-source",
        typed_fingerprint=source.public_key.fingerprint,
        channel="phone call with the release manager",
    )
    _scenario(world, clock, "source-signed", digest_entry(policy={"min_trust_tier": "source_attested"}))
    clock.step()
    signed = evidence_admit(
        actor=world.agent.actor,
        token=world.agent.token,
        content=NOTES,
        source_signature=sign_evidence_digest(source, NOTES_DIGEST),
        source_key_id=source.public_key.key_id,
        task=world.task,
    )
    case("source-signed evidence", _run(world, clock, by_id("notes", signed)))
    _scenario(world, clock, "stale", digest_entry(policy={"max_age_seconds": 60}))
    stale = (clock.now - timedelta(hours=1)).isoformat()
    case("stale evidence", _run(world, clock, {"evidence": [inline("notes", NOTES, collected_at=stale)]}))
    _scenario(world, clock, "gone", digest_entry("gone-digest", literal=sha256_digest(b"gone bytes\n")))
    clock.step()
    gone = world.submit({"evidence": [inline("notes", b"gone bytes\n")]})
    assert storage.remove(sha256_digest(b"gone bytes\n"))
    clock.step()
    world.run(gone)
    case("gone bytes", gone)
    _scenario(world, clock, "redacted", digest_entry())
    clock.step()
    item = evidence_admit(actor=world.agent.actor, token=world.agent.token, content=LOG, task=world.task)
    clock.step()
    evidence_redact(evidence=item, reason="contains a secret")
    case("redacted evidence", _run(world, clock, by_id("notes", item)))
    _scenario(world, clock, "changed-bytes", digest_entry())
    first = _run(world, clock, {"evidence": [inline("notes", NOTES)]})
    case("before the bytes changed", first)
    evidence_id = str(VerificationEvidence.objects.get(verification=first).evidence_id)
    location = storage.evidence_storage().path(storage.name_for(NOTES_DIGEST))
    original = Path(location).read_bytes()
    Path(location).write_bytes(NOTES + b"- sneaky edit\n")
    same_id = {"evidence": [{"symbol": "notes", "evidence_id": evidence_id}]}
    case("changed bytes, disagreement", _run(world, clock, same_id))
    Path(location).write_bytes(original)

    # --- change manifests (rail 4) -----------------------------------------------------------------------------------
    manifest = digest_entry("manifest-digest", literal=sha256_digest(MANIFEST), symbol="manifest")
    _scenario(world, clock, "manifest-declared", manifest)
    declared = {"evidence": [inline("manifest", MANIFEST, as_manifest=True)]}
    case("manifest producer-declared", _run(world, clock, declared))
    _scenario(world, clock, "manifest-reported", manifest)
    clock.step()
    mine = evidence_admit(actor=world.agent.actor, token=world.agent.token, content=MANIFEST, task=world.task)
    clock.step()
    manifest_report(actor=world.agent.actor, token=world.agent.token, task=world.task, evidence=mine)
    case("manifest producer-reported", _run(world, clock, by_id("manifest", mine)))
    _scenario(world, clock, "manifest-observed", manifest)
    clock.step()
    seen = evidence_admit(actor=world.collector.actor, token=world.collector.token, content=MANIFEST, task=world.task)
    clock.step()
    manifest_report(actor=world.collector.actor, token=world.collector.token, task=world.task, evidence=seen)
    case("manifest observed", _run(world, clock, by_id("manifest", seen)))

    # --- imported results: the rails, NOT_RUN, a PASS that cannot pass ----------------------------------------------
    _scenario(world, clock, "ext-claimed", imported_entry())
    clock.step()
    world.claim(world.external)
    case("external verifier claimed the task", _run(
        world, clock, {"results": [{"criterion": "ext-scan", "verdict": "FAIL", "detail": "2 issues"}]},
        party=world.external,
    ))
    _scenario(world, clock, "ext-committed", imported_entry())
    clock.step()
    link_record(actor=world.collector.actor, token=world.collector.token, task=world.task, commit_id="c0ffee1",
                committing_actor="ext-v", superseded=True)
    case("verifier authored the work", _run(
        world, clock, {"results": [{"criterion": "ext-scan", "verdict": "FAIL"}]}, party=world.external
    ))
    _scenario(world, clock, "ext-shared-boundary", imported_entry(deadline_seconds=3600))
    clock.step()
    shared = actor_create(name="ext-shared", kind="external_verifier")
    shared_token, _ = token_issue(actor=shared, boundary="ctr-worker", scopes=sorted(world.external.token.scopes))
    in_boundary = _run(world, clock, {})
    clock.step()
    result_deliver(actor=shared, token=shared_token, verification=in_boundary, criterion_id="ext-scan",
                   body={"criterion": "ext-scan", "verdict": "FAIL"})
    case("shared execution boundary", in_boundary)
    _scenario(world, clock, "ext-no-result", imported_entry())
    case("imported, no result, no deadline", _run(world, clock, {}))
    _scenario(world, clock, "ext-not-run", imported_entry(deadline_seconds=3600))
    not_run = _run(world, clock, {})
    clock.step()
    result_deliver(actor=world.external.actor, token=world.external.token, verification=not_run,
                   criterion_id="ext-scan", body={"criterion": "ext-scan", "verdict": "NOT_RUN", "detail": "skipped"})
    case("imported PENDING then NOT_RUN", not_run)
    _scenario(world, clock, "ext-pending-pass", imported_entry(deadline_seconds=3600))
    pending = _run(world, clock, {})
    clock.step()
    result_deliver(actor=world.external.actor, token=world.external.token, verification=pending,
                   criterion_id="ext-scan",
                   body={"criterion": "ext-scan", "verdict": "PASS", "authority": "deterministic"})
    case("imported PENDING then PASS not trusted", pending)

    # --- semantic: PENDING then cited support; self-verification -----------------------------------------------------
    _scenario(world, clock, "semantic", semantic_entry(deadline_seconds=600))
    clock.step()
    frozen = case_freeze(actor=world.owner.actor, task=world.task, content="do the release notes say tests passed?")
    judged = _run(world, clock, {"evidence": [inline("log", LOG)]})
    quote = "212 passed, 0 failed"
    start = LOG.decode().index(quote)
    log_id = str(VerificationEvidence.objects.get(verification=judged).evidence_id)
    clock.step()
    result_deliver(
        actor=world.semantic.actor, token=world.semantic.token, verification=judged, criterion_id="tests-green",
        body={"outcome": "cited_support", "typed_predicate": "tests-pass", "case_digest": frozen.digest,
              "citations": [{"evidence_id": log_id, "start": start, "end": start + len(quote), "quote": quote,
                             "quote_hash": quote_hash(quote)}],
              "rationale": "the log shows every test passing"},
    )
    case("semantic PENDING then cited support", judged)
    _scenario(world, clock, "semantic-self", semantic_entry())
    case("semantic worker judges its own submission", _run(
        world, clock,
        {"evidence": [inline("log", LOG)],
         "judgments": [{"criterion": "tests-green", "outcome": "cited_conflict", "typed_predicate": "tests-pass",
                        "case_digest": "sha256:" + "c" * 64, "citations": []}]},
        party=world.semantic,
    ))

    # --- no accepted contract ----------------------------------------------------------------------------------------
    _scenario(world, clock, "no-contract")
    case("no accepted contract", _run(world, clock, {"evidence": [inline("notes", NOTES)]}))
    return out


def _envelopes(produced: list[tuple[str, Verification]]) -> list[dict[str, Any]]:
    return [
        {
            "case": name,
            "envelopes": list(
                Receipt.objects.filter(verification=verification).order_by("seq").values_list("envelope", flat=True)
            ),
        }
        for name, verification in produced
    ]


def test_receipt_envelopes_are_byte_identical_to_the_golden_file(
    deterministic: Clock, key_admin_fixed: Any
) -> None:
    clock = deterministic
    world = World.build()
    produced = _produce(world, clock, key_admin_fixed)
    got = _envelopes(produced)
    payloads = [json.loads(e)["payload"] for case in got for e in case["envelopes"]]
    verdicts = {p["verdict"] for p in payloads} | {c["verdict"] for p in payloads for c in p["checks"]}
    assert verdicts == {"PASS", "FAIL", "MISMATCH", "UNKNOWN", "NOT_RUN", "PENDING"}
    if os.environ.get(REGENERATE_ENV) == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert [c["case"] for c in got] == [c["case"] for c in expected]
    for mine, golden in zip(got, expected, strict=True):
        assert mine["envelopes"] == golden["envelopes"], mine["case"]


@pytest.fixture
def key_admin_fixed(deterministic: Clock, django_user_model: Any) -> Any:
    """The key admin of tests/verification/conftest.py, over the fixed portal key (created by ``deterministic``)."""
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user(username="ada", password="correct horse battery staple")
    user.groups.add(Group.objects.get(name="admin"))
    return user


def test_the_golden_file_covers_every_rail_and_evidence_kind() -> None:
    """The recorded set itself: each verdict and each refusal code the brief names is in it."""
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    payloads = [json.loads(e)["payload"] for case in expected for e in case["envelopes"]]
    reasons = {p.get("reason") for p in payloads}
    for code in ("worker-self-verification", "verifier-authored-work", "shared-execution-boundary",
                 "change-manifest-not-independently-observed", "missing-baseline", "no-accepted-contract",
                 "missing-evidence-integrity-proof", "evidence-integrity-mismatch", "evidence-redacted",
                 "evidence-stale", "below-trust-tier"):
        assert code in reasons, code
    tiers = {e["trust_tier"] for p in payloads for e in p["evidence"]}
    assert {"claimant", "third_party", "source_attested"} <= tiers

