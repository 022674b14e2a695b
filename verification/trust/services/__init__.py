"""Writes of trust: keys and pins, receipts, the audit, the security log."""
