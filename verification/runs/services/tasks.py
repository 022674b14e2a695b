"""Tasks, cycles, claims, contracts, links, manifests, baselines and frozen cases (SPEC §1, §6, §9).

Each fact is recorded with the actor and boundary of the token that reported it, never from a body. The rules
that decide what a fact is worth live in the kernel (``contracts.accept_contract``, ``criteria.capture_baseline``);
these services store the facts and refuse what the kernel refuses.
"""

from __future__ import annotations

import os
import secrets
import stat
import tempfile
from pathlib import Path
from typing import Final

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from verification.actors.models import Actor, ActorKind, ApiToken
from verification.actors.services.actors import PORTAL_ACTOR_NAME, boundaries_of, kernel_actor, require_token_of
from verification.errors import NotFound, ServiceError
from verification.evidence.models import Baseline, ChangeManifest, Evidence, FrozenCase
from verification.kernel.baselines import MIN_SECRET_BYTES, capture_baseline
from verification.kernel.contracts import ContractAcceptance as KernelAcceptance
from verification.kernel.contracts import accept_contract, may_claim, subject_key
from verification.kernel.digests import is_digest, sha256_digest
from verification.kernel.expressions import is_symbol
from verification.kernel.reasons import Reason
from verification.runs.cycle_workers import cycle_workers
from verification.runs.models import Claim, ContractAcceptance, Link, Rubric, Task, TaskCycle
from verification.runs.ownership import require_owner_or_admin, require_owner_or_contract_owner
from verification.runs.selectors import current_cycle

FIRST_CYCLE: Final = 1
BASELINE_SECRET_ENV: Final = "REVIEWPORTAL_BASELINE_SECRET"  # noqa: S105 - a variable name
BASELINE_SECRET_FILE: Final = "baseline_secret"  # noqa: S105 - a file name
MAX_TEXT: Final = 300


# --- the capture step's server secret (SPEC §9 rail 5) ---------------------------------------------------------------


def baseline_secret() -> bytes:
    """The capture step's HMAC secret: ``REVIEWPORTAL_BASELINE_SECRET`` (32+ bytes), else ``<VAR_DIR>/baseline_secret``.

    The file is created on first use with an exclusive create (mode 0600), so racing processes keep one secret;
    a file that other users can read is refused. Web and worker processes must share it (same var dir or variable).
    """
    configured = os.environ.get(BASELINE_SECRET_ENV, "")
    if configured.strip():
        secret = configured.encode("utf-8")
        if len(secret) < MIN_SECRET_BYTES:
            raise ServiceError(
                Reason.INVALID_BASELINE_TOKEN, f"{BASELINE_SECRET_ENV} needs {MIN_SECRET_BYTES}+ bytes", status=500
            )
        return secret
    directory = Path(settings.VAR_DIR)
    path = directory / BASELINE_SECRET_FILE
    try:
        found = os.stat(path)
    except FileNotFoundError:
        found = None
    if found is None:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".baseline_secret.", dir=directory)  # mode 0600
        try:
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(secrets.token_hex(32))
                handle.flush()
                os.fsync(handle.fileno())
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        found = os.stat(path)
    if found.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ServiceError(Reason.INVALID_BASELINE_TOKEN, f"{path} is accessible to other users; chmod 600", status=500)
    # Read again only when the file is another or was written since (every run asks for it: a stat, not a read).
    version = (str(path), found.st_dev, found.st_ino, found.st_mtime_ns, found.st_size)
    remembered = _SECRET_READ.get(version)
    if remembered is not None:
        return remembered
    secret = path.read_text(encoding="ascii").strip().encode("ascii")
    if len(secret) < MIN_SECRET_BYTES:
        raise ServiceError(
            Reason.INVALID_BASELINE_TOKEN, f"{path} holds fewer than {MIN_SECRET_BYTES} bytes", status=500
        )
    _SECRET_READ.clear()  # only the file as it is now
    _SECRET_READ[version] = secret
    return secret


#: The secret file last read, by its path, device, inode, modification time and size.
_SECRET_READ: Final[dict[tuple[object, ...], bytes]] = {}


# --- tasks and cycles ----------------------------------------------------------------------------------------------


def _text(value: object, what: str, *, required: bool) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT or (required and not value.strip()):
        raise ServiceError(Reason.INVALID_REQUEST, f"{what} is {'1' if required else '0'}-{MAX_TEXT} characters")
    return value.strip()


@transaction.atomic
def task_create(*, actor: Actor, title: str, external_ref: str = "") -> Task:
    """Create a task and open its first cycle."""
    task = Task.objects.create(
        title=_text(title, "title", required=True),
        external_ref=_text(external_ref, "external_ref", required=False),
        created_by=actor,
    )
    TaskCycle.objects.create(task=task, number=FIRST_CYCLE, opened_by=actor)
    return task


def _lock_task(task: Task) -> Task:
    locked = Task.objects.select_for_update().filter(pk=task.pk).first()
    if locked is None:
        raise NotFound(f"no task {task.pk}", task_id=str(task.pk))
    return locked


@transaction.atomic
def task_reopen(*, actor: Actor, task: Task) -> TaskCycle:
    """Start a new cycle (SPEC §1): it needs its own contract; claims and approvals of earlier cycles do not count.

    Only the task's owner or a portal admin reopens it: ``not-task-owner`` (403), nothing written.
    """
    locked = _lock_task(task)
    require_owner_or_admin(actor, locked, what="reopen")
    return TaskCycle.objects.create(task=locked, number=current_cycle(locked) + 1, opened_by=actor)


@transaction.atomic
def claim_record(*, actor: Actor, token: ApiToken | None, task: Task) -> Claim:
    """Record that ``actor`` (authenticated by ``token``) claimed ``task`` in its current cycle.

    The portal's own service actor never claims a task (SPEC §1): ``permission-denied``. The acceptor of the
    cycle's contract never becomes a worker of it (SPEC §1, kernel ``contracts.may_claim``):
    ``self-contract-acceptance`` (403, like every refusal by the contract rules), nothing written.
    """
    boundary = require_token_of(actor, token)
    if actor.name == PORTAL_ACTOR_NAME:
        raise ServiceError(Reason.PERMISSION_DENIED, "the portal's service actor never claims tasks", status=403)
    locked = _lock_task(task)  # a claim and a contract acceptance of the same cycle are decided one after the other
    cycle = current_cycle(locked)
    refusal = may_claim(actor=kernel_actor(actor, frozenset()), cycle=cycle, contract=_kernel_contract(locked, cycle))
    if refusal is not None:
        raise ServiceError(
            refusal,
            f"{actor.name} may not claim {subject_key(task_id=str(locked.pk), cycle=cycle)}: it accepted its contract",
            status=403,
        )
    return Claim.objects.create(task=locked, cycle=cycle, actor=actor, boundary=boundary)


def _kernel_contract(task: Task, cycle: int) -> KernelAcceptance | None:
    row = cycle_workers(task, cycle).contract
    if row is None:
        return None
    return KernelAcceptance(row.rubric_id, row.accepted_by.name, row.cycle, row.accepted_at)


@transaction.atomic
def contract_accept(*, actor: Actor, task: Task, rubric_hash: str) -> ContractAcceptance:
    """Accept a registered rubric as the contract of the task's current cycle (SPEC §1). Nothing is written on refusal.

    Only the task's owner or an actor of kind contract owner accepts: ``not-task-owner`` (403). Then the kernel rule
    (``contracts.accept_contract``) over the cycle's workers (``cycle_workers``): ``contract-already-accepted`` (409)
    when the cycle has its contract (it never changes; reopen to judge by another rubric — the database holds one
    row per cycle too), ``self-contract-acceptance`` (403) for a worker of the cycle (a claimant or a submitter),
    ``unnamed-actor`` (403). ``not-found`` for an unknown rubric.
    """
    rubric = Rubric.objects.filter(rubric_hash=rubric_hash).first() if isinstance(rubric_hash, str) else None
    if rubric is None:
        raise NotFound(f"no registered rubric {rubric_hash!r}", rubric_hash=str(rubric_hash))
    locked = _lock_task(task)
    require_owner_or_contract_owner(actor, locked, what="accept the contract of")
    cycle = current_cycle(locked)
    found = cycle_workers(locked, cycle)
    existing = found.contract
    refusal = accept_contract(
        actor=kernel_actor(actor, frozenset()),
        cycle=cycle,
        claims=found.claims,
        workers=found.workers,
        contract=(
            KernelAcceptance(existing.rubric_id, existing.accepted_by.name, existing.cycle, existing.accepted_at)
            if existing is not None
            else None
        ),
    )
    subject = subject_key(task_id=str(locked.pk), cycle=cycle)
    if refusal is Reason.CONTRACT_ALREADY_ACCEPTED:
        raise _already_accepted(subject)
    if refusal is not None:
        raise ServiceError(refusal, f"{actor.name} may not accept the contract of {subject}", status=403)
    try:
        with transaction.atomic():
            return ContractAcceptance.objects.create(task=locked, cycle=cycle, rubric=rubric, accepted_by=actor)
    except IntegrityError:  # the one-per-cycle constraint: another acceptance won (the task lock makes this rare)
        raise _already_accepted(subject) from None


def _already_accepted(subject: str) -> ServiceError:
    return ServiceError(
        Reason.CONTRACT_ALREADY_ACCEPTED,
        f"{subject} has its contract; reopen the task to judge the work by another rubric",
        status=409,
    )


# --- links, manifests, baselines, frozen cases ---------------------------------------------------------------------


@transaction.atomic
def link_record(
    *,
    actor: Actor,
    task: Task,
    commit_id: str,
    committing_actor: str,
    superseded: bool = False,
    token: ApiToken | None = None,
) -> Link:
    """Record a commit anchoring the work, reported by a collector (SPEC §1, rail 2).

    ``committing_actor`` names an actor; an unknown name is kept as reported and the committer counts as unnamed
    (so no verifier can be proven distinct from it). Only collectors report links: ``permission-denied`` otherwise.
    """
    boundary = require_token_of(actor, token)
    if actor.kind != ActorKind.COLLECTOR:
        raise ServiceError(Reason.PERMISSION_DENIED, "links are reported by a collector", status=403)
    commit = _text(commit_id, "commit_id", required=True)
    name = _text(committing_actor, "committing_actor", required=False)
    if not isinstance(superseded, bool):
        raise ServiceError(Reason.INVALID_REQUEST, "superseded is true or false")
    committer = Actor.objects.filter(name=name).first() if name else None
    return Link.objects.create(
        task=task,
        commit_id=commit,
        committing_actor=committer,
        committing_actor_name=name,
        reported_by=actor,
        reported_boundary=boundary,
        superseded=superseded,
    )


@transaction.atomic
def manifest_report(*, actor: Actor, token: ApiToken | None, task: Task, evidence: Evidence) -> ChangeManifest:
    """Record that ``actor`` reported ``evidence`` as the change manifest of ``task``.

    Whether it counts as independently observed is decided at run time by the kernel (rail 4) from the reporter's
    kind and boundaries: a manifest reported by anyone but a collector outside the producer's boundary answers
    ``change-manifest-not-independently-observed``.
    """
    boundary = require_token_of(actor, token)
    return ChangeManifest.objects.create(evidence=evidence, task=task, reported_by=actor, reported_boundary=boundary)


@transaction.atomic
def baseline_capture(
    *, actor: Actor, token: ApiToken | None, task: Task, artifact_key: str, digest: str
) -> Baseline:
    """The capture step (SPEC §9 rail 5): record a baseline digest with its HMAC capture token, minted only here.

    The reporter's boundaries are all of its tokens' (fail closed); whether the baseline is authoritative (a
    collector outside the producer's boundary, captured before the cycle's first claim) is decided at run time.
    """
    require_token_of(actor, token)
    if not isinstance(artifact_key, str) or not is_symbol(artifact_key):
        raise ServiceError(Reason.INVALID_REQUEST, "artifact_key names an evidence symbol (the criterion's symbol)")
    if not is_digest(digest):
        raise ServiceError(Reason.INVALID_REQUEST, "digest is sha256:<64 lowercase hex>")
    locked = _lock_task(task)
    cycle = current_cycle(locked)
    boundaries = boundaries_of(actor)
    captured = capture_baseline(
        baseline_secret(),
        subject=subject_key(task_id=str(locked.pk), cycle=cycle),
        artifact_key=artifact_key,
        digest=digest,
        captured_at=timezone.now(),
        reporter_actor=actor.name,
        reporter_boundaries=boundaries,
        reporter_is_collector=actor.kind == ActorKind.COLLECTOR,
    )
    return Baseline.objects.create(
        task=locked,
        cycle=cycle,
        artifact_key=artifact_key,
        digest=digest,
        captured_at=captured.captured_at,
        reporter=actor,
        reporter_boundaries=sorted(captured.reporter_boundaries),
        reporter_is_collector=captured.reporter_is_collector,
        capture_token=captured.capture_token,
    )


def case_freeze(*, actor: Actor, task: Task, content: str) -> FrozenCase:
    """Freeze an evaluation case of ``task`` (SPEC §6): semantic judgments bound to its digest can be grounded.

    Idempotent on (task, digest). ``content`` is the case text; its digest is ``sha256:<hex>`` of its UTF-8 bytes.
    Only the task's owner or an actor of kind contract owner freezes its cases (they ground the semantic judgments
    of the work, like the contract judges it): ``not-task-owner`` (403), nothing written.
    """
    require_owner_or_contract_owner(actor, task, what="freeze an evaluation case of")
    if not isinstance(content, str) or not content:
        raise ServiceError(Reason.INVALID_REQUEST, "a frozen case has text")
    digest = sha256_digest(content.encode("utf-8"))
    existing = FrozenCase.objects.filter(task=task, digest=digest).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return FrozenCase.objects.create(task=task, digest=digest, content=content, frozen_by=actor)
    except IntegrityError:
        return FrozenCase.objects.get(task=task, digest=digest)


__all__ = [
    "baseline_capture",
    "baseline_secret",
    "case_freeze",
    "claim_record",
    "contract_accept",
    "link_record",
    "manifest_report",
    "task_create",
    "task_reopen",
]
