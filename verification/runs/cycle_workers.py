"""Workers of a cycle (SPEC §1): the ONE place that says who worked on a task's cycle.

The workers of a cycle are every actor that claimed the task in that cycle and every actor that submitted a
verification of it in that cycle (the producer of the work, whether or not it claimed). With them come each worker's
execution boundaries (those named by its tokens), the links anchoring the work with their committing actors
(superseded links included: a rebase does not erase an author) and the cycle's contract with its acceptor.

Every rule about who did the work reads this selector and nothing else: the rails of an automated run
(``services.facts``), the rails of a human decision (``reviews.services.claims``), the contract rules
(``services.tasks.contract_accept``: a worker never accepts its own contract) and the claim rule
(``services.tasks.claim_record``: the acceptor never becomes a worker). The kernel gets the plain records
(``workers``, ``links``, ``claims``, ``acceptor_id``); the Django rows are kept for the callers that need them.

All of it is one query (issue 15): a ``UNION ALL`` of the row sources below, compiled once per connection and vendor
and run with the task and the cycle as parameters; asked with ``reviewer=``, the same query also reads that portal
user's actor and its boundaries, so the decision rails on a "Next item" candidate cost one round trip.

``rails_certainly_refuse`` is the same definition as SQL, for a query that must pass over many items at once (the
reviewer's "Next item", issue 15): built from the same row sources, and compared with the rails over ``cycle_workers``
by a property test (tests/reviews/test_claim_filter.py); with ``rails_uncertain`` (where the SQL form reads a fact
less exactly than the kernel) it decides an item in the claim's own statement: refused, allowed, or left to the rails.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from django.db import connection
from django.db.models import (
    BooleanField,
    CharField,
    DateTimeField,
    Exists,
    F,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    Window,
)
from django.db.models.functions import Cast, Coalesce, Left, Ord, Right, RowNumber, Trim
from django.db.models.lookups import Exact, Range

from verification.actors.models import Actor, ApiToken
from verification.actors.services.actors import PORTAL_ACTOR_NAME, PORTAL_BOUNDARY, boundaries_from, kernel_actor
from verification.compiled import Compiled, Probe
from verification.kernel import actors as kactors
from verification.kernel.contracts import Claim as KernelClaim
from verification.kernel.rails import Link as KernelLink
from verification.runs.models import Claim, ContractAcceptance, Link, Task, TaskCycle, Verification
from verification.runs.selectors import contract_among


def _cycles_of(task: Any) -> QuerySet[TaskCycle]:
    """The task's cycles (value or outer reference): the latest is its current one (``selectors.current_cycle``)."""
    return TaskCycle.objects.filter(task=task)


def _task_claims(task: Any) -> QuerySet[Claim]:
    """Every claim of ``task``, all cycles (the kernel's records keep them all)."""
    return Claim.objects.filter(task=task)


def _claims_of(task: Any, cycle: Any) -> QuerySet[Claim]:
    """The claims that make their actors claimants of ``task``'s ``cycle`` (values or outer references)."""
    return _task_claims(task).filter(cycle=cycle)


def _submissions_of(task: Any, cycle: Any) -> QuerySet[Verification]:
    """The verifications that make their submitters workers of ``task``'s ``cycle`` (values or outer references)."""
    return Verification.objects.filter(task=task, cycle=cycle, submitted_by__isnull=False)


def _links_of(task: Any) -> QuerySet[Link]:
    """The links anchoring ``task``'s work, in every cycle, superseded ones included (rail 2)."""
    return Link.objects.filter(task=task)


def _worker_tokens(task: Any, cycle: Any) -> QuerySet[ApiToken]:
    """The tokens of the cycle's workers (claimants and submitters): their boundaries (SPEC §1)."""
    return ApiToken.objects.filter(
        Q(actor__in=_claims_of(task, cycle).values("actor"))
        | Q(actor__in=_submissions_of(task, cycle).values("submitted_by"))
    )


def _contracts_of(task: Any, cycle: Any) -> QuerySet[ContractAcceptance]:
    """The cycle's contract acceptances (one per cycle; ``selectors.contract_of`` applies the kernel's rule)."""
    return ContractAcceptance.objects.filter(task=task, cycle=cycle)


@dataclass(frozen=True)
class CycleWorkers:
    """Who worked on ``task``'s ``cycle``, as domain records (no view models)."""

    task: Task
    cycle: int
    #: Every claim of the task, all cycles, as kernel records (the kernel keeps those of the cycle it asks about).
    claims: tuple[KernelClaim, ...]
    #: The actors that claimed the task in this cycle, first claim first.
    claimants: tuple[Actor, ...]
    #: The actors that submitted a verification of this cycle without claiming it, first submission first.
    submitters: tuple[Actor, ...]
    #: Claimants then submitters as the kernel's actor records, each with the boundaries of its tokens.
    workers: tuple[kactors.Actor, ...]
    #: Every link anchoring the task's work, superseded ones included, oldest first.
    links: tuple[KernelLink, ...]
    #: The cycle's contract (one per cycle, with its ``accepted_by``), or None while none is accepted.
    contract: ContractAcceptance | None = None
    #: The task's current cycle (its latest; 1 for a task without cycle rows): ``cycle`` is stale when it is older.
    current_cycle: int = 1
    #: Asked with ``reviewer=`` (a portal user): its actor (None while it has none), and that actor's kernel record with
    #: the boundaries of its tokens (the decision rails' verifier).
    reviewer: Actor | None = None
    verifier: kactors.Actor | None = None

    @property
    def actors(self) -> tuple[Actor, ...]:
        """The workers as stored actors (claimants, then submitters that did not claim)."""
        return (*self.claimants, *self.submitters)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(a.name for a in self.actors)

    @property
    def acceptor(self) -> Actor | None:
        """The actor that accepted the cycle's contract, or None."""
        return self.contract.accepted_by if self.contract is not None else None

    @property
    def acceptor_id(self) -> str | None:
        acceptor = self.acceptor
        return acceptor.name if acceptor is not None else None

    def is_worker(self, actor: Actor) -> bool:
        return any(a.pk == actor.pk for a in self.actors)

    def producer_of(self, submitter: Actor | None) -> Actor | None:
        """The producer of a verification (rails 3–5): its submitter when it claimed the task in this cycle or nobody
        did; otherwise the cycle's first claimant."""
        if submitter is None:
            return self.claimants[0] if self.claimants else None
        if not self.claimants or any(a.pk == submitter.pk for a in self.claimants):
            return submitter
        return self.claimants[0]


# --- the one query ----------------------------------------------------------------------------------------------------

#: Where a row of the one query comes from (its first column), which is also the rows' order.
_CURRENT, _CLAIM, _SUBMISSION, _LINK, _TOKEN, _CONTRACT, _REVIEWER, _REVIEWER_TOKEN = range(8)
#: The columns every part of the query selects (a part fills what it has and NULL the rest): where the row comes
#: from, its place in its source's order, a time, a cycle number, an actor (pk, name, kind, user, created_at), a text
#: (a link's commit, a token's boundary, a contract's rubric), a flag (a link superseded) and a row id (a contract's).
_COLUMNS: Final = ("w_src", "w_seq", "w_at", "w_number", "w_actor", "w_name", "w_kind", "w_user", "w_created",
                   "w_text", "w_flag", "w_row")  # fmt: skip
_ACTOR_FIELDS: Final = ("id", "name", "kind", "user_id", "created_at")
_CONTRACT_FIELDS: Final = ("id", "task_id", "cycle", "rubric_id", "accepted_by_id", "accepted_at")


def _null(field: Any) -> Cast:
    """A typed NULL (PostgreSQL resolves a UNION's column types pair by pair: a bare NULL would become text)."""
    return Cast(Value(None), field)


def _part(rows: QuerySet[Any], src: int, order: tuple[str, ...] = (), actor: str = "", **given: Any) -> QuerySet[Any]:
    """One part of the query: ``rows`` with every column of ``_COLUMNS`` (``given`` ones, else the ``actor``'s, else
    a typed NULL), ordered within the part by ``order``."""
    columns: dict[str, Any] = {
        "w_src": Value(src, IntegerField()),
        "w_seq": Window(RowNumber(), order_by=order) if order else Value(0, IntegerField()),
        "w_at": _null(DateTimeField()),
        "w_number": _null(IntegerField()),
        "w_actor": F(actor) if actor else _null(IntegerField()),
        "w_name": F(f"{actor}__name") if actor else _null(CharField()),
        "w_kind": F(f"{actor}__kind") if actor else _null(CharField()),
        "w_user": F(f"{actor}__user") if actor else _null(IntegerField()),
        "w_created": F(f"{actor}__created_at") if actor else _null(DateTimeField()),
        "w_text": _null(CharField()),
        "w_flag": _null(BooleanField()),
        "w_row": _null(IntegerField()),
    }
    columns.update(given)
    return rows.order_by().annotate(**columns).values_list(*_COLUMNS)


def _workers_query(task: Any, cycle: Any, reviewer: Any = None) -> QuerySet[Any]:
    """Everything ``cycle_workers`` reads, as one ``UNION ALL`` of the row sources above (the same ones
    ``rails_certainly_refuse`` is built from), in source order and each source in its own. With ``reviewer`` (a
    portal user's pk) also that user's actor and its tokens' boundaries (the decision rails' verifier)."""
    current = _cycles_of(task).values("task").annotate(top=Max("number"))
    parts = [
        _part(current, _CURRENT, w_number=F("top")),
        _part(_task_claims(task), _CLAIM, ("claimed_at", "id"), "actor", w_at=F("claimed_at"), w_number=F("cycle")),
        # One row per submitter, not per submission (a cycle resubmitted a thousand times is still its few workers):
        # its first submission's time in ``w_at``, which orders the part (ties by actor; ``w_seq`` is 0 throughout).
        _part(
            _submissions_of(task, cycle).values("submitted_by").annotate(first=Min("submitted_at")),
            _SUBMISSION,
            (),
            "submitted_by",
            w_at=F("first"),
        ),
        _part(
            _links_of(task),
            _LINK,
            ("created_at", "id"),
            w_name=F("committing_actor__name"),
            w_text=F("commit_id"),
            w_flag=F("superseded"),
        ),
        _part(_worker_tokens(task, cycle), _TOKEN, w_actor=F("actor"), w_text=F("boundary")),
        _part(
            _contracts_of(task, cycle),
            _CONTRACT,
            ("accepted_at", "id"),
            "accepted_by",
            w_at=F("accepted_at"),
            w_number=F("cycle"),
            w_text=F("rubric"),
            w_row=F("id"),
        ),
    ]
    if reviewer is not None:
        own = {"w_actor": F("id"), "w_name": F("name"), "w_kind": F("kind"), "w_user": F("user")}
        parts += [
            _part(Actor.objects.filter(user=reviewer), _REVIEWER, w_created=F("created_at"), **own),
            _part(
                ApiToken.objects.filter(actor__user=reviewer), _REVIEWER_TOKEN, w_actor=F("actor"), w_text=F("boundary")
            ),  # fmt: skip
        ]
    return parts[0].union(*parts[1:], all=True).order_by("w_src", "w_seq", "w_at", "w_actor")


#: ``_workers_query`` compiled once per database (``verification.compiled``: each argument a plain parameter, checked
#: with two probes), without and with a reviewer, and sent prepared (a plan by key).
_PROBES: Final = {"task": Probe.key_of(Task), "cycle": Probe(1_000_003, 1_000_004)}
_PROBES_REVIEWER: Final = Probe(1_000_005, 1_000_006)
_WORKERS: Final = Compiled("cycle-workers", Claim, _workers_query, _PROBES, prepared=True)
_WORKERS_AND_REVIEWER: Final = Compiled(
    "cycle-workers-reviewer", Claim, _workers_query, {**_PROBES, "reviewer": _PROBES_REVIEWER}, prepared=True
)


def _of_verification_query(verification_pk: Any, reviewer: Any) -> QuerySet[Any]:
    """``_workers_query`` for the subject of a verification (its task and cycle read in the same statement) and a
    portal user: for a caller that knows only the verification's key when it sends its reads."""
    subject = Verification.objects.filter(pk=verification_pk)
    task, cycle = (Subquery(subject.values(name)[:1]) for name in ("task_id", "cycle"))
    return _workers_query(task, cycle, reviewer)


_WORKERS_OF_VERIFICATION: Final = Compiled(
    "cycle-workers-of-verification",
    Claim,
    _of_verification_query,
    {"verification_pk": Probe.key_of(Verification), "reviewer": _PROBES_REVIEWER},
    prepared=True,
)


def workers_of_verification_query(verification_pk: Any, reviewer: Any) -> tuple[Compiled, dict[str, Any]]:
    """``cycle_workers(task, cycle, reviewer=reviewer)`` of a verification's subject as one query and its arguments,
    to send with others (``compiled.pipelined``, after a lock of the verification: the subject never changes) and read
    with ``workers_from_rows``."""
    return _WORKERS_OF_VERIFICATION, {"verification_pk": verification_pk, "reviewer": reviewer.pk}


def _rows(**arguments: Any) -> Iterable[tuple[Any, ...]]:
    """The one query's rows for ``arguments`` (task pk, cycle and optionally reviewer pk), in Python's types."""
    return (_WORKERS_AND_REVIEWER if "reviewer" in arguments else _WORKERS).rows(**arguments)


def cycle_workers(task: Task, cycle: int, *, reviewer: Any = None) -> CycleWorkers:
    """The workers of ``task``'s ``cycle`` with their boundaries, the link committers, the contract and the task's
    current cycle (SPEC §1): one query (``_workers_query``, compiled once). With ``reviewer`` (a portal user), also
    its actor and that actor's kernel record with its boundaries, in the same query (``reviewer``, ``verifier``)."""
    arguments = {"task": task.pk, "cycle": cycle}
    if reviewer is not None:
        arguments["reviewer"] = reviewer.pk
    return workers_from_rows(task, cycle, _rows(**arguments))


def workers_query(task_pk: Any, cycle: int) -> tuple[Compiled, dict[str, Any]]:
    """``cycle_workers``' one query and its arguments, for a caller that sends it with others in one round trip
    (``compiled.pipelined``) and reads its rows with ``workers_from_rows``."""
    return _WORKERS, {"task": task_pk, "cycle": cycle}


def workers_from_rows(task: Task, cycle: int, rows: Iterable[tuple[Any, ...]]) -> CycleWorkers:
    """``cycle_workers``' record from its query's rows (``_rows``, or ``workers_query`` sent by the caller)."""
    actors: dict[int, Actor] = {}

    def actor_of(pk: int, name: str, kind: str, user: Any, created: Any) -> Actor:
        found = actors.get(pk)
        if found is None:
            found = actors[pk] = Actor.from_db(connection.alias, _ACTOR_FIELDS, (pk, name, kind, user, created))
        return found

    current = 1
    claims: list[KernelClaim] = []
    claimants: dict[int, Actor] = {}
    submitters: dict[int, Actor] = {}
    links: list[KernelLink] = []
    tokens: list[tuple[int, str]] = []
    contracts: list[ContractAcceptance] = []
    own: Actor | None = None
    for src, _, at, number, pk, name, kind, user, created, text, flag, row in rows:
        if src == _CURRENT:
            current = int(number) if number is not None else 1
        elif src == _CLAIM:
            claims.append(KernelClaim(name, number, at))
            if number == cycle:  # a claimant of this cycle (_claims_of), read from the task's claims
                claimants.setdefault(pk, actor_of(pk, name, kind, user, created))
        elif src == _SUBMISSION:
            if pk not in claimants:
                submitters.setdefault(pk, actor_of(pk, name, kind, user, created))
        elif src == _LINK:
            links.append(KernelLink(text, name, bool(flag)))
        elif src in (_TOKEN, _REVIEWER_TOKEN):
            tokens.append((pk, text))
        elif src == _CONTRACT:
            contract = ContractAcceptance.from_db(
                connection.alias, _CONTRACT_FIELDS, (row, task.pk, number, text, pk, at)
            )
            contract.accepted_by = actor_of(pk, name, kind, user, created)
            contracts.append(contract)
        else:  # _REVIEWER
            own = actor_of(pk, name, kind, user, created)
    workers = (*claimants.values(), *submitters.values())
    boundaries = boundaries_from((*workers, *([own] if own is not None else [])), tokens)
    return CycleWorkers(
        task=task,
        cycle=cycle,
        claims=tuple(claims),
        claimants=tuple(claimants.values()),
        submitters=tuple(submitters.values()),
        workers=tuple(kernel_actor(a, boundaries[a.pk]) for a in workers),
        links=tuple(links),
        contract=contract_among(cycle, contracts),
        current_cycle=current,
        reviewer=own,
        verifier=kernel_actor(own, boundaries[own.pk]) if own is not None else None,
    )


# --- the same rules as SQL, for choosing among many items at once ----------------------------------------------------


def _blank(column: str) -> Q:
    """``column`` holds only spaces (names and boundaries are never empty; the kernel's ``strip`` also drops other
    whitespace, such rare values are left to the exact check)."""
    return Q(Exact(Trim(column), Value("")))


def _unnamed(actor: str | None = None) -> Q:
    """The actor (this row, or the one in foreign key ``actor``) has no stable name: none at all, or a blank one."""
    if actor is None:
        return _blank("name")
    return Q(**{f"{actor}__isnull": True}) | _blank(f"{actor}__name")


#: The printable ASCII characters other than the space: none of them is whitespace to Python's ``str.strip``.
_PRINTABLE: Final = (33, 126)


def _plain(column: str) -> Q:
    """``column`` (a name or a boundary) starts and ends with a printable ASCII character other than the space, so the
    kernel's ``strip`` leaves it as it is and it is certainly not blank (NULL is not plain)."""
    first, last = Coalesce(Ord(Left(column, 1)), 0), Coalesce(Ord(Right(column, 1)), 0)
    return Q(Range(first, _PRINTABLE)) & Q(Range(last, _PRINTABLE))


def _clear(actor: str = "") -> Q:
    """The actor (this row, or the one in foreign key ``actor``) as the kernel reads it without doubt: a plain name and
    a known kind (``kernel_actor`` refuses an unknown one)."""
    prefix = f"{actor}__" if actor else ""
    return _plain(f"{prefix}name") & Q(**{f"{prefix}kind__in": list(kactors.ActorKind)})


def rails_certainly_refuse(verifier: Any) -> Q:
    """A condition on ``Verification`` rows: the decision rails (``reviews.services.claims._rail_refusal``, i.e.
    ``check_approval_cycle`` and ``check_verifier`` over ``cycle_workers``) certainly refuse the actor whose pk is
    ``verifier`` (a value or an expression) on that verification. Built from the same row sources as
    ``cycle_workers`` (``_claims_of``, ``_submissions_of``, ``_links_of``, the tokens' boundaries and the portal's
    own), so that one query can pass over every item an actor may not decide instead of running the rails item by
    item (tests/reviews/test_claim_filter.py compares the two over generated cases).

    It only ever answers for a refusal, never "may decide": that is ``rails_uncertain``'s part (where neither holds,
    the rails allow), and the caller runs the exact rails where it holds.
    Each condition is a refusal of the rails:

    - no subject (no task or no cycle), or the approval's cycle is older than the task's latest (``stale-cycle``);
    - the verifier is unnamed, or a worker of the cycle or a link's committer is unnamed (``unnamed-actor``);
    - the verifier is a worker of the cycle (``worker-self-verification``) or committed a link of the task,
      superseded or not (``verifier-authored-work``);
    - the verifier shares a boundary with a worker (``shared-execution-boundary``): a plain boundary of one of its
      tokens (``_plain``), or the portal's.

    One ``EXISTS`` per source (each planned subquery costs the claim query planning time on every call).
    """
    task, cycle = OuterRef("task"), OuterRef("cycle")
    # The verifier's own facts do not depend on the row: the database answers them once per query. Its boundaries: the
    # plain ones only, certainly not blank to the kernel (which drops blank ones); any other is ``rails_uncertain``.
    verifier_boundaries = ApiToken.objects.filter(Q(actor=verifier) & _plain("boundary")).values("boundary")
    verifier_is_portal = Exists(Actor.objects.filter(pk=verifier, name=PORTAL_ACTOR_NAME))
    verifier_in_portal = verifier_is_portal | Exists(ApiToken.objects.filter(actor=verifier, boundary=PORTAL_BOUNDARY))

    def bars(actor: str) -> Q:
        """The worker at ``actor`` makes the rails refuse: it is the verifier, unnamed, or shares a boundary."""
        return (
            Q(**{actor: verifier})
            | _unnamed(actor)
            | Q(**{f"{actor}__tokens__boundary__in": verifier_boundaries})
            | (Q(**{f"{actor}__name": PORTAL_ACTOR_NAME}) & Q(verifier_in_portal))
            | (Q(**{f"{actor}__tokens__boundary": PORTAL_BOUNDARY}) & Q(verifier_is_portal))
        )

    return (
        Q(task__isnull=True)
        | Q(cycle__isnull=True)
        | Exists(_cycles_of(task).filter(number__gt=cycle))
        | Exists(Actor.objects.filter(Q(pk=verifier) & _unnamed()))
        | Exists(_claims_of(task, cycle).filter(bars("actor")))
        | Exists(_submissions_of(task, cycle).filter(bars("submitted_by")))
        | Exists(_links_of(task).filter(Q(committing_actor=verifier) | _unnamed("committing_actor")))
    )


def rails_uncertain(verifier: Any) -> Q:
    """A condition on ``Verification`` rows: where ``rails_certainly_refuse(verifier)`` does not hold, the SQL form
    cannot vouch that the rails allow the actor whose pk is ``verifier`` (a value, or an expression such as the
    portal user's actor as a subquery: NULL while the user has none) to decide it. Where neither holds the rails
    certainly allow it (tests/reviews/test_claim_filter.py compares the three answers over generated cases), so
    "Next item" leases it without running them; where this holds, the exact rails decide.

    Each condition is a fact the SQL form reads less exactly than the kernel:

    - the task has no cycle row numbered as the item's cycle (the current cycle is then not proven to be it);
    - the verifier is not a stored actor with a plain name and a known kind (``_clear``), or has a boundary that is
      not plain (the SQL form compares only plain boundaries);
    - a worker of the cycle (a claimant, a submitter) is not clear, or a link's committer's name is not plain.
    """
    task, cycle = OuterRef("task"), OuterRef("cycle")
    return (
        ~Exists(_cycles_of(task).filter(number=cycle))
        | ~Exists(Actor.objects.filter(Q(pk=verifier) & _clear()))
        | Exists(ApiToken.objects.filter(Q(actor=verifier) & ~_plain("boundary")))
        | Exists(_claims_of(task, cycle).filter(~_clear("actor")))
        | Exists(_submissions_of(task, cycle).filter(~_clear("submitted_by")))
        | Exists(_links_of(task).filter(~_plain("committing_actor__name")))
    )


__all__ = [
    "CycleWorkers",
    "cycle_workers",
    "rails_certainly_refuse",
    "rails_uncertain",
    "workers_from_rows",
    "workers_of_verification_query",
    "workers_query",
]
