"""Reviews (SPEC §2, §9): the reviewer queue, claims with leases, decisions and findings."""
