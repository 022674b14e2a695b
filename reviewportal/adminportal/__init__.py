"""The admin pages (issue 7): keys and the pin log, receipt chains, evidence, users and tokens, the security log and
the continuous audit. Thin views (STYLE §10): ``access`` checks who may do what, ``verification.services`` write,
``verification.trust.selectors`` read."""
