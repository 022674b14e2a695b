"""The domain app's configuration: every signal, guard and post-migrate hook is connected here, once."""

from __future__ import annotations

from django.apps import AppConfig


def _reinstall_rollups(sender: object, using: str = "default", **kwargs: object) -> None:
    """SQLite drops a table's triggers when a migration rebuilds it: re-install the rollups' after every migrate."""
    from django.db import connections

    from verification.records import rollups

    if getattr(sender, "label", None) == "verification":
        rollups.ensure_installed(connections[using])


class VerificationConfig(AppConfig):
    """The domain app: models, services, selectors, tasks and API around the pure kernel (STYLE.md: the layers)."""

    name = "verification"
    verbose_name = "Verification"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_migrate

        from verification import db_guards, db_roles
        from verification.trust.services import security_log

        # SQLite needs the purge function on every connection, and the guards of every append-only table (the one
        # registry, ``db_guards.APPEND_ONLY_TABLES``) re-checked after each migrate.
        db_guards.connect_signals()
        # Least privilege (SPEC §8): after a migrate as the owner, the application role's grants follow new tables.
        db_roles.connect_signals()
        post_migrate.connect(_reinstall_rollups, dispatch_uid="verification.records.rollups")
        # PostgreSQL: timestamps read with psycopg's C parser, labelled as Django labels them (issue 15).
        connection_created.connect(_timestamps_in_c, dispatch_uid="verification.pgwire.timestamptz")
        # The security log listens to sign-ins, the pin log, tokens, decisions and finding events (issue 7 §4).
        security_log.connect_signals()
        # The composition root: the domain takes submissions through the API's serializers (the one validation
        # layer) without importing the API (STYLE.md: api -> domain).
        from verification.api.serializers.submissions import submission_from_body
        from verification.runs import submissions

        submissions.use_parser(submission_from_body)


def _timestamps_in_c(sender: object, connection: object, **kwargs: object) -> None:
    from verification import pgwire

    pgwire.use_c_timestamptz_loader(connection)
