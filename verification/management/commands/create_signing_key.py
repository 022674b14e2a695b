"""``manage.py create_signing_key``: make sure the portal has an active signing key (SPEC §8). Idempotent.

Creates ``<var>/keys/<key_id>.pem`` (mode 0600, exclusive create) unless REVIEWPORTAL_SIGNING_KEY(_FILE) provides
the key, records it as the active ``SigningKey`` and pins it for proof-signing in the pin log. Prints the key id and
its fingerprint in groups of four, to confirm out of band. Exits 0 when a usable active key already exists.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from verification.trust import root as trust
from verification.trust import signing
from verification.trust.models import SigningKey
from verification.trust.services.keys import signing_key_create
from verification.trust.signing import SigningKeyUnavailable


def describe(row: SigningKey) -> str:
    """Where the private key of ``row`` lives, for the operator."""
    source = signing.secret_source()
    return f"from {source}" if source is not None else str(signing.key_path(row.key_id))


class Command(BaseCommand):
    help = "Create the portal's signing key if there is no active one (idempotent); print its fingerprint."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            row, created = signing_key_create()
        except SigningKeyUnavailable as exc:
            raise CommandError(f"{exc.reason.value}: {exc.detail}") from None
        verb = "created signing key" if created else "signing key already active:"
        self.stdout.write(f"{verb} {row.key_id} ({describe(row)})")
        self.stdout.write(f"fingerprint: {row.public.fingerprint_grouped}")
        if not trust.journal_exists():
            self.stderr.write("no pin journal yet: an existing deployment seals its pin log once with "
                              "'manage.py seal_pin_journal' (docs/trust-root.md)")
