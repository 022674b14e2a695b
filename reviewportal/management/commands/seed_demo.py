"""``manage.py seed_demo``: one demo login per role, and a review queue with every kind of item; idempotent.

Besides one login per role, a second reviewer (``reviewer2``): the demo's self-review trap is barred for ``reviewer``
(who worked on it) and can be cleared by the other (issue 14). ``--url`` is the address printed (``make run`` passes
its ``HOST`` and ``PORT``). Only the logins and the queue line are printed: Celery's and kombu's chatter while the
items run is held back below ERROR.

Passwords are random, kept in ``<var>/demo-passwords.txt`` (mode 0600) and reused on later runs, so a second run
prints the same logins. The queue items are built through the services (``reviewportal.portal.demo``) and need the
portal's signing key (``manage.py create_signing_key``, which ``make run`` calls first); without one they are skipped.
"""

from __future__ import annotations

import logging
import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from verification.actors.roles import REVIEWER, ROLES

PASSWORD_FILE = "demo-passwords.txt"  # noqa: S105 - a file name
DEMO_URL = "http://127.0.0.1:8000/"
#: The demo logins: one per role, and a second reviewer who may clear what the first is barred from.
SECOND_REVIEWER = "reviewer2"
#: Loggers that report every eagerly run task (INFO) and a missing broker's fallback (WARNING): not the user's news.
CHATTY_LOGGERS = ("celery", "kombu", "amqp")


@contextmanager
def _quiet() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in CHATTY_LOGGERS]
    before = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, before, strict=True):
            logger.setLevel(level)


def read_passwords(path: Path) -> dict[str, str]:
    """``username:password`` lines; anything else in the file is ignored."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    pairs = (line.split(":", 1) for line in lines if ":" in line)
    return {name.strip(): password.strip() for name, password in pairs if name.strip() and password.strip()}


def write_passwords(path: Path, passwords: dict[str, str]) -> None:
    """Replace the file atomically; the temporary file is created with mode 0600."""
    fd, tmp = tempfile.mkstemp(prefix=".demo-passwords.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(f"{name}:{password}\n" for name, password in passwords.items())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


class Command(BaseCommand):
    help = "Create the demo users reviewer, reviewer2, manager and admin and print their logins."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default=DEMO_URL, help=f"the portal's address to print (default {DEMO_URL})")

    def handle(self, *args: Any, **options: Any) -> None:
        url = str(options.get("url") or DEMO_URL)
        if not url.endswith("/"):
            url += "/"
        var = Path(settings.VAR_DIR)
        if not var.is_dir():
            raise CommandError(f"{var} does not exist; run `python -m reviewportal.bootstrap` first")
        path = var / PASSWORD_FILE
        stored = read_passwords(path)
        passwords = dict(stored)
        user_model = get_user_model()
        logins = [(role, role) for role in ROLES] + [(SECOND_REVIEWER, REVIEWER)]
        with transaction.atomic():
            for username, role in logins:
                group = Group.objects.filter(name=role).first()
                if group is None:
                    raise CommandError(f"group {role!r} is missing; run `manage.py migrate` first")
                password = passwords.setdefault(username, secrets.token_urlsafe(12))
                user, created = user_model.objects.get_or_create(username=username)
                if created or not user.check_password(password):
                    user.set_password(password)
                    user.save()
                user.groups.add(group)
        if passwords != stored:
            write_passwords(path, passwords)
        with _quiet():
            queue_line = self._seed_queue(user_model.objects.get(username="reviewer"), url)
        self.stdout.write(f"Demo portal: {url} (passwords kept in {path})")
        for username, role in sorted(logins, key=lambda login: (-ROLES.index(login[1]), login[0])):
            self.stdout.write(f"  {role:<8}  user {username:<9}  password {passwords[username]}")
        self.stdout.write(queue_line)

    def _seed_queue(self, reviewer: Any, url: str) -> str:
        from reviewportal.portal.demo import seed_queue
        from verification.trust.selectors import active_signing_key

        if active_signing_key() is None:
            return "Demo queue: skipped (no signing key yet; run `manage.py create_signing_key`, as make run does)"
        kinds, queued = seed_queue(reviewer=reviewer)
        return (
            f"Demo queue: {queued} items waiting for review at {url}queue/ ({', '.join(kinds)}); "
            f"the self-review trap is for {SECOND_REVIEWER}: reviewer worked on it"
        )
