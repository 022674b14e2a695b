"""The JSON API under ``/v1/`` (issue 4 §3): Django REST framework views that authenticate, validate, call one
service and render. Every fact about who did what comes from the token (SPEC §1), never from the body.
"""
