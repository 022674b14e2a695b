"""Writes of the review loop: claims, decisions, findings."""
