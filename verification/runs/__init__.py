"""Runs (SPEC §1-§7): tasks and cycles, submissions, automated runs, results and the event feed."""
