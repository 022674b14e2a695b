"""``manage.py rotate_signing_key``: retire the active key and make a new one active (SPEC §8).

The retired key stays in the JWKS and its receipts keep verifying; its private key file is discarded. With
REVIEWPORTAL_SIGNING_KEY(_FILE) set, the provisioned key (which must be new) becomes the active one.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from verification.management.commands.create_signing_key import describe
from verification.trust.services.keys import signing_key_rotate
from verification.trust.signing import SigningKeyUnavailable


class Command(BaseCommand):
    help = "Retire the active signing key and make a new one active (the retired key keeps verifying)."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            old, new = signing_key_rotate()
        except SigningKeyUnavailable as exc:
            raise CommandError(f"{exc.reason.value}: {exc.detail}") from None
        if old is not None:
            self.stdout.write(f"retired {old.key_id} (still published; its receipts keep verifying)")
        self.stdout.write(f"active signing key {new.key_id} ({describe(new)})")
        self.stdout.write(f"fingerprint: {new.public.fingerprint_grouped}")
