from django.apps import AppConfig


class VerificationConfig(AppConfig):
    """The domain app: models, services, selectors, tasks and API around the pure kernel (STYLE.md: the layers)."""

    name = "verification"
    verbose_name = "Verification"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Least privilege (SPEC §8): after a migrate as the owner, the application role's grants follow new tables.
        from verification import db_roles

        db_roles.connect_signals()
        # The composition root: the domain takes submissions through the API's serializers (the one validation
        # layer) without importing the API (STYLE.md: api -> domain).
        from verification import submissions
        from verification.api.serializers import submission_from_body

        submissions.use_parser(submission_from_body)
