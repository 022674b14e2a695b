"""The reviewer's pages: the queue, one item's review page, decisions (docs/guide-reviewer.md).

Thin views (STYLE §10): ``access`` checks who may do what, ``verification.reviews.services`` (claims, decisions) writes,
``verification.runs.selectors`` and ``verification.reviews.selectors`` read.
"""
