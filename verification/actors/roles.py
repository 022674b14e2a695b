"""Roles and permissions, defined once (issue 12): the three roles are groups (reviewer, manager, admin, created by
reviewportal's migration 0001_roles) holding the portal's permissions. The portal (views, access decorators,
``reviewportal.models.PortalAccess``) and the domain (services that check again) import these names; no module
spells a permission or a role as a literal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # the names import without Django's app registry (reviewportal.models reads them while loading)
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

REVIEWER: Final = "reviewer"
MANAGER: Final = "manager"
ADMIN: Final = "admin"
ROLES: Final[tuple[str, ...]] = (ADMIN, MANAGER, REVIEWER)  # highest first

#: The app whose (table-less) model carries the permissions: ``user.has_perm`` takes "<app label>.<codename>".
APP_LABEL: Final = "reviewportal"

# The permissions as ``user.has_perm`` names them.
REVIEW_QUEUE: Final = "reviewportal.review_queue"
DECIDE_VERIFICATION: Final = "reviewportal.decide_verification"
VIEW_HISTORY: Final = "reviewportal.view_history"
VIEW_FINDINGS: Final = "reviewportal.view_findings"
CLOSE_FINDING: Final = "reviewportal.close_finding"
ADMINISTER_KEYS: Final = "reviewportal.administer_keys"
ADMINISTER_USERS: Final = "reviewportal.administer_users"
INSPECT_CHAINS: Final = "reviewportal.inspect_chains"
INSPECT_EVIDENCE: Final = "reviewportal.inspect_evidence"
VIEW_SECURITY_LOG: Final = "reviewportal.view_security_log"


def codename(permission: str) -> str:
    """``"reviewportal.view_history"`` -> ``"view_history"``."""
    return permission.removeprefix(f"{APP_LABEL}.")


#: (codename, human-readable name) of every portal permission, for ``PortalAccess.Meta.permissions``. Migration
#: 0001_roles holds a frozen copy: changing this list or ROLE_PERMISSIONS needs a new data migration.
PERMISSIONS: Final[tuple[tuple[str, str], ...]] = tuple(
    (codename(permission), name)
    for permission, name in (
        (REVIEW_QUEUE, "Can see the review queue"),
        (DECIDE_VERIFICATION, "Can record a decision on a verification"),
        (VIEW_HISTORY, "Can browse verdict history"),
        (VIEW_FINDINGS, "Can see findings"),
        (CLOSE_FINDING, "Can acknowledge or close a finding with a rationale"),
        (ADMINISTER_KEYS, "Can pin, rotate and revoke keys"),
        (ADMINISTER_USERS, "Can manage users and API tokens"),
        (INSPECT_CHAINS, "Can inspect receipt chains"),
        (INSPECT_EVIDENCE, "Can inspect cited evidence spans"),
        (VIEW_SECURITY_LOG, "Can read the security log"),
    )
)

# group name -> permission codenames (all in the reviewportal app). Changing this needs a new data migration.
ROLE_PERMISSIONS: Final[dict[str, tuple[str, ...]]] = {
    REVIEWER: tuple(map(codename, (REVIEW_QUEUE, DECIDE_VERIFICATION, VIEW_HISTORY))),
    MANAGER: tuple(map(codename, (VIEW_HISTORY, VIEW_FINDINGS, CLOSE_FINDING))),
    ADMIN: tuple(code for code, _ in PERMISSIONS),
}


def role_of(user: AbstractBaseUser | AnonymousUser) -> str | None:
    """The user's highest role, or None (anonymous, inactive, or in no role group). A superuser counts as admin."""
    if not user.is_authenticated or not user.is_active:
        return None
    if getattr(user, "is_superuser", False):
        return ADMIN
    names = set(user.groups.values_list("name", flat=True))  # type: ignore[union-attr]
    return next((role for role in ROLES if role in names), None)
