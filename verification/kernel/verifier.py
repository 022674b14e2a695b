"""The strict proof verifier: one function for the ``manage.py`` command, the admin chain view and the audit (SPEC §7).

Everything trusted comes from the caller, never from the proof (the seed's anti-forgery warning): the pinned
proof-signing keys with their revocation state, the trusted terminal head, and the expected ``verification_id``
and ``submission_hash``. The proof's own top-level fields are never a source of trust, but they are the wire
format's required fields (step 0) and must agree (fail closed): ``format``, ``signing_domain`` and ``jwks_uri``
are proof/2's constants (step 3, ``unsupported-format``), ``proof_head_hash`` is the trusted head (step 7),
``verification_id`` the expected one (step 8). In a step that also checks entries, the entries decide first.
The keys are never fetched from ``jwks_uri``.

The recipe, as SPEC §7's table numbers it (seed steps 1-3 are the caller's inputs above):

    step 0  trusted head supplied; proof and entries well-formed; non-empty
    step 1  sort by seq; contiguous from 0                                  (seed 4)
    step 2  sha256 over each exact envelope; envelope strict JSON            (seed 5)
    step 3  signed format and algo supported                                 (seed 6)
    step 4  side-channel fields equal the signed body                        (seed 7)
    step 5  key pinned, not revoked; Ed25519 over domain + content hash      (seed 8)
    step 6  every prev_hash equals the previous recomputed content hash      (seed 9)
    step 7  final content hash equals the trusted head                       (seed 10)
    step 8  signed verification_id and submission_hash are the expected ones (seed 11)

Each step runs over all entries before the next; the first failing step gives the result, and within a step the
lowest seq decides (in step 0, before seqs can be trusted, the lowest array index). Verification stops after the
failing step: every entry of that step is still reported, and the later steps are reported as ``not-run`` (a later
step can never change the result, and running it over bytes already known to be bad would only add noise).

Each entry costs one SHA-256, one strict parse and one Ed25519 verification; nothing is quadratic.
The checks of each step are in ``proof_steps.py``; this module holds the caller's inputs, the report and the
driver. Verification covers the bytes received: the envelope is hashed as it came, never re-serialized, so fields this
verifier does not recognize stay inside the signed bytes.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from types import MappingProxyType
from typing import Any, Final

from verification.kernel.canonical import loads_strict
from verification.kernel.chain import PROOF_FIELDS, signing_message
from verification.kernel.errors import InvariantError, ProofVerificationError, StrictJSONError
from verification.kernel.keys import PublicKey
from verification.kernel.proof_steps import (
    StepFailed,
    Work,
    document3_format,
    document8_subject,
    step0_entry_shape,
    step2_content,
    step3_format,
    step4_side_channel,
    step6_chain_check,
    step8_subject_check,
    type_name,
)
from verification.kernel.reasons import Reason

STEP_NAMES: Final[tuple[str, ...]] = (
    "well-formed",
    "contiguous-seq",
    "content-hash",
    "supported-format",
    "side-channel",
    "signature",
    "chain",
    "terminal-head",
    "subject",
)


@dataclass(frozen=True)
class TrustedKey:
    """A pinned proof-signing key and its revocation state, as the caller's trust store holds it (SPEC §8)."""

    key: PublicKey
    revoked: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.key, PublicKey):
            raise InvariantError(Reason.MALFORMED_KEY, f"expected a PublicKey, got {type(self.key).__name__}")
        if not isinstance(self.revoked, bool):
            raise InvariantError(Reason.MALFORMED_KEY, "revoked must be a bool")


class StepStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_RUN = "not-run"


@dataclass(frozen=True)
class EntryResult:
    """One entry's outcome in one step. ``seq`` is None only in step 0 when the entry's seq is not an integer."""

    seq: int | None
    ok: bool
    reason: Reason | None = None
    index: int = 0  # position in the proof's entries array (as received)
    detail: str = ""


@dataclass(frozen=True)
class StepResult:
    """One step of the recipe: its per-entry results and, for whole-proof checks, a step-level reason."""

    number: int
    name: str
    status: StepStatus
    entries: tuple[EntryResult, ...] = ()
    reason: Reason | None = None  # the deciding reason when the step failed
    seq: int | None = None  # the deciding seq when an entry decided
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status is StepStatus.PASSED


@dataclass(frozen=True)
class EntryView:
    """What the admin chain view shows for one entry: its identity, its signed body, and how it fared.

    ``status`` is ``passed`` only when every per-entry check (steps 0-6 and 8) ran and passed for this entry,
    ``failed`` when one of them failed for it (``reason`` says which), ``not-run`` when verification stopped,
    because of another entry or a whole-proof check, before all of this entry's checks ran.
    """

    seq: int | None
    index: int
    content_hash: str | None  # as received
    key_id: str | None  # the side-channel key id
    status: StepStatus
    reason: Reason | None  # the first failing reason for this entry
    body: Mapping[str, Any] | None = field(default=None, compare=False)  # the parsed signed body (read-only)

    @property
    def ok(self) -> bool:
        return self.status is StepStatus.PASSED


@dataclass(frozen=True)
class VerificationReport:
    """The result of strict verification (STYLE §4): every step for every entry, and the first failure."""

    ok: bool
    reason: Reason | None
    failed_step: int | None
    failed_seq: int | None
    detail: str
    steps: tuple[StepResult, ...]
    computed_head: str | None  # the recomputed content hash of the last entry, once step 2 passed
    _views: Callable[[], tuple[EntryView, ...]] = field(repr=False, compare=False)

    @cached_property
    def entries(self) -> tuple[EntryView, ...]:
        """Each entry's view, sorted by seq once step 1 passed, in array order otherwise.

        Made on first use from what verification found (which nothing changes afterwards): a caller that reads
        only the result, as the API's clients and the audit's chain pass do, does not pay for 10,000 views of a
        long chain (17 ms of a 10,000-entry chain's 0.3 s of work besides the signatures)."""
        return self._views()

    @property
    def entries_verified(self) -> int:
        """How many entries passed all of their own checks (every entry when the report is ok)."""
        return sum(1 for view in self.entries if view.ok)

    def raise_for_failure(self) -> VerificationReport:
        """Return self when ok; otherwise raise ``ProofVerificationError`` with the first failure's reason."""
        if self.ok:
            return self
        reason = self.reason if self.reason is not None else Reason.MALFORMED_PROOF  # never None when not ok
        where = f"step {self.failed_step}" + (f", seq {self.failed_seq}" if self.failed_seq is not None else "")
        raise ProofVerificationError(
            reason,
            f"{where}: {self.detail}" if self.detail else where,
            details={"step": self.failed_step, "seq": self.failed_seq},
        )


class _Step5:
    """Step 5 over one entry (``__call__``), and over every entry at once (``every_entry``)."""

    def __init__(self, keys: Mapping[str, TrustedKey]) -> None:
        self._keys = keys
        # The trust store's entries that are filed under their own key's id, looked up once per key id (a key id is
        # a sha256 of the key: computing it again for each of 10,000 entries was a tenth of the non-crypto work).
        self._checked: dict[str, TrustedKey | None] = {}

    def _trusted(self, key_id: str) -> TrustedKey | None:
        checked = self._checked
        if key_id in checked:
            return checked[key_id]
        entry = self._keys.get(key_id)
        # A trust store entry filed under another key's id is treated as absent: fail closed.
        trusted = checked[key_id] = entry if isinstance(entry, TrustedKey) and entry.key.key_id == key_id else None
        return trusted

    def every_entry(self, works: Sequence[Work]) -> bool:
        """True when every entry passes step 5. The usual proof, every entry signed under one pinned, unrevoked key,
        has its signatures verified in one loop (``PublicKey.verified_prefix``); the entries before a bad one are
        marked signed, so the step-by-step run after a failure does not verify them again. Any other proof: each
        entry in turn (``__call__``)."""
        key_ids = {work.body["key_id"] for work in works}
        trusted = self._trusted(next(iter(key_ids))) if len(key_ids) == 1 else None
        if trusted is None or trusted.revoked:
            return _every_entry_passes(works, (self,))
        pairs = [(work.signature, signing_message(work.content_hash)) for work in works]
        verified = verified_prefix(trusted.key, pairs)
        if verified == len(works):
            return True
        for work in works[:verified]:
            work.signed = True
        return False

    def __call__(self, work: Work) -> None:
        if work.signed:  # verified by an earlier pass over the entries
            return
        key_id = work.body["key_id"]
        trusted = self._trusted(key_id)
        if trusted is None:
            raise StepFailed(Reason.UNKNOWN_KEY, f"key {key_id!r} is not pinned for proof signing")
        if trusted.revoked:
            raise StepFailed(Reason.REVOKED_KEY, f"key {key_id!r} has been revoked")
        if not trusted.key.verify(work.signature, signing_message(work.content_hash)):
            raise StepFailed(Reason.SIGNATURE_FAILURE, f"the Ed25519 signature does not verify under {key_id!r}")
        work.signed = True


#: A chain at least this long has its signatures verified on two threads where the process may use two CPUs:
#: ``cryptography`` releases the interpreter lock while it verifies, so the two halves run at once (measured: 4,000
#: signatures in 0.26-0.27 s on two threads against 0.50-0.55 s on one). Shorter chains are not worth a thread.
PARALLEL_FROM: Final = 1024


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        return os.cpu_count() or 1


def verified_prefix(key: PublicKey, pairs: Sequence[tuple[bytes, bytes]]) -> int:
    """``key.verified_prefix(pairs)``, the same count, with the second half verified on a thread of its own for a long
    chain: the first half's count when it stops early, else the first half and the second's own prefix. A thread that
    cannot start, or that ends without an answer, leaves its half counted as unverified, which is never more than the
    truth (the caller then checks the rest entry by entry)."""
    if len(pairs) < PARALLEL_FROM or _usable_cpus() < 2:
        return key.verified_prefix(pairs)
    half = len(pairs) // 2
    later: list[int] = []
    thread = threading.Thread(target=lambda: later.append(key.verified_prefix(pairs[half:])), daemon=True)
    try:
        thread.start()
    except RuntimeError:  # no thread to be had: one after the other
        return key.verified_prefix(pairs)
    first = key.verified_prefix(pairs[:half])
    thread.join()
    if first < half:
        return first
    return half + (later[0] if later else 0)


# --- the driver ---------------------------------------------------------------------------------------------


def _every_entry_passes(works: Sequence[Work], checks: Sequence[Callable[[Work], None]]) -> bool:
    """True when every entry passes every one of ``checks``; False at the first failure (which is not recorded: the
    steps then run one by one and find it, with every other entry's outcome)."""
    try:
        for work in works:
            for check in checks:
                check(work)
    except StepFailed:
        return False
    return True


def _failed(
    number: int, results: tuple[EntryResult, ...], reason: Reason | None, seq: int | None, detail: str
) -> StepResult:
    return StepResult(number, STEP_NAMES[number], StepStatus.FAILED, results, reason, seq, detail)


class _Run:
    def __init__(self) -> None:
        self.steps: list[StepResult] = []
        self.failed: StepResult | None = None
        # Every entry's "ok" result, in the entries' current order: a passing step shares this one tuple.
        self._passes: tuple[EntryResult, ...] | None = None

    def whole(self, number: int, reason: Reason | None, detail: str = "", entry: Work | None = None) -> bool:
        """Record a whole-proof check (about ``entry`` when one entry is concerned); True when it passed."""
        status = StepStatus.PASSED if reason is None else StepStatus.FAILED
        seq = None if entry is None else entry.seq
        entries = (
            ()
            if entry is None
            else (EntryResult(seq=entry.seq, ok=reason is None, reason=reason, index=entry.index, detail=detail),)
        )
        result = StepResult(number, STEP_NAMES[number], status, entries, reason, seq, detail)
        self.record(result)
        return reason is None

    def per_entry(
        self,
        number: int,
        works: Sequence[Work],
        check: Callable[[Work], None],
        *,
        by_index: bool = False,
        document: Callable[[], None] | None = None,
        passed: bool = False,
    ) -> bool:
        """Run ``check`` over every entry; the lowest seq (or array index in step 0) among failures decides.

        ``document`` is the step's check of the proof's own top-level fields; it decides only when every entry
        passed (an entry's signed fact is the more specific finding). ``passed``: every entry is known to pass
        ``check`` (``_every_entry_passes`` ran it), so only ``document`` runs.
        """
        failures: list[tuple[int, Work, StepFailed]] = []
        for position, work in enumerate(() if passed else works):
            try:
                check(work)
            except StepFailed as fail:
                failures.append((position, work, fail))
        if not failures:
            try:
                if document is not None:
                    document()
            except StepFailed as fail:
                self.record(_failed(number, self.passes(works), fail.reason, None, fail.detail))
                return False
            self.record(StepResult(number, STEP_NAMES[number], StepStatus.PASSED, self.passes(works)))
            return True
        results = list(self.passes(works))
        ranked: list[tuple[int, EntryResult]] = []
        for position, work, failure in failures:
            seq = work.seq if work.seq >= 0 else None  # after the check: step 0 learns the seq
            res = EntryResult(seq=seq, ok=False, reason=failure.reason, index=work.index, detail=failure.detail)
            work.failure = work.failure or failure.reason
            results[position] = res
            ranked.append((work.index if by_index else work.seq, res))
        first = min(ranked, key=lambda item: item[0])[1]  # the first of the lowest
        self.record(_failed(number, tuple(results), first.reason, first.seq, first.detail))
        return False

    def all_passed(self, number: int, works: Sequence[Work]) -> None:
        """Record step ``number`` as passed by every entry (its check was made by the caller)."""
        self.record(StepResult(number, STEP_NAMES[number], StepStatus.PASSED, self.passes(works)))

    def passes(self, works: Sequence[Work]) -> tuple[EntryResult, ...]:
        """Every entry's "ok" result in ``works``' order (made once; ``reordered`` after the entries are sorted)."""
        if self._passes is None:
            self._passes = tuple(EntryResult(work.seq, True, None, work.index) for work in works)
        return self._passes

    def reordered(self, works: Sequence[Work]) -> None:
        """The entries were sorted (step 1): the same "ok" results, in the new order."""
        if self._passes is not None:
            by_index = {result.index: result for result in self._passes}
            self._passes = tuple(by_index[work.index] for work in works)

    def record(self, result: StepResult) -> None:
        self.steps.append(result)
        if result.status is StepStatus.FAILED and self.failed is None:
            self.failed = result


def _get_str(raw: Any, name: str) -> str | None:
    value = raw.get(name) if type(raw) is dict or isinstance(raw, Mapping) else None  # dict: skip the ABC check
    return value if isinstance(value, str) else None


def _report(run: _Run, works: Sequence[Work], computed_head: str | None) -> VerificationReport:
    ran = {s.number for s in run.steps}
    steps = tuple(run.steps) + tuple(
        StepResult(n, STEP_NAMES[n], StepStatus.NOT_RUN) for n in range(len(STEP_NAMES)) if n not in ran
    )
    failed = run.failed
    all_ran = len(STEP_NAMES) - 1 in ran  # the last per-entry step (8) ran: every entry met every check
    unfailed = StepStatus.PASSED if all_ran else StepStatus.NOT_RUN
    works = tuple(works)  # the order now: the caller's list is not ours to keep

    def views() -> tuple[EntryView, ...]:
        return tuple(
            EntryView(  # seq, index, content_hash, key_id, status, reason, body
                w.seq if w.seq >= 0 else None,
                w.index,
                w.raw["content_hash"] if w.shaped else _get_str(w.raw, "content_hash"),  # step 0 checked both
                w.raw["key_id"] if w.shaped else _get_str(w.raw, "key_id"),
                StepStatus.FAILED if w.failure else unfailed,
                w.failure,
                MappingProxyType(w.body) if w.body else None,
            )
            for w in works
        )

    if failed is None:
        return VerificationReport(True, None, None, None, "", steps, computed_head, views)
    return VerificationReport(
        False, failed.reason, failed.number, failed.seq, failed.detail, steps, computed_head, views
    )


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a verification, as it was before afterwards.

    A verification makes a handful of container objects per entry (the parsed body, its working state, its view in
    the report) and keeps them all until it returns, so the collector, which runs after every few hundred new
    containers, kept walking the growing heap: fetching and verifying a 10,000-entry chain in the receipts benchmark's
    process took 1.43 s of CPU with it and 1.26 s without, to free nothing (no cycle is made here; reference counting
    frees what is dropped). Mercurial's ``util.nogc`` does the same around its bulk parsers. Only the cyclic collector
    pauses, never reference counting, and a collector that was already off stays off.

    Resuming after a long chain, the collector's first pass would walk every container made meanwhile (80,000 for
    10,000 entries: ~45 ms, an eighth of a verification's own work), most of which the caller drops soon after and
    reference counting frees. So when more than ``_PROMOTE_AFTER`` containers were made, they are moved to the oldest
    generation without that pass (``gc.freeze`` then ``gc.unfreeze``); the next full collection still looks at any
    that live on. Not when the process has frozen objects of its own (``gc.unfreeze`` would release them), and never
    after a short proof, so the usual young collections run as before.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_count()[0] > _PROMOTE_AFTER and gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


#: How many containers made under ``_cyclic_gc_paused`` (the collector's own count) make it skip the young pass.
_PROMOTE_AFTER: Final = 20_000


@_cyclic_gc_paused()
def _verify(
    proof: Any,
    *,
    keys: Mapping[str, TrustedKey],
    trusted_head: str | None,
    expected_verification_id: str,
    expected_submission_hash: str,
    parse_error: StrictJSONError | None = None,
) -> VerificationReport:
    run = _Run()
    works: list[Work] = []

    # Step 0 (seed 2): the trusted head comes from the caller; without one nothing can be anchored.
    if not isinstance(trusted_head, str) or not trusted_head:
        run.whole(0, Reason.MISSING_TRUSTED_HEAD, "no trusted head was supplied")
        return _report(run, works, None)
    # Step 0: the proof is a JSON object with an entries array ...
    if parse_error is not None:
        run.whole(0, Reason.MALFORMED_PROOF, f"the proof is not strict JSON ({parse_error.reason.value})")
        return _report(run, works, None)
    if not isinstance(proof, Mapping):
        run.whole(0, Reason.MALFORMED_PROOF, f"the proof is a {type_name(proof)}, not an object")
        return _report(run, works, None)
    raw_entries = proof.get("entries")
    if not isinstance(raw_entries, list):
        run.whole(0, Reason.MALFORMED_PROOF, "the proof has no entries array")
        return _report(run, works, None)
    # ... carrying the wire format's other top-level fields, all strings ...
    for name in PROOF_FIELDS:
        if name != "entries" and not isinstance(proof.get(name), str):
            run.whole(0, Reason.MALFORMED_PROOF, f"the proof's {name} is missing or not a string")
            return _report(run, works, None)
    # ... with at least one entry ...
    if not raw_entries:
        run.whole(0, Reason.EMPTY_PROOF, "the proof has no entries")
        return _report(run, works, None)
    # ... each of which has every field with the right type and a strict base64 signature.
    works = [Work(i, raw) for i, raw in enumerate(raw_entries)]
    if not run.per_entry(0, works, step0_entry_shape, by_index=True):
        return _report(run, works, None)

    # Step 1 (seed 4): sort by seq; contiguous from 0. Array order is irrelevant.
    works.sort(key=lambda w: w.seq)
    run.reordered(works)
    gaps = [(position, w) for position, w in enumerate(works) if w.seq != position]
    if gaps:
        results = tuple(
            EntryResult(
                seq=w.seq,
                ok=w.seq == position,
                reason=None if w.seq == position else Reason.NON_CONTIGUOUS_SEQ,
                index=w.index,
                detail="" if w.seq == position else f"expected seq {position}, found {w.seq}",
            )
            for position, w in enumerate(works)
        )
        for _, w in gaps:
            w.failure = w.failure or Reason.NON_CONTIGUOUS_SEQ
        first = next(r for r in results if not r.ok)
        run.record(_failed(1, results, Reason.NON_CONTIGUOUS_SEQ, first.seq, first.detail))
        return _report(run, works, None)
    run.all_passed(1, works)

    step5 = _Step5(keys)
    step6 = step6_chain_check(works)
    step8 = step8_subject_check(expected_verification_id, expected_submission_hash)
    # Steps 2-6 and 8 each check one entry at a time. One pass runs the cheap checks on each entry in turn (in seq
    # order, so step 6 finds the previous entry's recomputed hash), then one pass verifies every signature (a tight
    # loop, as the bare benchmark's, rather than each between two envelope parses). When every entry
    # passes every check, the steps below only record that (their whole-proof checks still run, in order). After
    # any failure each step runs over every entry as before, so the report is the same either way (what the passes
    # computed, an envelope's parsed body or a verified signature, is not computed again).
    passed = _every_entry_passes(works, (step2_content, step3_format, step4_side_channel, step6, step8))
    passed = passed and step5.every_entry(works)

    # Step 2 (seed 5): sha256 over each exact envelope byte string; the envelope is strict JSON with every field.
    if not run.per_entry(2, works, step2_content, passed=passed):
        return _report(run, works, None)
    computed_head = works[-1].content_hash

    # Step 3 (seed 6): signed format acretix-verify/proof/2 and signed algo ed25519; the document says proof/2 too.
    if not run.per_entry(3, works, step3_format, document=lambda: document3_format(proof), passed=passed):
        return _report(run, works, computed_head)

    # Step 4 (seed 7): bind side-channel key_id, algo, format, seq and prev_hash to the signed body.
    if not run.per_entry(4, works, step4_side_channel, passed=passed):
        return _report(run, works, computed_head)

    # Step 5 (seed 1, 8): the key is pinned by the caller and not revoked; Ed25519 over domain + recomputed hash.
    if not run.per_entry(5, works, step5, passed=passed):
        return _report(run, works, computed_head)

    # Step 6 (seed 9): chain continuity; every prev_hash is the previous recomputed content hash (null at seq 0).
    if not run.per_entry(6, works, step6, passed=passed):
        return _report(run, works, computed_head)

    # Step 7 (seed 10): the final recomputed content hash is the trusted, server-served head. The proof's own
    # proof_head_hash is never trusted, only required to agree.
    last = works[-1]
    if computed_head != trusted_head:
        last.failure = last.failure or Reason.TERMINAL_HEAD_MISMATCH
        run.whole(7, Reason.TERMINAL_HEAD_MISMATCH, "the last entry's content hash is not the trusted head", last)
        return _report(run, works, computed_head)
    if proof["proof_head_hash"] != trusted_head:
        run.whole(7, Reason.TERMINAL_HEAD_MISMATCH, "the proof's proof_head_hash is not the trusted head")
        return _report(run, works, computed_head)
    run.whole(7, None, entry=last)

    # Step 8 (seed 3, 11): reject a valid but unrelated proof: the signed subject is the expected request.
    run.per_entry(8, works, step8, document=lambda: document8_subject(proof, expected_verification_id), passed=passed)
    return _report(run, works, computed_head)


def verify_report(
    proof: Any,
    *,
    keys: Mapping[str, TrustedKey],
    trusted_head: str | None,
    expected_verification_id: str,
    expected_submission_hash: str,
) -> VerificationReport:
    """Verify a parsed proof (a JSON object) strictly and report every step; never raises for a bad proof."""
    return _verify(
        proof,
        keys=keys,
        trusted_head=trusted_head,
        expected_verification_id=expected_verification_id,
        expected_submission_hash=expected_submission_hash,
    )


def verify_proof_bytes(
    data: bytes,
    *,
    keys: Mapping[str, TrustedKey],
    trusted_head: str | None,
    expected_verification_id: str,
    expected_submission_hash: str,
) -> VerificationReport:
    """Parse the proof with ``loads_strict`` and verify it; a strict-parse failure is ``malformed-proof``."""
    parse_error: StrictJSONError | None = None
    proof: Any = None
    with _cyclic_gc_paused():  # the parse makes a dict per entry: paused as in the verification itself
        try:
            proof = loads_strict(data)
        except StrictJSONError as exc:
            parse_error = exc
    return _verify(
        proof,
        keys=keys,
        trusted_head=trusted_head,
        expected_verification_id=expected_verification_id,
        expected_submission_hash=expected_submission_hash,
        parse_error=parse_error,
    )


def verify_strict(
    proof: Any,
    *,
    keys: Mapping[str, TrustedKey],
    trusted_head: str | None,
    expected_verification_id: str,
    expected_submission_hash: str,
) -> VerificationReport:
    """Like ``verify_report``, but raise ``ProofVerificationError`` (reason, step and seq) unless the proof verifies."""
    return verify_report(
        proof,
        keys=keys,
        trusted_head=trusted_head,
        expected_verification_id=expected_verification_id,
        expected_submission_hash=expected_submission_hash,
    ).raise_for_failure()


def verify_strict_bytes(
    data: bytes,
    *,
    keys: Mapping[str, TrustedKey],
    trusted_head: str | None,
    expected_verification_id: str,
    expected_submission_hash: str,
) -> VerificationReport:
    """Like ``verify_proof_bytes``, but raise ``ProofVerificationError`` unless the proof verifies."""
    return verify_proof_bytes(
        data,
        keys=keys,
        trusted_head=trusted_head,
        expected_verification_id=expected_verification_id,
        expected_submission_hash=expected_submission_hash,
    ).raise_for_failure()
