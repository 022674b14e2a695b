"""Waking a ``wait_ms`` submission when its run commits (issue 15: a bounded wait without polling).

Without a broker the run is eager: it finishes inside the submitting request, before the view waits at all. With a
broker a Celery worker runs it, and the waiting request is woken by a notification sent after the run's commit:

- a Redis broker (``redis://``, ``rediss://``): Redis pub/sub on the broker, channel ``reviewportal:run:<id>``, the
  message the wall-clock time (Unix seconds) at which the announcement was made, after the commit returned (waiters
  ignore it; ``bench/bench_wait.py`` measures each answer from it);
- any other broker on PostgreSQL: ``NOTIFY reviewportal_run, '<id>'`` (the waiter ``LISTEN``s on a connection of
  its own; a notification is delivered when the notifying transaction commits).

The waiter subscribes *before* it reads the verification again, so a run that commits between the first read and
the subscription is seen by that read, and one that commits after it is announced to the subscription: no lost
wake-up, and no sleeping. Where neither channel exists (another broker on SQLite, a development setup) ``wait``
answers None and the caller falls back to reading at intervals. A notification that cannot be sent is logged, never
raised: the run is committed, and a waiter's deadline still bounds its wait.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Final

from django.conf import settings
from django.db import connection

logger = logging.getLogger(__name__)

CHANNEL_PREFIX: Final = "reviewportal:run:"
PG_CHANNEL: Final = "reviewportal_run"

_lock = threading.Lock()
_redis_clients: dict[str, Any] = {}


def _broker() -> str:
    if getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
        return ""
    return str(getattr(settings, "CELERY_BROKER_URL", None) or "")


def _redis_url() -> str | None:
    url = _broker()
    return url if url.lower().startswith(("redis://", "rediss://")) else None


def _redis(url: str) -> Any:
    """One client (and its connection pool) per broker URL and process."""
    with _lock:
        client = _redis_clients.get(url)
        if client is None:
            import redis

            client = _redis_clients[url] = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
        return client


def mode() -> str | None:
    """How waiters are woken here: ``redis``, ``postgresql``, or None (no broker, or no channel: read at intervals)."""
    if _redis_url() is not None:
        return "redis"
    if _broker() and connection.vendor == "postgresql":
        return "postgresql"
    return None


def announce(verification_id: uuid.UUID | str) -> None:
    """Tell the waiters of ``verification_id`` that its run committed (call after the commit)."""
    which = mode()
    if which is None:
        return
    try:
        if which == "redis":
            _redis(str(_redis_url())).publish(f"{CHANNEL_PREFIX}{verification_id}", f"{time.time():.6f}")
        else:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, %s)", [PG_CHANNEL, str(verification_id)])
    except Exception as exc:  # noqa: BLE001 - the run is committed; a waiter's deadline bounds its wait
        logger.warning("verification %s: announcing its run failed (%r)", verification_id, exc)


@contextlib.contextmanager
def subscription(verification_id: uuid.UUID | str) -> Iterator[Callable[[float], bool] | None]:
    """Subscribe to ``verification_id``'s announcement; yields ``wait(seconds) -> announced?`` (None: no channel).

    Read the verification again *inside* the block before waiting (see the module docstring)."""
    which = mode()
    if which == "redis":
        pubsub = _redis(str(_redis_url())).pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(f"{CHANNEL_PREFIX}{verification_id}")

            def wait_redis(seconds: float) -> bool:
                deadline = time.monotonic() + seconds
                while (remaining := deadline - time.monotonic()) > 0:
                    if pubsub.get_message(timeout=remaining) is not None:
                        return True
                return False

            yield wait_redis
        finally:
            with contextlib.suppress(Exception):
                pubsub.close()
        return
    if which == "postgresql":
        import psycopg

        params = connection.get_connection_params()
        listener = psycopg.connect(**params, autocommit=True)
        try:
            listener.execute(f"LISTEN {PG_CHANNEL}")
            wanted = str(verification_id)

            def wait_pg(seconds: float) -> bool:
                deadline = time.monotonic() + seconds
                while (remaining := deadline - time.monotonic()) > 0:
                    for note in listener.notifies(timeout=remaining):
                        if note.payload == wanted:
                            return True
                return False

            yield wait_pg
        finally:
            listener.close()
        return
    yield None
