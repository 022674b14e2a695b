"""Verdict history, subject timelines, findings, dashboards and exports for managers (issue 6)."""
