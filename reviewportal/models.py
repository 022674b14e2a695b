"""The portal's permissions, held by a model without a table (SPEC §0: reviewers, managers, admins)."""

from django.db import models

# codename -> human-readable name. reviewportal/migrations/0001_roles.py creates these and the three groups.
PORTAL_PERMISSIONS: tuple[tuple[str, str], ...] = (
    ("review_queue", "Can see the review queue"),
    ("decide_verification", "Can record a decision on a verification"),
    ("view_history", "Can browse verdict history"),
    ("view_findings", "Can see findings"),
    ("close_finding", "Can acknowledge or close a finding with a rationale"),
    ("administer_keys", "Can pin, rotate and revoke keys"),
    ("administer_users", "Can manage users and API tokens"),
    ("inspect_chains", "Can inspect receipt chains"),
    ("inspect_evidence", "Can inspect cited evidence spans"),
    ("view_security_log", "Can read the security log"),
)


class PortalAccess(models.Model):
    """Anchors the portal's custom permissions; it has no table and no rows."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = PORTAL_PERMISSIONS
