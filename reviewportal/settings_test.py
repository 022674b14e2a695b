"""Settings for the test suite (pyproject: DJANGO_SETTINGS_MODULE = "reviewportal.settings_test").

pytest-django reads the settings before any conftest runs, so the test flag is set here, before the real settings
are imported: TESTING turns on a fast password hasher and, when no key exists, a throwaway SECRET_KEY.
Subprocesses started by tests inherit REVIEWPORTAL_TESTING=1.
"""

import os

os.environ["REVIEWPORTAL_TESTING"] = "1"

from reviewportal.settings import *  # noqa: E402, F403

# Redis redelivers a message that stays unacknowledged this long (a worker that died with it): short in the tests
# (tests/verification/test_worker.py), and still longer than any task there.
CELERY_BROKER_TRANSPORT_OPTIONS = {**CELERY_BROKER_TRANSPORT_OPTIONS, "visibility_timeout": 30}  # noqa: F405

# The API's per-token rate (verification/api/throttling.py): far above anything the suite sends; a test that wants a
# 429 sets a low rate itself (tests/api/test_throttling.py).
REST_FRAMEWORK = {  # noqa: F405
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_THROTTLE_RATES": {"token": "1000000/second"},
}
