"""The API's views (STYLE §10): authenticate (the token), check the scope, validate the body, call ONE service,
render. Every fact about who did what is the token's (SPEC §1); the body only says what.

One module per resource: ``rubrics``, ``tasks`` (and what hangs on a task), ``evidence``, ``verifications`` and
``events``; ``common`` holds the base view, the documented error answers, body validation and the 404 lookups.
"""
