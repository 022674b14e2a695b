"""Forms of the history pages: the filters (a GET form, so a filtered view is a URL to share) and a finding step."""

from __future__ import annotations

from typing import Any, Final

from django import forms

from verification.kernel.reasons import Reason
from verification.records import selectors_history as hs

MAX_RATIONALE_CHARS: Final = 10_000


def _choices(values: tuple[str, ...] | list[str], blank: str) -> list[tuple[str, str]]:
    return [("", blank), *((v, v) for v in values)]


class HistoryFilterForm(forms.Form):
    """The history's filters. Validation of the values is the selector's (``selectors_history.history_queryset``):
    this form only renders the controls and keeps what was typed, so a bad value is shown with its reason code."""

    subject = forms.CharField(required=False, max_length=hs.MAX_TEXT_CHARS, label="Subject")
    determination = forms.ChoiceField(required=False, choices=_choices(hs.DETERMINATIONS, "any determination"))
    verdict = forms.ChoiceField(required=False, choices=_choices(hs.VERDICTS, "any verdict"))
    authority = forms.ChoiceField(required=False, choices=_choices(hs.AUTHORITIES, "any authority"))
    flagged = forms.ChoiceField(required=False, choices=[("", "flagged or not"), ("true", "flagged"),
                                                         ("false", "not flagged")])
    reason = forms.ChoiceField(required=False, choices=_choices(sorted(r.value for r in Reason), "any reason"))
    state = forms.ChoiceField(
        required=False, choices=[("", "any state"), *((s, hs.STATE_LABELS[s]) for s in hs.STATES)]
    )
    reviewer = forms.ChoiceField(required=False, choices=[("", "any reviewer")])
    since = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args: Any, reviewers: list[str], reasons: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if reasons is not None:
            # issue 14: only the codes something reads as (not the whole registry), and the one asked for, if any
            asked = (self.data.get("reason") or "").strip() if self.data else ""
            codes = sorted(set(reasons) | ({asked} if asked else set()))
            self.fields["reason"].choices = [("", "any reason"), *((c, c) for c in codes)]
        chosen = (self.data.get("reviewer") or "").strip() if self.data else ""
        names = list(reviewers)
        if chosen and chosen not in names:
            names.append(chosen)  # someone who has since lost the role: still a valid filter
        self.fields["reviewer"].choices = _choices(names, "any reviewer")


class FindingStepForm(forms.Form):
    """Acknowledge or close: the rationale. Blank is the service's refusal (``finding-close-needs-rationale``)."""

    rationale = forms.CharField(
        required=False, max_length=MAX_RATIONALE_CHARS, widget=forms.Textarea(attrs={"rows": 4}), label="Rationale"
    )
