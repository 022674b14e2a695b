from django.apps import AppConfig


class VerificationConfig(AppConfig):
    """The domain app: models, services, selectors, tasks and API around the pure kernel (STYLE.md: the layers)."""

    name = "verification"
    verbose_name = "Verification"
    default_auto_field = "django.db.models.BigAutoField"
