"""Request and response bodies of the API: every field named and typed (issue 4 §3), so the OpenAPI schema is
concrete and schemathesis checks mean something.

Request serializers are *validators*: they refuse unknown fields (``unknown-field``), wrong types (no coercion of
numbers into strings or strings into numbers: ``invalid-request``) and bad base64 (``bad-base64``). Where a body is
hashed (a rubric's ``rubric_hash``, a submission's ``submission_hash``) the service receives the body exactly as
parsed, never the serializer's output, so a client can recompute the hash from what it sent (SPEC §7).

No request body names the actor, the authority, the cycle or the contract: those come from the token and the
stored task (SPEC §1). The only exception is ``authority`` in an imported result, kept as the submitter's claim.

One module per resource: ``base`` (the strict fields, the wire vocabularies, the error body), ``rubrics``, ``tasks``,
``evidence``, ``submissions`` (a submission's body and a delivered result), ``verifications`` (the answers and the
list) and ``events``.
"""
