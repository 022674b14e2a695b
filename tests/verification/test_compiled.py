"""Queries compiled once (``verification.compiled``, issue 15): the same rows and counts as the ORM's own query, the
arguments in their places, and a value that shapes the SQL refused rather than answered wrongly."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db.models import F
from django.utils import timezone

from verification.compiled import Compiled, Probe
from verification.runs.models import Task, Verification

pytestmark = pytest.mark.django_db

PK = Verification._meta.pk
AT = Verification._meta.get_field("started_at")


def _values(verification_pk: uuid.UUID, since: datetime) -> object:
    return Verification.objects.filter(pk=verification_pk, submitted_at__gte=since).values_list(
        "pk", "submitted_at", "flagged", "verdict"
    )


VALUES = Compiled(
    "test-values",
    Verification,
    _values,
    {
        "verification_pk": Probe.key_of(Verification),
        "since": Probe(datetime(2001, 1, 1, tzinfo=UTC), datetime(2002, 1, 1, tzinfo=UTC), AT),
    },
)


def _items(make_verification: Callable[..., Any], n: int) -> list[Verification]:
    items = [make_verification() for _ in range(n)]
    Verification.objects.filter(pk=items[0].pk).update(flagged=True, verdict="UNKNOWN")
    return [Verification.objects.get(pk=item.pk) for item in items]


def test_rows_are_the_orms_rows_in_pythons_types(make_verification: Callable[..., Any]) -> None:
    items = _items(make_verification, 3)
    for item in items:
        for since in (item.submitted_at - timedelta(seconds=1), item.submitted_at + timedelta(seconds=1)):
            expected = list(_values(item.pk, since))
            assert VALUES.rows(verification_pk=item.pk, since=since) == expected
    found = VALUES.rows(verification_pk=items[0].pk, since=items[0].submitted_at - timedelta(days=1))
    assert found and isinstance(found[0][0], uuid.UUID) and isinstance(found[0][1], datetime)
    assert found[0][2] is True  # SQLite's 1 came back as a bool


def test_an_update_counts_the_rows_it_changed(make_verification: Callable[..., Any]) -> None:
    item = make_verification()
    count = Compiled(
        "test-update",
        Verification,
        lambda verification_pk, when: Verification.objects.filter(pk=verification_pk, failed_at__isnull=True),
        {
            "verification_pk": Probe.key_of(Verification),
            "when": Probe(datetime(2001, 1, 1, tzinfo=UTC), datetime(2002, 1, 1, tzinfo=UTC), AT),
        },
        update=lambda verification_pk, when: {"attempts": F("attempts") + 1, "started_at": when},
    )
    before = Verification.objects.get(pk=item.pk).attempts
    when = timezone.now()
    assert count.run(verification_pk=item.pk, when=when) == 1
    assert count.run(verification_pk=uuid.uuid4(), when=when) == 0
    row = Verification.objects.get(pk=item.pk)
    assert (row.attempts, row.started_at) == (before + 1, when)


def test_a_value_that_shapes_the_sql_is_refused() -> None:
    shaped = Compiled(
        "test-shaped",
        Verification,
        lambda pks: Verification.objects.filter(pk__in=pks).values_list("pk"),
        {"pks": Probe([uuid.UUID(int=5)], [uuid.UUID(int=6), uuid.UUID(int=7)])},
    )
    with pytest.raises(AssertionError, match="'pks' is not a plain parameter"):
        shaped.rows(pks=[uuid.uuid4()])


def test_the_arguments_must_be_the_declared_ones() -> None:
    with pytest.raises(TypeError, match="expected"):
        VALUES.rows(verification_pk=uuid.uuid4())


def test_contract_of_loads_what_select_related_loads(signing_key: Any) -> None:
    from verification.actors.services.actors import actor_create
    from verification.kernel.digests import sha256_digest
    from verification.runs.models import ContractAcceptance
    from verification.runs.selectors import contract_of
    from verification.runs.services.rubrics import rubric_register
    from verification.runs.services.tasks import contract_accept, task_create

    owner = actor_create(name="compiled-owner", kind="contract_owner")
    document = {
        "name": "compiled",
        "criteria": [
            {
                "id": "d",
                "kind": "digest",
                "observable": "evidence.content-digest",
                "expression": f'(= notes "{sha256_digest(b"x")}")',
            }
        ],
    }
    rubric = rubric_register(actor=owner, document=document)
    task = task_create(actor=owner, title="compiled")
    assert contract_of(task, 1) is None
    contract_accept(actor=owner, task=task, rubric_hash=rubric.rubric_hash)
    found = contract_of(task, 1)
    expected = ContractAcceptance.objects.select_related("rubric", "accepted_by").get(task=task, cycle=1)
    assert found is not None and found.pk == expected.pk
    for got, want in ((found, expected), (found.rubric, expected.rubric), (found.accepted_by, expected.accepted_by)):
        fields = [f.attname for f in type(want)._meta.concrete_fields]
        assert [getattr(got, f) for f in fields] == [getattr(want, f) for f in fields]
        assert got._state.adding is False and got._state.db == want._state.db
    assert contract_of(task, 2) is None


def test_related_loads_and_links_as_select_related_or_none_through_a_null_relation(
    make_verification: Callable[..., Any],
) -> None:
    from verification.compiled import Related

    item = make_verification()  # no task, no rubric, no submitter
    related = Related(Verification, ("task", "rubric", "submitted_by", "supersedes"))
    values = Verification.objects.filter(pk=item.pk).values_list(*related.columns()).get()
    loaded = related.load(values)
    root = loaded[""]
    assert isinstance(root, Verification) and root.pk == item.pk and root._state.adding is False
    assert [loaded[p] for p in ("task", "rubric", "submitted_by", "supersedes")] == [None] * 4
    assert root.task is None and root.supersedes is None  # linked as select_related links them
    assert related.width == len(values)


def test_related_builds_the_instances_django_builds_and_defers_to_from_db_for_init_receivers(
    make_verification: Callable[..., Any],
) -> None:
    from django.db.models import Model, signals

    from verification.compiled import Related, _fast_init

    item = make_verification()
    related = Related(Verification, ())
    values = Verification.objects.filter(pk=item.pk).values_list(*related.columns()).get()
    names = tuple(f.attname for f in Verification._meta.concrete_fields)
    want = Verification.from_db("default", names, values)
    got = related.root(values)
    assert type(got) is Verification
    assert got.__dict__.keys() == want.__dict__.keys()
    assert {k: v for k, v in got.__dict__.items() if k != "_state"} == {
        k: v for k, v in want.__dict__.items() if k != "_state"
    }
    assert (got._state.adding, got._state.db) == (False, "default") == (want._state.adding, want._state.db)
    assert got == want and got.task is None  # the relation reads (and caches) as on Django's instance
    assert got._state.fields_cache == {"task": None}
    assert not signals.pre_init.receivers and not signals.post_init.receivers  # so that was the short way

    class OwnInit(Model):  # a model that builds its instances itself is always built by them
        class Meta:
            abstract = True
            app_label = "verification"

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)

    assert _fast_init(Verification) and not _fast_init(OwnInit)

    # A receiver of post_init (or pre_init) expects the signal for every instance: then it is Django's from_db.
    seen: list[Any] = []

    def receiver(sender: Any, instance: Any, **kwargs: Any) -> None:
        seen.append(instance)

    signals.post_init.connect(receiver, sender=Verification)
    try:
        again = related.root(values)
    finally:
        signals.post_init.disconnect(receiver, sender=Verification)
    assert seen == [again] and again.pk == item.pk


@pytest.mark.postgres
def test_literals_write_the_constants_into_the_text_and_keep_the_arguments_as_parameters(signing_key: Any) -> None:
    from verification.actors.services.actors import actor_create
    from verification.runs.services.tasks import task_create

    owner = actor_create(name="literal-owner", kind="contract_owner")
    odd = "50% 'off' \\ %s"
    wanted = task_create(actor=owner, title="wanted")
    Task.objects.filter(pk=wanted.pk).update(external_ref=odd)
    task_create(actor=owner, title="other")

    def build(title: str) -> Any:
        return Task.objects.filter(title=title, external_ref=odd, external_ref__startswith="50%").values_list("pk")

    plain = Compiled("literals-off", Task, build, {"title": Probe("a", "b")}, prepared=True)
    literal = Compiled("literals-on", Task, build, {"title": Probe("a", "b")}, prepared=True, literals=True)
    sql, params = literal.statement(title="wanted")
    placeholders = re.findall(r"%%|%s", sql)
    assert params == ["wanted"] and placeholders.count("%s") == 1
    assert " E'50%% ''off'' \\\\ %%s'" in sql  # psycopg's quoting, each % doubled for the placeholders' syntax
    assert len(plain.statement(title="wanted")[1]) == 3
    assert literal.rows(title="wanted") == plain.rows(title="wanted") == [(wanted.pk,)]
    assert literal.rows(title="other") == [] and literal.rows(title="wanted") == [(wanted.pk,)]  # prepared, again


def test_related_paths_name_their_parent_first() -> None:
    from verification.compiled import Related

    with pytest.raises(ValueError, match="its parent 'evidence' must come first"):
        Related(Verification, ("evidence__admitted_by",)).columns()
    with pytest.raises(ValueError, match="is not a relation"):
        Related(Verification, ("verdict",)).columns()


# --- Insert ---------------------------------------------------------------------------------------------------------


def _stored(model: Any, pk: Any) -> dict[str, Any]:
    row = model.objects.filter(pk=pk).values().get()
    row.pop(model._meta.pk.attname)
    return row


def test_insert_writes_the_row_create_writes() -> None:
    from verification.compiled import Insert

    now = timezone.now()
    fields = {
        "rubric_hash": "a" * 64,
        "submission_hash": "b" * 64,
        "submitted_at": now,
        "created_at": now,
        "cycle": 3,
        "body": {"evidence": [{"symbol": "s", "content_base64": "sha256:" + "c" * 64}], "n": 1},
    }
    made = Verification.objects.create(**fields)
    (inserted,) = Insert(Verification)([Verification(**fields)])
    assert inserted.pk != made.pk and inserted._state.adding is False and inserted._state.db == "default"
    assert _stored(Verification, inserted.pk) == _stored(Verification, made.pk)  # defaults, JSON, instants alike
    (defaulted,) = Insert(Verification)([Verification(rubric_hash="a" * 64, submission_hash="b" * 64)])
    assert Verification.objects.get(pk=defaulted.pk).created_at is not None  # its default, as save() fills it


def test_insert_reads_back_auto_keys_across_batches(make_verification: Callable[..., Any]) -> None:
    """More rows than one statement may carry (SQLite's parameter limit): several INSERTs, every key read back."""
    from django.db import connection

    from verification.compiled import Insert
    from verification.evidence.models import VerificationEvidence

    verification = make_verification()
    from verification.actors.services.actors import actor_create, token_issue
    from verification.evidence.services import evidence_admit

    agent = actor_create(name="insert-agent", kind="agent")
    token, _ = token_issue(actor=agent, boundary="insert-test", scopes=["verifications:write"])
    evidence = evidence_admit(actor=agent, token=token, content=b"bound 300 times")
    rows = [
        VerificationEvidence(verification=verification, symbol=f"s{n}", evidence=evidence, as_manifest=n == 0)
        for n in range(300)
    ]
    fields = [f for f in VerificationEvidence._meta.concrete_fields if not f.primary_key]
    batch = connection.ops.bulk_batch_size(fields, rows)
    Insert(VerificationEvidence)(rows)
    stored = dict(VerificationEvidence.objects.filter(verification=verification).values_list("symbol", "id"))
    assert {row.symbol: row.pk for row in rows} == stored and len(stored) == 300
    assert VerificationEvidence.objects.get(pk=rows[0].pk).as_manifest is True
    if connection.vendor == "sqlite":
        assert batch < 300  # the batches were exercised


def test_insert_takes_only_new_instances_of_its_model_and_plain_values(make_verification: Callable[..., Any]) -> None:
    from verification.compiled import Insert

    insert = Insert(Verification)
    with pytest.raises(ValueError, match="new Verification instances"):
        insert([make_verification()])  # a stored row is never inserted again
    with pytest.raises(ValueError, match="new Verification instances"):
        insert([Verification(), Task()])
    with pytest.raises(TypeError, match="an SQL expression is not a value"):
        insert([Verification(rubric_hash="a" * 64, submission_hash="b" * 64, cycle=F("cycle") + 1)])
    assert insert([]) == []
