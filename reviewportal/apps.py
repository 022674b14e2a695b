from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "reviewportal"
    verbose_name = "Review portal"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from reviewportal import checks  # noqa: F401 - registers the system checks
