"""Reading the environment: one place, one error type, one clear line on failure.

Plain Python (no Django import), so ``reviewportal.bootstrap`` and the entry points can use it before settings exist.
A bad value stops start-up with ``reviewportal: configuration error: <VARIABLE>: <why>`` on stderr and exit code 2.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

REPO_ROOT = Path(__file__).resolve().parents[1]

# An empty variable counts as unset everywhere: `FOO= make run` behaves like `make run`.
_TRUE = frozenset({"1", "true"})
_FALSE = frozenset({"0", "false"})


class ConfigurationError(Exception):
    """A setting read from the environment (or a file it names) is missing or malformed."""

    def __init__(self, variable: str, why: str) -> None:
        super().__init__(f"{variable}: {why}")
        self.variable = variable
        self.why = why


def exit_on_configuration_error(exc: ConfigurationError) -> NoReturn:
    """Print the one-line diagnosis and exit 2 (no traceback)."""
    print(f"reviewportal: configuration error: {exc}", file=sys.stderr)
    raise SystemExit(2)


def env_str(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The variable's value, or None when unset or empty."""
    value = (os.environ if environ is None else environ).get(name, "")
    return value if value != "" else None


def env_bool(name: str, default: bool, environ: Mapping[str, str] | None = None) -> bool:
    """1/0/true/false (any case); anything else is a configuration error."""
    raw = env_str(name, environ)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigurationError(name, f"expected 1, 0, true or false, got {raw!r}")


def env_list(name: str, default: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """A comma-separated list; refuses a list with no item."""
    raw = env_str(name, environ)
    items = [item.strip() for item in (default if raw is None else raw).split(",") if item.strip()]
    if not items:
        raise ConfigurationError(name, "no value given (expected a comma-separated list)")
    return items


def var_dir(environ: Mapping[str, str] | None = None) -> Path:
    """REVIEWPORTAL_VAR_DIR (a relative path is taken from the repository root), default ``<repo>/var``."""
    raw = env_str("REVIEWPORTAL_VAR_DIR", environ)
    if raw is None:
        return REPO_ROOT / "var"
    path = Path(raw).expanduser()
    return path if path.is_absolute() else REPO_ROOT / path


SECRET_KEY_FILE = "secret_key"  # noqa: S105 - a file name, not a secret
_BOOTSTRAP_HINT = "run `python -m reviewportal.bootstrap` (make run and make test do) or set SECRET_KEY"


def read_secret_key(directory: Path, environ: Mapping[str, str] | None = None) -> str:
    """SECRET_KEY from the environment, else from ``<var>/secret_key`` (which must not be readable by others)."""
    from_env = env_str("SECRET_KEY", environ)
    if from_env is not None:
        return from_env
    path = directory / SECRET_KEY_FILE
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ConfigurationError("SECRET_KEY", f"not set and {path} does not exist; {_BOOTSTRAP_HINT}") from None
    except OSError as exc:
        raise ConfigurationError("SECRET_KEY", f"cannot read {path}: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        shown = f"{mode & 0o777:o}"
        raise ConfigurationError("SECRET_KEY", f"{path} is accessible to other users (mode {shown}); chmod 600")
    if not text:
        raise ConfigurationError("SECRET_KEY", f"{path} is empty; delete it and {_BOOTSTRAP_HINT}")
    return text


_POSTGRES_SCHEMES = frozenset({"postgres", "postgresql", "pgsql"})


def database_from_url(url: str, variable: str = "DATABASE_URL") -> dict[str, object]:
    """Parse DATABASE_URL (PostgreSQL or SQLite only; or ``variable``, another URL) into a Django DATABASES entry.

    The error never repeats the URL: it may hold a password.
    """
    import dj_database_url

    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme != "sqlite" and scheme not in _POSTGRES_SCHEMES:
        shown = f"unsupported scheme {scheme!r}" if scheme else "not a URL (expected scheme://...)"
        raise ConfigurationError(variable, f"{shown}; use postgres://user@host:port/name or sqlite:///path")
    try:
        parsed: dict[str, object] = dict(dj_database_url.parse(url, conn_health_checks=True))
    except ValueError as exc:  # dj_database_url.ParseError and UnknownSchemeError are ValueErrors
        raise ConfigurationError(variable, f"cannot be parsed ({type(exc).__name__})") from None
    if not parsed.get("NAME"):
        raise ConfigurationError(variable, "names no database")
    return parsed
