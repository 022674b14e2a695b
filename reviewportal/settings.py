"""Django settings, read from the environment with safe defaults (README: Configuration).

A missing or malformed value raises ``ConfigurationError``; manage.py, wsgi.py, asgi.py and celery.py turn it into
one line on stderr and exit code 2.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from pathlib import Path

from csp.constants import NONE, SELF

from reviewportal.config import (
    REPO_ROOT,
    ConfigurationError,
    database_from_url,
    env_bool,
    env_list,
    env_str,
    read_secret_key,
    var_dir,
)


def _env_int(name: str, *, default: int, minimum: int) -> int:
    """A whole number of at least ``minimum``; anything else is a configuration error."""
    raw = env_str(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip(), 10)
    except ValueError:
        raise ConfigurationError(name, f"expected a whole number, got {raw!r}") from None
    if value < minimum:
        raise ConfigurationError(name, f"must be at least {minimum}, got {value}")
    return value


def _api_rate(name: str, *, default: str) -> str:
    """A REST framework rate, ``<n>/<second|minute|hour|day>``; anything else is a configuration error."""
    raw = (env_str(name) or default).strip()
    count, _, period = raw.partition("/")
    if not count.isdigit() or int(count) < 1 or period not in ("second", "minute", "hour", "day"):
        raise ConfigurationError(name, f"expected <n>/<second|minute|hour|day>, got {raw!r}")
    return raw


BASE_DIR = REPO_ROOT
VAR_DIR = var_dir()

# pytest runs with reviewportal.settings_test, which sets REVIEWPORTAL_TESTING=1 before importing this module.
TESTING = env_bool("REVIEWPORTAL_TESTING", default=False)

DEBUG = env_bool("REVIEWPORTAL_DEBUG", default=False)
ALLOWED_HOSTS = env_list("REVIEWPORTAL_ALLOWED_HOSTS", default="127.0.0.1,localhost")

try:
    SECRET_KEY = read_secret_key(VAR_DIR)
except ConfigurationError:
    if not TESTING:
        raise
    SECRET_KEY = secrets.token_urlsafe(50)  # the test suite runs without bootstrap: a throwaway key per process

# --- database ----------------------------------------------------------------------------------------------------
_database_url = env_str("DATABASE_URL")
if _database_url is None:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "reviewportal.sqlite3",
        }
    }
else:
    DATABASES = {"default": database_from_url(_database_url)}

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE: a write transaction takes the lock at BEGIN, so the web process and a worker queue rather than fail
    # with "database is locked" mid-transaction. WAL lets readers proceed during a write.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL;",
    }
elif env_bool("REVIEWPORTAL_DB_PREPARED_STATEMENTS", default=True):
    # PostgreSQL: prepare the statements that ask for it, once per connection (the pipeline's, the claim's and the
    # receipt's, sent by verification/pgwire.py in psycopg's registry: planning them costs more than running them).
    # The ORM's other queries bind client-side and are never prepared.
    # Set 0 behind a pooler that cannot carry prepared statements (PgBouncer in transaction mode before 1.21).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("prepare_threshold", 5)

# Least privilege (SPEC §8, docs/database-roles.md): DATABASE_URL is the application role; the tables' owner, through
# this second URL, runs the migrations (alias "owner", which our ``migrate`` picks by default). Unset: the
# default connection does everything, as before.
_migrate_database_url = env_str("REVIEWPORTAL_MIGRATE_DATABASE_URL")
if _migrate_database_url is not None:
    if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        raise ConfigurationError("REVIEWPORTAL_MIGRATE_DATABASE_URL", "a separate owner role needs PostgreSQL")
    DATABASES["owner"] = database_from_url(_migrate_database_url, "REVIEWPORTAL_MIGRATE_DATABASE_URL")
    if DATABASES["owner"]["ENGINE"] != DATABASES["default"]["ENGINE"]:
        raise ConfigurationError("REVIEWPORTAL_MIGRATE_DATABASE_URL", "must name a PostgreSQL database too")
DATABASE_ROUTERS = ["verification.db_roles.OwnerMigrationsRouter"]

if DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
    # A database that does not answer fails a connection in seconds (a 503 with Retry-After, a retried run), not
    # after the operating system's TCP timeout of minutes (docs/deployment.md).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", _env_int("REVIEWPORTAL_DB_CONNECT_TIMEOUT_SECONDS", default=5, minimum=1)
    )

    # No JIT: the portal's statements are short index walks; at 1,000,000 verifications the planner's cost estimate of
    # the queue counts crossed jit_above_cost and compiling took 78 ms of a 129 ms statement (issue 15). A libpq
    # "options" already given in the URL is kept.
    DATABASES["default"]["OPTIONS"].setdefault("options", "-c jit=off")

    # Persistent connections (issue 15): a new PostgreSQL connection cost ~17 ms per request on the loaded benchmark
    # machine, more than the reviewer pages' own statements; a process keeps its connection this many seconds
    # (0: one per request, as before), checked before reuse (CONN_HEALTH_CHECKS) so a dropped one is replaced.
    DATABASES["default"]["CONN_MAX_AGE"] = _env_int("REVIEWPORTAL_DB_CONN_MAX_AGE_SECONDS", default=60, minimum=0)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- applications ------------------------------------------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "csp",
    "axes",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served from our own static files (no CDN)
    "verification.apps.VerificationConfig",
    "reviewportal.apps.PortalConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "reviewportal.sessions.IdleSessionMiddleware",  # sessions, saved when changed or due (the idle timeout)
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # SPEC §3: a NUL byte in a query string is a 400 before any view (reviewportal/boundary.py).
    "reviewportal.boundary.InputBoundaryMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a locked-out login attempt into the lockout response.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "reviewportal.urls"
WSGI_APPLICATION = "reviewportal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- authentication ------------------------------------------------------------------------------------------------
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

if TESTING:
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed only; never outside the test suite

# --- security ------------------------------------------------------------------------------------------------------
# Portal pages (README: The reviewer queue, security baseline). Behind HTTPS (REVIEWPORTAL_HTTPS=1) cookies are
# Secure, plain HTTP is redirected and HSTS is sent; `manage.py check --deploy` is clean with production settings
# (tests/portal/test_security.py runs it).
HTTPS = env_bool("REVIEWPORTAL_HTTPS", default=False)
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = HTTPS
SECURE_HSTS_SECONDS = 31_536_000 if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS
if env_bool("REVIEWPORTAL_BEHIND_TLS_PROXY", default=False):
    # Only when a proxy that terminates TLS sets this header and strips it from clients.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CSRF_COOKIE_HTTPONLY = True  # the token reaches htmx through hx-headers on <body>, not through the cookie
CSRF_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

# Idle timeout: the session cookie lives this long and requests renew it, so a session idle for longer ends. Not by
# saving the session on every request (SESSION_SAVE_EVERY_REQUEST: a write per page, issue 15): a request that reads
# the session saves it, and sends its cookie again, when that moves its end by more than SESSION_RENEW_AFTER_SECONDS
# (reviewportal/sessions.py), so an idle session ends at most that much before the timeout.
SESSION_IDLE_SECONDS = _env_int("REVIEWPORTAL_SESSION_IDLE_SECONDS", default=1800, minimum=60)
SESSION_COOKIE_AGE = SESSION_IDLE_SECONDS
SESSION_SAVE_EVERY_REQUEST = False
SESSION_RENEW_AFTER_SECONDS = min(60, SESSION_IDLE_SECONDS // 10)
SESSION_ENGINE = "reviewportal.sessions"

# Content-Security-Policy, enforced (django-csp 4): nothing inline, nothing evaluated, no framing. htmx is vendored
# under static/ and configured by <meta name="htmx-config"> (no eval, no injected indicator styles); the portal's
# behaviour lives in static/js/portal.js. Violations are reported to /csp-report/ and logged.
CSP_REPORT_PATH = "/csp-report/"
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
        "report-uri": CSP_REPORT_PATH,
    },
}

# Login throttling (django-axes): after AXES_FAILURE_LIMIT failed sign-ins for one username from one address, that
# pair is locked out for the cool-off (429). The client address is REMOTE_ADDR only, never a forwarded header.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Django's ModelBackend, its permissions read in one statement instead of two (issue 15).
    "reviewportal.access.PermissionsInOneRead",
]
AXES_ENABLED = True
AXES_FAILURE_LIMIT = _env_int("REVIEWPORTAL_LOGIN_FAILURE_LIMIT", default=5, minimum=1)
AXES_COOLOFF_TIME = timedelta(seconds=_env_int("REVIEWPORTAL_LOGIN_COOLOFF_SECONDS", default=900, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "portal/locked_out.html"
AXES_IPWARE_META_PRECEDENCE_ORDER = ("REMOTE_ADDR",)
AXES_VERBOSE = False

# The reviewer queue (README: The reviewer queue).
#: How long a claimed item stays with its reviewer; the open review page renews it (static/js/portal.js).
REVIEWPORTAL_LEASE_SECONDS = _env_int("REVIEWPORTAL_LEASE_SECONDS", default=900, minimum=30)
#: Rows per queue page (keyset pagination).
REVIEWPORTAL_QUEUE_PAGE_SIZE = 50
#: How long the queue's counts per reason are reused (a summary; the list itself is always read fresh). 0: never.
REVIEWPORTAL_QUEUE_COUNTS_SECONDS = 0 if TESTING else 5

# The admin pages and the continuous audit (README: Admin and audit).
#: Where the audit appends its signed tree heads: a file outside the database on purpose (SPEC §8). Unset: the
#: file ``checkpoints.log`` in the var dir (resolved when used); a relative path is taken from the repository root.
_checkpoint_log = env_str("REVIEWPORTAL_CHECKPOINT_LOG")
REVIEWPORTAL_CHECKPOINT_LOG = (
    None
    if _checkpoint_log is None
    else str(Path(_checkpoint_log) if Path(_checkpoint_log).is_absolute() else REPO_ROOT / _checkpoint_log)
)
#: The pin journal, the trust root outside the database (SPEC §8; docs/trust-root.md). Unset: ``pin-journal.log`` in
#: the var dir (resolved when used); a relative path is taken from the repository root.
_pin_journal = env_str("REVIEWPORTAL_PIN_JOURNAL")
REVIEWPORTAL_PIN_JOURNAL = (
    None
    if _pin_journal is None
    else str(Path(_pin_journal) if Path(_pin_journal).is_absolute() else REPO_ROOT / _pin_journal)
)
#: How often Celery beat runs the audit (``celery -A reviewportal beat``); ``manage.py audit_chains`` runs it by hand.
REVIEWPORTAL_AUDIT_INTERVAL_SECONDS = _env_int("REVIEWPORTAL_AUDIT_INTERVAL_SECONDS", default=3600, minimum=60)
#: Rows per page of the security log and the evidence list.
REVIEWPORTAL_ADMIN_PAGE_SIZE = 50

# --- i18n / time -----------------------------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- static files --------------------------------------------------------------------------------------------------
STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# whitenoise serves static/ straight from the finders (no STATIC_ROOT, no collectstatic), with DEBUG on or off,
# under runserver and gunicorn alike.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# --- the JSON API (verification/api/, README: API) ---------------------------------------------------------------
#: The largest request body the API reads; a larger one is refused with 413 payload-too-large before it is read.
REVIEWPORTAL_API_MAX_BODY_BYTES = 4 * 1024 * 1024
#: The largest evidence item sent inline as base64 (decoded bytes), in POST /v1/evidence and /v1/verifications.
REVIEWPORTAL_API_MAX_INLINE_EVIDENCE_BYTES = 1024 * 1024
#: Django's own limit for the bodies it reads itself (forms, request.body), kept in line with the API's.
DATA_UPLOAD_MAX_MEMORY_SIZE = REVIEWPORTAL_API_MAX_BODY_BYTES

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "verification.api.authentication.BearerTokenAuthentication",
        "verification.api.authentication.PortalSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["verification.api.permissions.HasScope"],
    "DEFAULT_PARSER_CLASSES": ["verification.api.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "verification.api.parsers.JsonOnly",
    "EXCEPTION_HANDLER": "verification.api.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # Per-token throttling (issue 13 item 6; verification/api/throttling.py): REVIEWPORTAL_API_RATE, e.g. 600/minute.
    "DEFAULT_THROTTLE_CLASSES": ["verification.api.throttling.TokenRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"token": _api_rate("REVIEWPORTAL_API_RATE", default="600/minute")},
}

# The cache holds the API's rate counts: Redis when REVIEWPORTAL_CACHE_URL names one (several processes share the
# counts), else this process's memory.
_cache_url = env_str("REVIEWPORTAL_CACHE_URL")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _cache_url}
    if _cache_url
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Review portal API",
    "DESCRIPTION": (
        "Register rubrics, report claims, links, manifests and baselines, admit evidence, submit work for "
        "verification and fetch signed results. Authenticate with `Authorization: Bearer rpt_...`; every error is "
        '`{"error": {"code", "message", "details"}}` with a registered reason code.'
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/v1",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "VerdictEnum": "verification.api.serializers.verifications.RESULT_VERDICTS",
        "ImportedVerdictEnum": "verification.api.serializers.base.IMPORTED_VERDICTS",
        "DeterminationEnum": "verification.api.serializers.base.DETERMINATIONS",
        "StatusEnum": "verification.api.serializers.base.STATUSES",
        "TrustTierEnum": "verification.api.serializers.base.TRUST_TIERS",
        "EvidenceTypeEnum": "verification.api.serializers.base.EVIDENCE_TYPES",
        "MutabilityEnum": "verification.api.serializers.base.MUTABILITIES",
        "CriterionKindEnum": "verification.api.serializers.base.CRITERION_KINDS",
        "SemanticOutcomeEnum": "verification.api.serializers.base.SEMANTIC_OUTCOMES",
        "EventKindEnum": "verification.api.serializers.events.EVENT_KINDS",
        "ReasonCodeEnum": "verification.api.serializers.base.REASON_CODES",
        "DigestKindEnum": "verification.api.serializers.rubrics.DIGEST_KIND",
        "UnchangedKindEnum": "verification.api.serializers.rubrics.UNCHANGED_KIND",
        "AwaitedKindEnum": "verification.api.serializers.rubrics.AWAITED_KINDS",
    },
    "PREPROCESSING_HOOKS": ["verification.api.schema.only_the_api"],
    # the errors every view may give, the response headers (Location, Idempotent-Replayed, Retry-After) and links
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "verification.api.schema.complete_schema",
    ],
}

# --- Celery ----------------------------------------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
if CELERY_BROKER_URL is not None and "://" not in CELERY_BROKER_URL:
    raise ConfigurationError("CELERY_BROKER_URL", "not a URL (expected e.g. redis://127.0.0.1:6379/0)")
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND")
if CELERY_RESULT_BACKEND is not None and "://" not in CELERY_RESULT_BACKEND:
    raise ConfigurationError("CELERY_RESULT_BACKEND", "not a URL (expected e.g. redis://127.0.0.1:6379/1)")
# Without a broker, tasks run in the calling process and their exceptions propagate.
CELERY_TASK_ALWAYS_EAGER = CELERY_BROKER_URL is None
CELERY_TASK_EAGER_PROPAGATES = True
# Tasks are idempotent (STYLE.md 11): acknowledge after the work, redeliver if the worker dies, one task at a time.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A worker keeps its database connection as the web server does (CONN_MAX_AGE, checked before reuse): around each task
# ``reviewportal.celery`` closes it only when it is unusable or too old (issue 15). Celery's Django fixup would close
# every connection before and after every task unless this is set, and then only every 2 x this many: with a new
# PostgreSQL connection per run (connecting, a new backend's caches, the rollup trigger functions compiled and
# planned again) a run took 22 ms in the worker against ~5 ms in process. So large that the fixup never closes one.
CELERY_DB_REUSE_MAX = 2**62
CELERY_TIMEZONE = TIME_ZONE
CELERY_ENABLE_UTC = True
# Nothing acknowledged is lost (docs/deployment.md): retries that outlast a database restart, a sweeper that
# re-enqueues every verification whose message was lost, and a visibility timeout above the longest run plus retries.
#: Attempt n+1 of a run that hit an operational error waits base * 2**n seconds, jittered down to no less than half
#: of that: 30-60 s, then 60-120 s with the default (SPEC §3: 3 attempts in all).
REVIEWPORTAL_RUN_RETRY_BASE_SECONDS = _env_int("REVIEWPORTAL_RUN_RETRY_BASE_SECONDS", default=60, minimum=1)
#: A run taking longer is killed (and retried as an operational failure).
REVIEWPORTAL_RUN_TIME_LIMIT_SECONDS = _env_int("REVIEWPORTAL_RUN_TIME_LIMIT_SECONDS", default=120, minimum=5)
#: The longest wait between two attempts (the last retry's upper bound; 3 attempts = 2 retries).
_RUN_LONGEST_RETRY_SECONDS = REVIEWPORTAL_RUN_RETRY_BASE_SECONDS * 2
#: Redis hands an unacknowledged message (its worker died, or holds it for a retry's countdown) to another worker
#: after this long: above the longest run plus the longest retry wait, so a live worker never loses its message.
REVIEWPORTAL_BROKER_VISIBILITY_TIMEOUT_SECONDS = _env_int(
    "REVIEWPORTAL_BROKER_VISIBILITY_TIMEOUT_SECONDS",
    default=REVIEWPORTAL_RUN_TIME_LIMIT_SECONDS + _RUN_LONGEST_RETRY_SECONDS + 60,
    minimum=REVIEWPORTAL_RUN_TIME_LIMIT_SECONDS + _RUN_LONGEST_RETRY_SECONDS + 1,
)
#: How often Celery beat runs the sweeper (verification.tasks.sweep_verifications).
REVIEWPORTAL_SWEEP_INTERVAL_SECONDS = _env_int("REVIEWPORTAL_SWEEP_INTERVAL_SECONDS", default=60, minimum=1)
#: The sweeper re-enqueues a verification without a run receipt, not failed, submitted and last attempted longer ago
#: than this (its message was lost: a broker without persistence, a publish that failed after commit).
REVIEWPORTAL_SWEEP_AFTER_SECONDS = _env_int(
    "REVIEWPORTAL_SWEEP_AFTER_SECONDS", default=REVIEWPORTAL_BROKER_VISIBILITY_TIMEOUT_SECONDS, minimum=1
)
#: A verification queued or running longer than this is shown as stuck (admin operations page, /healthz detail).
REVIEWPORTAL_STUCK_AFTER_SECONDS = _env_int(
    "REVIEWPORTAL_STUCK_AFTER_SECONDS",
    default=REVIEWPORTAL_SWEEP_AFTER_SECONDS + 2 * REVIEWPORTAL_SWEEP_INTERVAL_SECONDS,
    minimum=1,
)
#: What a 503 ``service-unavailable`` (database or broker down) asks the client to wait before it retries.
REVIEWPORTAL_RETRY_AFTER_SECONDS = _env_int("REVIEWPORTAL_RETRY_AFTER_SECONDS", default=5, minimum=1)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": REVIEWPORTAL_BROKER_VISIBILITY_TIMEOUT_SECONDS,
    "socket_connect_timeout": 5,
}
# A worker that loses the broker cancels what it runs instead of finishing into a connection that cannot ack: the
# message is redelivered (acks_late) and the run is idempotent.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# The run's time limits: the soft one raises inside the run (retried as an operational failure), the hard one kills it.
CELERY_TASK_ANNOTATIONS = {
    "verification.run": {
        "time_limit": REVIEWPORTAL_RUN_TIME_LIMIT_SECONDS,
        "soft_time_limit": REVIEWPORTAL_RUN_TIME_LIMIT_SECONDS - 3,
    }
}
CELERY_BROKER_CONNECTION_MAX_RETRIES = None  # a worker waits for the broker as long as it takes
# Publishing gives up after about a second (the web answers 202 and the sweeper enqueues the run later).
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 3, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}
# The continuous audit (verification.tasks.audit_chains: it only calls services.audit.audit_run) and the sweeper.
CELERY_BEAT_SCHEDULE = {
    "audit-chains": {"task": "verification.audit_chains", "schedule": float(REVIEWPORTAL_AUDIT_INTERVAL_SECONDS)},
    "sweep-verifications": {
        "task": "verification.sweep",
        "schedule": float(REVIEWPORTAL_SWEEP_INTERVAL_SECONDS),
        "options": {"expires": float(REVIEWPORTAL_SWEEP_INTERVAL_SECONDS)},
    },
}

# --- logging ---------------------------------------------------------------------------------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # a 403 is one line, not a traceback (issue 14)
    "filters": {"one_line_403": {"()": "reviewportal.logfilters.OneLineForbidden"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["one_line_403"]}},
    "root": {"handlers": ["console"], "level": "INFO"},
}
