"""Content digests as the kernel writes them: ``sha256:<64 lowercase hex>``."""

from __future__ import annotations

import hashlib
import re
from typing import Final

DIGEST_PREFIX: Final = "sha256:"
#: The length of a sha256 in lowercase hex (a stored hash column's width).
HEX64_MAX: Final = 64
_DIGEST_RE: Final = re.compile(r"\Asha256:[0-9a-f]{64}\Z")


def sha256_digest(data: bytes) -> str:
    """The ``sha256:<hex>`` digest of ``data``."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def is_digest(value: object) -> bool:
    """True for a well-formed ``sha256:<64 lowercase hex>`` string."""
    return isinstance(value, str) and _DIGEST_RE.match(value) is not None
