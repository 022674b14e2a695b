"""A Celery worker keeps its database connection between tasks as the web server keeps it between requests (issue
15): ``reviewportal.celery.close_old_connections`` runs before and after each task and closes a connection only when
it is unusable or older than ``CONN_MAX_AGE``; Celery's own Django fixup, which would close every connection around
every task, is kept from doing so (``CELERY_DB_REUSE_MAX``)."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from celery.fixups.django import DjangoWorkerFixup
from celery.signals import task_postrun, task_prerun
from django.db import connection

from reviewportal.celery import app

pytestmark = pytest.mark.django_db(transaction=True)  # no test transaction: a connection may be closed here


class _Task:
    """What the handlers read of a task: its request's ``is_eager``."""

    def __init__(self, *, eager: bool) -> None:
        self.request = SimpleNamespace(is_eager=eager)


def _task(*, eager: bool = False) -> Any:
    return _Task(eager=eager)


def _around_a_task(task: Any) -> None:
    """What a worker does around a task: the fixup's handlers and ours, before and after."""
    fixup = DjangoWorkerFixup(app)
    fixup.on_task_prerun(sender=task)
    task_prerun.send(sender=task, task_id="t", task=task, args=(), kwargs={})
    task_postrun.send(sender=task, task_id="t", task=task, args=(), kwargs={}, retval=None, state="SUCCESS")
    fixup.on_task_postrun(sender=task)


def test_a_usable_connection_is_kept_for_the_next_task() -> None:
    connection.ensure_connection()
    before = connection.connection
    _around_a_task(_task())
    _around_a_task(_task())
    assert connection.connection is before is not None


@pytest.mark.postgres
def test_a_connection_older_than_its_age_is_closed_after_a_task() -> None:
    connection.ensure_connection()
    connection.close_at = time.monotonic() - 1  # CONN_MAX_AGE has run out
    _around_a_task(_task())
    assert connection.connection is None


@pytest.mark.postgres
def test_a_connection_left_outside_autocommit_is_closed_after_a_task() -> None:
    connection.ensure_connection()
    connection.set_autocommit(False)  # a task that left autocommit off (a transaction it never ended)
    _around_a_task(_task())
    assert connection.connection is None


@pytest.mark.postgres
def test_an_eager_task_leaves_its_callers_connection_alone() -> None:
    connection.ensure_connection()
    before = connection.connection
    connection.close_at = time.monotonic() - 1
    task = _task(eager=True)
    task_prerun.send(sender=task, task_id="t", task=task, args=(), kwargs={})
    task_postrun.send(sender=task, task_id="t", task=task, args=(), kwargs={}, retval=None, state="SUCCESS")
    assert connection.connection is before


@pytest.mark.postgres
def test_a_kept_connection_the_server_dropped_is_replaced_before_a_compiled_statement() -> None:
    # A database restart between two tasks: the kept connection is dead; the next task's first statement (here a
    # compiled, prepared read, sent past Django's cursor) checks it first and reconnects instead of failing.
    from verification.runs.selectors import task_get

    connection.ensure_connection()
    _around_a_task(_task())  # the task boundary: the next use checks the connection once
    dead = connection.connection
    dead.close()  # as if the server had gone away
    assert task_get(uuid.uuid4()) is None
    assert connection.connection is not None and connection.connection is not dead
