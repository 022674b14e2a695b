"""Writes about actors: actors and tokens, portal users and their roles."""
