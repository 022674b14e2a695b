"""``manage.py revoke_signing_key KID --reason "..."``: revoke one of the portal's keys (compromise, SPEC §8).

The key leaves the JWKS, is listed with time and reason at revoked.json, and verification with it fails
``revoked-key`` from then on. Its receipts stay on record. Revoking the active key leaves the portal unable to sign
until ``manage.py create_signing_key`` makes a new one.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from verification.kernel.errors import KernelError
from verification.trust.selectors import active_signing_key
from verification.trust.services.keys import SYSTEM_REVOKE, signing_key_revoke


class Command(BaseCommand):
    help = "Revoke one of the portal's signing keys: it leaves the JWKS and fails verification from now on."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key_id", metavar="KID")
        parser.add_argument("--reason", required=True, help="why the key is revoked (published in revoked.json)")
        parser.add_argument("--actor", default="", help="who is revoking (recorded in the pin log)")

    def handle(self, *args: Any, **options: Any) -> None:
        label = f"{SYSTEM_REVOKE} ({options['actor'].strip()})" if options["actor"].strip() else SYSTEM_REVOKE
        try:
            entry = signing_key_revoke(key_id=options["key_id"], reason=options["reason"], actor_label=label)
        except KernelError as exc:
            raise CommandError(f"{exc.reason.value}: {exc.detail}") from None
        self.stdout.write(f"revoked {entry.key_id} at {entry.created_at.isoformat()}: {entry.reason}")
        if active_signing_key() is None:
            self.stderr.write(
                "the portal has no active signing key now: run 'manage.py create_signing_key' before it signs again"
            )
