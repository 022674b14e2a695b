"""The portal's permissions, held by a model without a table (SPEC §0: reviewers, managers, admins)."""

from django.db import models

from verification.actors.roles import PERMISSIONS

# codename -> human-readable name, defined in the domain with the roles. reviewportal/migrations/0001_roles.py
# created these and the three groups (from a frozen copy).
PORTAL_PERMISSIONS: tuple[tuple[str, str], ...] = PERMISSIONS


class PortalAccess(models.Model):
    """Anchors the portal's custom permissions; it has no table and no rows."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = PORTAL_PERMISSIONS
