"""Who may open which admin page (issue 7; SPEC §0: admins). One permission per section, from the admin role
(``verification.actors.roles``); the services check again.

Anonymous users are sent to the login page (302); signed-in users without the permission get 403.
"""

from __future__ import annotations

from typing import Any, Final

from reviewportal.access import has_permission, requires, requiring
from verification.actors.roles import (
    ADMINISTER_KEYS,
    ADMINISTER_USERS,
    INSPECT_CHAINS,
    INSPECT_EVIDENCE,
    VIEW_SECURITY_LOG,
)

ADMIN_PERMISSIONS: Final = (ADMINISTER_KEYS, ADMINISTER_USERS, INSPECT_CHAINS, INSPECT_EVIDENCE, VIEW_SECURITY_LOG)


def is_admin(user: Any) -> bool:
    """Holds any of the admin permissions (may open the admin home page)."""
    return any(has_permission(user, p) for p in ADMIN_PERMISSIONS)


def sections(user: Any) -> list[tuple[str, str]]:
    """The admin sections ``user`` may open: (url name, label)."""
    out = []
    for permission, names in (
        (ADMINISTER_KEYS, [("adminportal:keys", "Keys")]),
        (
            INSPECT_CHAINS,
            [
                ("adminportal:verify-proof", "Verify a proof"),
                ("adminportal:audit", "Audit"),
                ("adminportal:operations", "Operations"),
            ],
        ),
        (INSPECT_EVIDENCE, [("adminportal:evidence", "Evidence")]),
        (ADMINISTER_USERS, [("adminportal:users", "Users"), ("adminportal:tokens", "API tokens")]),
        (VIEW_SECURITY_LOG, [("adminportal:security-log", "Security log")]),
    ):
        if has_permission(user, permission):
            out.extend(names)
    return out


admin_required = requiring(is_admin)
keys_admin = requires(ADMINISTER_KEYS)
users_admin = requires(ADMINISTER_USERS)
chains_inspector = requires(INSPECT_CHAINS)
evidence_inspector = requires(INSPECT_EVIDENCE)
security_log_reader = requires(VIEW_SECURITY_LOG)
