"""``manage.py seal_pin_journal``: seal an existing deployment's pin log into a new pin journal (SPEC §8).

A one-time, admin-attended step for a deployment that predates the journal (``docs/trust-root.md``). It trusts the
database this once: check every fingerprint it prints against the ones confirmed out of band before relying on it.
Refuses when a journal exists already. A fresh install needs none of this: ``create_signing_key`` starts the journal.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from verification.kernel.errors import KernelError
from verification.trust.root import JournalExists
from verification.trust.services.keys import pin_journal_seal


class Command(BaseCommand):
    help = "Seal the current pin log and the portal's keys into a new pin journal (one time; refuses if one exists)."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            path, report = pin_journal_seal()
        except JournalExists as exc:
            raise CommandError(f"refused: {exc}; the journal is sealed once and only appended to after") from None
        except KernelError as exc:
            raise CommandError(f"{exc.reason.value}: {exc.detail}") from None
        self.stdout.write(f"sealed the pin log into {path}; check these fingerprints out of band:")
        for line in report:
            self.stdout.write(f"  {line}")
