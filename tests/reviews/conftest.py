"""Fixtures for the reviewer-side tests: the portal's roles and queue, and the receipts' signing key."""

from tests.portal.conftest import make_user, queue, reviewer, reviewer2  # noqa: F401 - fixtures shared by name
from tests.verification.conftest import signing_key, var_dir  # noqa: F401 - fixtures shared by name
