"""Settings of the gunicorn that ``bench_queue`` measures over real HTTP: the benchmark's own settings (the test
settings: the scratch database, the throwaway var directory, DEBUG off) plus one trivial view, so that a reviewer
action can be compared with a request that crosses the same middleware and does nothing else."""

from reviewportal.settings_test import *  # noqa: F403

ROOT_URLCONF = "bench._http_urls"
