"""The one registry of reason codes (SPEC §11).

Every refusal, check outcome, receipt, API error, log line and screen uses these codes and these words.
A code that is not here does not exist: add it here (with its one-line explanation), never inline.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final


class Reason(StrEnum):
    # --- check outcomes that are not refusals (§5) ---------------------------------------------
    DIGEST_MATCH = "digest-match"
    DIGEST_DIFFERS = "digest-differs"
    BASELINE_UNCHANGED = "baseline-unchanged"
    BASELINE_CHANGED = "baseline-changed"
    HUMAN_DECISION = "human-decision"
    IMPORTED_RESULT = "imported-result"
    RESULT_AWAITED = "result-awaited"
    NO_RESULT = "no-result"

    # --- subjects and contracts (§1) -------------------------------------------------------------
    NO_ACCEPTED_CONTRACT = "no-accepted-contract"
    SELF_CONTRACT_ACCEPTANCE = "self-contract-acceptance"
    CONTRACT_ALREADY_ACCEPTED = "contract-already-accepted"
    NOT_TASK_OWNER = "not-task-owner"
    NOT_A_WORKER_OF_THIS_CYCLE = "not-a-worker-of-this-cycle"
    MISSING_BASELINE = "missing-baseline"
    INVALID_BASELINE_TOKEN = "invalid-baseline-token"
    BASELINE_NOT_INDEPENDENT = "baseline-not-independent"
    BASELINE_AFTER_FIRST_CLAIM = "baseline-after-first-claim"

    # --- verdicts and folding (§2) ---------------------------------------------------------------
    AUTHORITY_NOT_TRUSTED_FOR_PASS = "authority-not-trusted-for-pass"
    MISSING_EVIDENCE_INTEGRITY_PROOF = "missing-evidence-integrity-proof"
    EVIDENCE_INTEGRITY_MISMATCH = "evidence-integrity-mismatch"
    EVIDENCE_REDACTED = "evidence-redacted"
    PENDING_EXPIRED = "pending-expired"
    EXPIRY_VERDICT_CANNOT_PASS = "expiry-verdict-cannot-pass"
    MISMATCH_NOT_FROM_ORACLE = "mismatch-not-from-oracle"
    MISMATCH_NEEDS_NEW_EVIDENCE = "mismatch-needs-new-evidence"
    DETERMINISTIC_FAIL_NEEDS_NEW_EVIDENCE = "deterministic-fail-needs-new-evidence"
    DECISION_CITES_NO_EVIDENCE = "decision-cites-no-evidence"
    DECISION_VERDICT_NOT_ALLOWED = "decision-verdict-not-allowed"
    NOT_PENDING = "not-pending"
    RATIONALE_REQUIRED = "rationale-required"
    NO_CRITERIA = "no-criteria"

    # --- evidence (§4) ---------------------------------------------------------------------------
    BELOW_TRUST_TIER = "below-trust-tier"
    EVIDENCE_STALE = "evidence-stale"
    EVIDENCE_EXPIRED = "evidence-expired"
    EVIDENCE_INACCESSIBLE = "evidence-inaccessible"
    EVIDENCE_FRESHNESS_UNKNOWN = "evidence-freshness-unknown"
    EVIDENCE_NOT_BOUND = "evidence-not-bound"
    CITATION_ARTIFACT_NOT_ADMITTED = "citation-artifact-not-admitted"
    CITATION_SPAN_OUT_OF_RANGE = "citation-span-out-of-range"
    CITATION_QUOTE_MISMATCH = "citation-quote-mismatch"
    CITATION_HASH_MISMATCH = "citation-hash-mismatch"
    SOURCE_SIGNATURE_INVALID = "source-signature-invalid"

    # --- criteria and obligations (§5) -----------------------------------------------------------
    OBLIGATION_NOT_FALSIFIABLE = "obligation-not-falsifiable"
    UNSUPPORTED_OBSERVABLE = "unsupported-observable"
    MALFORMED_EXPRESSION = "malformed-expression"
    EVIDENCE_PRESENT_DECLINED = "evidence-present-declined"
    CLAIM_CONTRADICTED = "claim-contradicted"
    UNDECIDABLE_KIND = "undecidable-kind"
    VACUOUS_PREDICATE = "vacuous-predicate"
    CHANGE_MANIFEST_NOT_INDEPENDENTLY_OBSERVED = "change-manifest-not-independently-observed"
    MALFORMED_RUBRIC = "malformed-rubric"

    # --- semantic judgments (§6) -----------------------------------------------------------------
    SEMANTIC_CITED_CONFLICT = "cited-conflict"
    SEMANTIC_CITED_SUPPORT = "cited-support"
    SEMANTIC_UNKNOWN_UNCITED = "unknown-uncited"
    SEMANTIC_UNGROUNDED = "ungrounded"
    SEMANTIC_ABSTAIN = "abstain"
    SEMANTIC_ESCALATE = "escalate"
    NO_TYPED_PREDICATE = "no-typed-predicate"

    # --- receipts, proofs and the strict verifier (§7) -------------------------------------------
    MISSING_TRUSTED_HEAD = "missing-trusted-head"
    MALFORMED_PROOF = "malformed-proof"
    EMPTY_PROOF = "empty-proof"
    NON_CONTIGUOUS_SEQ = "non-contiguous-seq"
    CONTENT_HASH_MISMATCH = "content-hash-mismatch"
    MALFORMED_ENVELOPE = "malformed-envelope"
    UNSUPPORTED_FORMAT = "unsupported-format"
    UNSUPPORTED_ALGO = "unsupported-algo"
    ENVELOPE_MISMATCH = "envelope-mismatch"
    UNKNOWN_KEY = "unknown-key"
    REVOKED_KEY = "revoked-key"
    SIGNATURE_FAILURE = "signature-failure"
    BROKEN_CHAIN = "broken-chain"
    TERMINAL_HEAD_MISMATCH = "terminal-head-mismatch"
    SUBJECT_MISMATCH = "subject-mismatch"
    # --- the continuous audit (§8 external checkpoints; issue 7 §5) ----------------------------------
    CHECKPOINT_INCONSISTENT = "checkpoint-inconsistent"
    MALFORMED_CHECKPOINT = "malformed-checkpoint"
    RECEIPT_MISSING = "receipt-missing"
    KEY_STATE_MISMATCH = "key-state-mismatch"
    KEY_NOT_IN_PIN_JOURNAL = "key-not-in-pin-journal"
    PIN_JOURNAL_INVALID = "pin-journal-invalid"
    CACHED_STATE_MISMATCH = "cached-state-mismatch"

    # --- strict JSON and canonical bytes (§7) ----------------------------------------------------
    INVALID_JSON = "invalid-json"
    DUPLICATE_KEY = "duplicate-key"
    NON_FINITE_NUMBER = "non-finite-number"
    LONE_SURROGATE = "lone-surrogate"
    INTEGER_OUT_OF_RANGE = "integer-out-of-range"
    UNSUPPORTED_JSON_VALUE = "unsupported-json-value"

    # --- keys and pinning (§8) -------------------------------------------------------------------
    MALFORMED_KEY = "malformed-key"
    SMALL_ORDER_KEY = "small-order-key"
    NON_CANONICAL_KEY = "non-canonical-key"
    KID_MISMATCH = "kid-mismatch"
    FINGERPRINT_MISMATCH = "fingerprint-mismatch"
    KEY_ALREADY_PINNED = "key-already-pinned"
    KEY_NOT_PINNED = "key-not-pinned"
    PIN_CHANNEL_REQUIRED = "pin-channel-required"
    REVOCATION_REASON_REQUIRED = "revocation-reason-required"
    NO_SIGNING_KEY = "no-signing-key"
    APPEND_ONLY = "append-only"
    NOT_FOUND = "not-found"
    NOT_AUTHENTICATED = "not-authenticated"
    PERMISSION_DENIED = "permission-denied"
    # --- the JSON API (issue 4 §3): transport-level refusals ------------------------------------------
    SCOPE_DENIED = "scope-denied"
    INVALID_REQUEST = "invalid-request"
    UNKNOWN_FIELD = "unknown-field"
    BAD_BASE64 = "bad-base64"
    PAYLOAD_TOO_LARGE = "payload-too-large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported-media-type"
    METHOD_NOT_ALLOWED = "method-not-allowed"
    INTERNAL_ERROR = "internal-error"
    SERVICE_UNAVAILABLE = "service-unavailable"
    RATE_LIMITED = "rate-limited"
    # --- records and services (issue 4 §1, §2) -------------------------------------------------------
    IDEMPOTENCY_CONFLICT = "idempotency-conflict"
    ACTOR_NAME_TAKEN = "actor-name-taken"
    UNKNOWN_SCOPE = "unknown-scope"
    NOT_AWAITING_EVIDENCE = "not-awaiting-evidence"
    RUN_FAILED = "run-failed"
    # --- the reviewer queue (issue 5) ------------------------------------------------------------------------
    REVIEW_LEASE_NOT_HELD = "review-lease-not-held"
    REVIEW_LEASE_IDLE = "review-lease-idle"
    ALREADY_DECIDED = "already-decided"
    NOT_IN_REVIEW_QUEUE = "not-in-review-queue"

    # --- anti-gaming rails (§9) ------------------------------------------------------------------
    WORKER_SELF_VERIFICATION = "worker-self-verification"
    UNNAMED_ACTOR = "unnamed-actor"
    STALE_CYCLE = "stale-cycle"
    VERIFIER_AUTHORED_WORK = "verifier-authored-work"
    SHARED_EXECUTION_BOUNDARY = "shared-execution-boundary"
    ACTOR_CANNOT_AUTHOR_RESULT = "actor-cannot-author-result"
    MALFORMED_RECORD = "malformed-record"

    # --- findings (§10) --------------------------------------------------------------------------
    FINDING_DISAGREEMENT = "disagreement"
    FINDING_TAMPER = "tamper"
    FINDING_EVIDENCE_INTEGRITY = "evidence-integrity"
    FINDING_REVOKED_KEY = "signed-by-revoked-key"
    FINDING_CLOSE_REQUIRES_HUMAN = "finding-close-requires-human"
    FINDING_CLOSE_NEEDS_RATIONALE = "finding-close-needs-rationale"
    FINDING_ALREADY_CLOSED = "finding-already-closed"


_EXPLANATIONS: Final[dict[Reason, str]] = {
    Reason.DIGEST_MATCH: "The recomputed digest of the bound bytes equals the expected digest.",
    Reason.DIGEST_DIFFERS: "The recomputed digest of the bound bytes differs from the expected digest.",
    Reason.BASELINE_UNCHANGED: "The artifact still has the digest of its authoritative baseline.",
    Reason.BASELINE_CHANGED: "The artifact's digest differs from its authoritative baseline.",
    Reason.HUMAN_DECISION: "A person reviewed the verification and recorded this decision.",
    Reason.IMPORTED_RESULT: "The result was relayed by an external verifier; it can never carry a pass.",
    Reason.NO_RESULT: "No result arrived for this check and it has no deadline to wait for.",
    Reason.RESULT_AWAITED: "The result of this check has not arrived yet; it is pending until its deadline.",
    Reason.NO_ACCEPTED_CONTRACT: "The task's current cycle has no accepted contract, so nothing can be judged.",
    Reason.SELF_CONTRACT_ACCEPTANCE: "A worker of the cycle cannot accept its contract, and the acceptor cannot become a worker of it.",
    Reason.CONTRACT_ALREADY_ACCEPTED: "This cycle already has an accepted contract; reopen the task to judge it by another rubric.",
    Reason.NOT_TASK_OWNER: "Only the task's owner (or a portal admin, or a contract owner for contracts) may do this.",
    Reason.NOT_A_WORKER_OF_THIS_CYCLE: "Only the verification's submitter or a worker of its cycle may add evidence to it.",
    Reason.MISSING_BASELINE: "No authoritative baseline captured before the work started exists for this artifact.",
    Reason.INVALID_BASELINE_TOKEN: "The baseline's correlation token was not minted by the capture step.",
    Reason.BASELINE_NOT_INDEPENDENT: "The baseline's reporter is the producer, in its boundary, or not a collector.",
    Reason.BASELINE_AFTER_FIRST_CLAIM: "The baseline was captured after the cycle's first claim, not before the work.",
    Reason.AUTHORITY_NOT_TRUSTED_FOR_PASS: "Only deterministic checks and people may pass; this pass counts as unknown.",
    Reason.MISSING_EVIDENCE_INTEGRITY_PROOF: "The bytes of cited evidence are gone, so their integrity cannot be proven.",
    Reason.EVIDENCE_INTEGRITY_MISMATCH: "The stored bytes of cited evidence no longer match the digest recorded at admission.",
    Reason.EVIDENCE_REDACTED: "Cited evidence was redacted, so it can no longer be checked.",
    Reason.PENDING_EXPIRED: "The check's deadline passed before its result arrived.",
    Reason.EXPIRY_VERDICT_CANNOT_PASS: "A pending check can never expire into a pass.",
    Reason.MISMATCH_NOT_FROM_ORACLE: "Only the oracle seam (a baseline comparison) may report a mismatch.",
    Reason.MISMATCH_NEEDS_NEW_EVIDENCE: "A mismatch cannot be passed by a person; it clears only with new evidence and a re-run.",
    Reason.DETERMINISTIC_FAIL_NEEDS_NEW_EVIDENCE: "A deterministic failure cannot be passed by a person; it clears only with new evidence and a re-run.",
    Reason.DECISION_CITES_NO_EVIDENCE: "A pass by a person must cite at least one evidence item it relied on.",
    Reason.DECISION_VERDICT_NOT_ALLOWED: "A person may only decide pass or fail.",
    Reason.NOT_PENDING: "This verification has no pending check awaiting this result.",
    Reason.RATIONALE_REQUIRED: "A decision by a person must say why, in a non-blank rationale.",
    Reason.NO_CRITERIA: "The verification has no criteria, so nothing was judged.",
    Reason.BELOW_TRUST_TIER: "The evidence is below the trust tier the criterion requires.",
    Reason.EVIDENCE_STALE: "The evidence is older than the criterion allows.",
    Reason.EVIDENCE_EXPIRED: "The evidence has expired.",
    Reason.EVIDENCE_INACCESSIBLE: "The evidence bytes cannot be read.",
    Reason.EVIDENCE_FRESHNESS_UNKNOWN: "The evidence's age or expiry matters here but cannot be established.",
    Reason.EVIDENCE_NOT_BOUND: "The criterion names an evidence symbol that the submission did not bind.",
    Reason.CITATION_ARTIFACT_NOT_ADMITTED: "The citation names an artifact that was never admitted.",
    Reason.CITATION_SPAN_OUT_OF_RANGE: "The cited span does not lie inside the artifact.",
    Reason.CITATION_QUOTE_MISMATCH: "The text at the cited span differs from the quote.",
    Reason.CITATION_HASH_MISMATCH: "The quote hash is not the sha256 of the quoted text.",
    Reason.SOURCE_SIGNATURE_INVALID: "The evidence's detached source signature does not verify under a pinned source key.",
    Reason.OBLIGATION_NOT_FALSIFIABLE: "The obligation could never fail, so passing it would mean nothing.",
    Reason.UNSUPPORTED_OBSERVABLE: "The observable is not decidable at this tier; only evidence.content-digest is.",
    Reason.MALFORMED_EXPRESSION: "The expression is not of the form (= <symbol> \"sha256:<64 lowercase hex>\").",
    Reason.CLAIM_CONTRADICTED: "A decidable claim in the submission evaluated to a failure, so a person must look.",
    Reason.EVIDENCE_PRESENT_DECLINED: "evidence.present is declined: the absence of cited evidence is not falsehood.",
    Reason.UNDECIDABLE_KIND: "This kind of criterion cannot be decided by a deterministic witness.",
    Reason.VACUOUS_PREDICATE: "The predicate holds whatever the evidence says.",
    Reason.CHANGE_MANIFEST_NOT_INDEPENDENTLY_OBSERVED: "A producer's own account of what changed is not evidence.",
    Reason.MALFORMED_RUBRIC: "The rubric is not well-formed.",
    Reason.SEMANTIC_CITED_CONFLICT: "A model found cited evidence that contradicts the claim; a person must review.",
    Reason.SEMANTIC_CITED_SUPPORT: "A model found cited evidence that supports the claim; only a person can pass it.",
    Reason.SEMANTIC_UNKNOWN_UNCITED: "A model judged without citing evidence; a person must review.",
    Reason.SEMANTIC_UNGROUNDED: "A model's judgment is not grounded: a citation does not resolve or the case is not frozen.",
    Reason.SEMANTIC_ABSTAIN: "A model could not decide; a person must review.",
    Reason.SEMANTIC_ESCALATE: "A model asked for a person to decide.",
    Reason.NO_TYPED_PREDICATE: "The judgment has no typed predicate, so it was not run.",
    Reason.MISSING_TRUSTED_HEAD: "No trusted head was supplied to verify the proof against.",
    Reason.MALFORMED_PROOF: "The proof or one of its entries is missing a field or has one of the wrong type.",
    Reason.EMPTY_PROOF: "The proof has no entries.",
    Reason.NON_CONTIGUOUS_SEQ: "The entries' sequence numbers are not contiguous from 0.",
    Reason.CONTENT_HASH_MISMATCH: "An entry's content hash is not the sha256 of its envelope.",
    Reason.MALFORMED_ENVELOPE: "An envelope is not strict JSON carrying every signed field.",
    Reason.UNSUPPORTED_FORMAT: "The signed format is not acretix-verify/proof/2.",
    Reason.UNSUPPORTED_ALGO: "The signed algorithm is not ed25519.",
    Reason.ENVELOPE_MISMATCH: "An entry's unsigned fields differ from its signed body.",
    Reason.UNKNOWN_KEY: "The signing key is not pinned for this purpose.",
    Reason.REVOKED_KEY: "The signing key has been revoked.",
    Reason.SIGNATURE_FAILURE: "The Ed25519 signature does not verify.",
    Reason.BROKEN_CHAIN: "An entry's previous hash is not the content hash of the entry before it.",
    Reason.TERMINAL_HEAD_MISMATCH: "The last entry's content hash is not the trusted head.",
    Reason.SUBJECT_MISMATCH: "The proof is about another verification or another request.",
    Reason.CHECKPOINT_INCONSISTENT: "The receipts are no longer an append-only extension of the tree in the last signed checkpoint.",
    Reason.MALFORMED_CHECKPOINT: "A line of the checkpoint log is not a well-formed tree head signed by a pinned portal key.",
    Reason.RECEIPT_MISSING: "A receipt that the audit's Merkle tree holds is gone from the database.",
    Reason.KEY_NOT_IN_PIN_JOURNAL: "The database lists a key that the pin journal outside it does not: it is never trusted.",
    Reason.PIN_JOURNAL_INVALID: "The pin journal outside the database does not verify: only the portal's own key is trusted.",
    Reason.CACHED_STATE_MISMATCH: "A verification's cached columns (what the queue reads) disagree with its signed head receipt.",
    Reason.KEY_STATE_MISMATCH: "A signing key's recorded state disagrees with the pin log (revoked in one, not in the other).",
    Reason.INVALID_JSON: "The bytes are not valid JSON.",
    Reason.DUPLICATE_KEY: "A JSON object repeats a key.",
    Reason.NON_FINITE_NUMBER: "NaN and Infinity are not JSON numbers.",
    Reason.LONE_SURROGATE: "A string holds a lone UTF-16 surrogate.",
    Reason.INTEGER_OUT_OF_RANGE: "An integer lies outside ±(2^53−1) and cannot be hashed exactly.",
    Reason.UNSUPPORTED_JSON_VALUE: "The value has no JSON representation.",
    Reason.MALFORMED_KEY: "The public key is not a well-formed Ed25519 key.",
    Reason.SMALL_ORDER_KEY: "The public key is a small-order point; any signature could verify under it.",
    Reason.NON_CANONICAL_KEY: "The public key's encoding is not canonical (y ≥ p).",
    Reason.KID_MISMATCH: "The key's kid is not the key id derived from its public bytes.",
    Reason.FINGERPRINT_MISMATCH: "The typed fingerprint does not match the key.",
    Reason.KEY_ALREADY_PINNED: "The key is already pinned for this purpose.",
    Reason.KEY_NOT_PINNED: "The key is not pinned for this purpose.",
    Reason.PIN_CHANNEL_REQUIRED: "A pin, unpin or revocation must name the out-of-band channel it went through.",
    Reason.REVOCATION_REASON_REQUIRED: "A revocation must say why the key is revoked.",
    Reason.NO_SIGNING_KEY: "The portal has no usable active signing key; run manage.py create_signing_key.",
    Reason.APPEND_ONLY: "Receipts and pin-log records are append-only: nothing edits or deletes one.",
    Reason.NOT_FOUND: "No such record, or you may not know it exists.",
    Reason.NOT_AUTHENTICATED: "Sign in (or present credentials) first.",
    Reason.PERMISSION_DENIED: "You are signed in but may not do this.",
    Reason.SCOPE_DENIED: "The API token lacks the scope this endpoint needs.",
    Reason.INVALID_REQUEST: "The request is well-formed JSON but a field is missing, of the wrong type or out of range.",
    Reason.UNKNOWN_FIELD: "The request names a field this endpoint does not accept.",
    Reason.BAD_BASE64: "A field that must hold standard base64 does not.",
    Reason.PAYLOAD_TOO_LARGE: "The request body or an inline evidence item is larger than the documented limit.",
    Reason.UNSUPPORTED_MEDIA_TYPE: "The request body must be sent as application/json.",
    Reason.METHOD_NOT_ALLOWED: "This endpoint does not accept that HTTP method.",
    Reason.INTERNAL_ERROR: "The server failed unexpectedly; the failure was logged.",
    Reason.SERVICE_UNAVAILABLE: "The database or the message broker is unavailable for a moment; send the same request again (same Idempotency-Key) after Retry-After seconds.",
    Reason.RATE_LIMITED: "This token sent more requests than its rate allows; send again after Retry-After seconds.",
    Reason.IDEMPOTENCY_CONFLICT: "This Idempotency-Key was already used by this actor for a different request body.",
    Reason.ACTOR_NAME_TAKEN: "Another actor already has this name.",
    Reason.UNKNOWN_SCOPE: "A token scope that does not exist was requested.",
    Reason.NOT_AWAITING_EVIDENCE: "This verification is not waiting for more evidence (it met its contract or was superseded).",
    Reason.RUN_FAILED: "The run failed operationally after its last attempt; it has no determination and no receipt.",
    Reason.REVIEW_LEASE_NOT_HELD: "You do not hold this item: its lease ran out, was released, or another reviewer holds it; claim it first.",
    Reason.REVIEW_LEASE_IDLE: "No reviewer activity on the review page since the last renewal: the lease is not extended and runs out as configured.",
    Reason.ALREADY_DECIDED: "A person has already decided this verification; that decision receipt stands.",
    Reason.NOT_IN_REVIEW_QUEUE: "This verification is not in the review queue: it is not flagged, was decided or superseded, or waits for evidence.",
    Reason.WORKER_SELF_VERIFICATION: "An actor who claimed the task in this cycle cannot verify it.",
    Reason.UNNAMED_ACTOR: "An actor without an authenticated identity never counts as distinct.",
    Reason.STALE_CYCLE: "An approval from an earlier cycle does not count after a reopen.",
    Reason.VERIFIER_AUTHORED_WORK: "The verifier committed work anchoring this task and cannot verify it.",
    Reason.SHARED_EXECUTION_BOUNDARY: "The verifier shares an execution boundary with the worker.",
    Reason.ACTOR_CANNOT_AUTHOR_RESULT: "This kind of actor cannot author a check result.",
    Reason.MALFORMED_RECORD: "A record was built with a missing field or a field of the wrong type.",
    Reason.FINDING_DISAGREEMENT: "Two automated verifications of the same subject, rubric and evidence disagree.",
    Reason.FINDING_TAMPER: "A chain, key or checkpoint does not verify.",
    Reason.FINDING_EVIDENCE_INTEGRITY: "Stored evidence bytes are gone or changed.",
    Reason.FINDING_REVOKED_KEY: "The chain was signed by a key that was later revoked.",
    Reason.FINDING_CLOSE_REQUIRES_HUMAN: "Only a person can acknowledge or close a finding.",
    Reason.FINDING_CLOSE_NEEDS_RATIONALE: "Acknowledging or closing a finding needs a written rationale.",
    Reason.FINDING_ALREADY_CLOSED: "The finding is closed; nothing more can be recorded on it.",
}

EXPLANATIONS: Final[Mapping[Reason, str]] = MappingProxyType(_EXPLANATIONS)


def explain(code: Reason | str) -> str:
    """The one-line plain-language explanation of a registered code; ValueError for an unknown one."""
    return EXPLANATIONS[Reason(code)]


def explain_if_registered(code: object) -> str | None:
    """``explain`` for a value read back from storage or a page: None for no code or one the registry does not know."""
    if not code:
        return None
    try:
        return EXPLANATIONS[Reason(str(code))]
    except ValueError:
        return None


def is_registered(code: str) -> bool:
    try:
        Reason(code)
    except ValueError:
        return False
    return True
