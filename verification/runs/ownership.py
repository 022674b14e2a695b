"""Ownership (SPEC §1): who may write on whose object. Each check refuses before anything is written.

- A task belongs to the actor that created it. Only its owner, or a portal admin (a human actor whose portal user is
  active and holds the admin role), may reopen it: ``not-task-owner`` (403).
- Only the owner or an actor of kind contract owner may accept its contract or freeze its evaluation cases:
  ``not-task-owner`` (403).
- Only the verification's submitter or a worker of its cycle (``verification.runs.cycle_workers``) may add evidence to a
  verification: ``not-a-worker-of-this-cycle`` (403).

docs/api-ownership.md ("Who may call what") lists every write endpoint with these rules;
tests/api/test_ownership.py walks it.
"""

from __future__ import annotations

from verification.actors.models import Actor, ActorKind
from verification.actors.roles import ADMIN
from verification.errors import ServiceError
from verification.kernel.reasons import Reason
from verification.runs.cycle_workers import CycleWorkers
from verification.runs.models import Task, Verification

#: The portal role whose holders may reopen any task (``services.users.ADMIN``; not imported: users imports more).
ADMIN_ROLE = ADMIN


def is_task_owner(actor: Actor, task: Task) -> bool:
    return task.created_by_id is not None and task.created_by_id == actor.pk


def is_portal_admin(actor: Actor) -> bool:
    """A human actor whose portal user is active and an admin (role group or superuser)."""
    if actor.kind != ActorKind.HUMAN or actor.user_id is None:
        return False
    user = actor.user
    if user is None or not user.is_active:
        return False
    return bool(user.is_superuser or user.groups.filter(name=ADMIN_ROLE).exists())


def _refuse_not_owner(actor: Actor, task: Task, what: str) -> ServiceError:
    return ServiceError(Reason.NOT_TASK_OWNER, f"{actor.name} may not {what} task {task.pk}", status=403)


def require_owner_or_admin(actor: Actor, task: Task, *, what: str) -> None:
    """The task's owner or a portal admin; else ``not-task-owner`` (403)."""
    if not (is_task_owner(actor, task) or is_portal_admin(actor)):
        raise _refuse_not_owner(actor, task, what)


def require_owner_or_contract_owner(actor: Actor, task: Task, *, what: str) -> None:
    """The task's owner or an actor of kind contract owner; else ``not-task-owner`` (403)."""
    if not (is_task_owner(actor, task) or actor.kind == ActorKind.CONTRACT_OWNER):
        raise _refuse_not_owner(actor, task, what)


def require_worker_of(actor: Actor, verification: Verification, workers: CycleWorkers) -> None:
    """The verification's submitter or a worker of its cycle; else ``not-a-worker-of-this-cycle`` (403)."""
    if verification.submitted_by_id is not None and verification.submitted_by_id == actor.pk:
        return
    if workers.is_worker(actor):
        return
    raise ServiceError(
        Reason.NOT_A_WORKER_OF_THIS_CYCLE,
        f"{actor.name} neither submitted verification {verification.pk} nor works on cycle {workers.cycle}",
        status=403,
    )


__all__ = [
    "is_portal_admin",
    "is_task_owner",
    "require_owner_or_admin",
    "require_owner_or_contract_owner",
    "require_worker_of",
]
