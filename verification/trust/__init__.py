"""Trust (SPEC §7, §8): signing keys, receipts, the pin journal, the audit and the security log."""
