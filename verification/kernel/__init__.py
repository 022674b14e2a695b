"""The verification kernel: pure rules over plain records (SPEC §1–§10).

Imports no Django, no database, no network, and never reads the clock: time is an argument.
"""
