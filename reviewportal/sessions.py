"""The idle timeout without a write per request (issue 15).

A session ends ``SESSION_IDLE_SECONDS`` after it was last used (SPEC §8, README: security baseline). Django's way,
``SESSION_SAVE_EVERY_REQUEST``, writes the session row on every request (on PostgreSQL a BEGIN, the UPDATE and a
COMMIT) to move its end by the few seconds since the previous one. Here a session that a request read and did not
change is saved (its end and its cookie renewed) only when that moves its end by more than
``SESSION_RENEW_AFTER_SECONDS`` (a minute by default, at most a tenth of the idle timeout); a changed session is saved
as always. So an idle session still ends, at most that much earlier than the full timeout after its last request,
and an active one never does.

The engine (``SESSION_ENGINE = "reviewportal.sessions"``) is Django's database engine that remembers the end it read
with the row; ``IdleSessionMiddleware`` replaces ``SessionMiddleware``.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from typing import Any, Final

from django.conf import settings
from django.contrib.sessions.backends import db
from django.contrib.sessions.backends.base import UpdateError
from django.contrib.sessions.middleware import SessionMiddleware
from django.db import DatabaseError, router
from django.http import HttpRequest, HttpResponseBase
from django.utils import timezone

from verification.compiled import Compiled, Probe

_SESSION_COLUMNS: Final = ("session_key", "session_data", "expire_date")


@functools.cache
def _session_read(model: Any) -> Compiled:
    """The read of an unexpired session row of ``model``, compiled once (``verification.compiled``) and sent prepared:
    every signed-in request sends it, and compiling it through the ORM cost more than running it (issue 15)."""
    return Compiled(
        "session-read",
        model,
        lambda session_key, now: model.objects.filter(session_key=session_key, expire_date__gt=now).values_list(
            *_SESSION_COLUMNS
        ),
        {
            "session_key": Probe("probe-session-key-1", "probe-session-key-2"),
            "now": Probe.instant(model._meta.get_field("expire_date")),
        },
        prepared=True,
    )


@functools.cache
def _session_update(model: Any) -> Compiled:
    """The UPDATE of a session row's data and end, compiled once and sent prepared: every decision saves the session
    (the review loop's progress), and building the UPDATE through the ORM cost more than sending it (issue 15)."""
    return Compiled(
        "session-save",
        model,
        lambda session_key, data, expire: model.objects.filter(session_key=session_key),
        {
            "session_key": Probe("probe-session-key-1", "probe-session-key-2"),
            "data": Probe("probe-data-1", "probe-data-2"),
            "expire": Probe.instant(model._meta.get_field("expire_date")),
        },
        update=lambda session_key, data, expire: {"session_data": data, "expire_date": expire},
        prepared=True,
    )


class SessionStore(db.SessionStore):
    """Django's database sessions, plus the stored end of the session read (``stored_expiry``; None: none read)."""

    stored_expiry: datetime | None = None

    def _get_session_from_db(self) -> Any:
        """Django's read of the unexpired session row (None, and the key forgotten, when there is none), by a
        statement compiled once (``_session_read``)."""
        rows = _session_read(self.model).rows(session_key=self.session_key, now=timezone.now())
        row = self.model.from_db(router.db_for_read(self.model), _SESSION_COLUMNS, rows[0]) if rows else None
        if row is None:
            self._session_key = None
        self.stored_expiry = None if row is None else row.expire_date
        return row

    def save(self, must_create: bool = False) -> None:
        """Django's save, but an existing session's UPDATE is sent alone: Django wraps it in a transaction of its own
        (on PostgreSQL a BEGIN and a COMMIT around one statement, two more round trips), which only the INSERT of a new
        session needs. A session deleted meanwhile (0 rows) or a database error is ``UpdateError``, as in Django."""
        if must_create or self.session_key is None:
            super().save(must_create=must_create)
            return
        data = self._get_session(no_load=False)
        try:
            updated = _session_update(self.model).run(
                session_key=self.session_key, data=self.encode(data), expire=self.get_expiry_date()
            )
        except DatabaseError:
            raise UpdateError from None
        if not updated:
            raise UpdateError

    def renewal_due(self) -> bool:
        """Whether saving this session now would move its stored end by more than ``SESSION_RENEW_AFTER_SECONDS``
        (False for a session no request read: nothing used it)."""
        if self.stored_expiry is None:
            return False
        moved = self.get_expiry_date() - self.stored_expiry
        return moved > timedelta(seconds=settings.SESSION_RENEW_AFTER_SECONDS)


class IdleSessionMiddleware(SessionMiddleware):
    """``SessionMiddleware`` that also saves an unchanged session whose renewal is due (``SessionStore.renewal_due``),
    with ``SESSION_SAVE_EVERY_REQUEST`` off."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        session = getattr(request, "session", None)
        if isinstance(session, SessionStore) and not session.modified and session.renewal_due():
            session.modified = True  # saved, and its cookie sent again, by SessionMiddleware
        return super().process_response(request, response)  # type: ignore[no-any-return]
