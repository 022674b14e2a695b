"""The reviewer's pages: the queue, one item's review page, decisions (README: The reviewer queue).

Thin views (STYLE §10): ``access`` checks who may do what, ``verification.services.reviews`` writes,
``verification.selectors`` and ``verification.review_selectors`` read.
"""
