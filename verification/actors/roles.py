"""Roles are groups: reviewer, manager, admin (created by migration 0001_roles)."""

from __future__ import annotations

from typing import Final

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

REVIEWER: Final = "reviewer"
MANAGER: Final = "manager"
ADMIN: Final = "admin"
ROLES: Final[tuple[str, ...]] = (ADMIN, MANAGER, REVIEWER)  # highest first

# group name -> permission codenames (all in the reviewportal app). Changing this needs a new data migration.
ROLE_PERMISSIONS: Final[dict[str, tuple[str, ...]]] = {
    REVIEWER: ("review_queue", "decide_verification", "view_history"),
    MANAGER: ("view_history", "view_findings", "close_finding"),
    ADMIN: (
        "review_queue",
        "decide_verification",
        "view_history",
        "view_findings",
        "close_finding",
        "administer_keys",
        "administer_users",
        "inspect_chains",
        "inspect_evidence",
        "view_security_log",
    ),
}


def role_of(user: AbstractBaseUser | AnonymousUser) -> str | None:
    """The user's highest role, or None (anonymous, inactive, or in no role group). A superuser counts as admin."""
    if not user.is_authenticated or not user.is_active:
        return None
    if getattr(user, "is_superuser", False):
        return ADMIN
    names = set(user.groups.values_list("name", flat=True))  # type: ignore[union-attr]
    return next((role for role in ROLES if role in names), None)
