"""Actors (SPEC §1): people's and machines' identities, API tokens, roles and ownership."""
