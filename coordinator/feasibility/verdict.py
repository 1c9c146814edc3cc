"""The model's answer for one pod, node and set of pods gone."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final


class Outcome(Enum):
    FITS = "fits"
    REFUSED = "refused"
    """A filter refuses the pod there."""
    UNJUDGEABLE = "unjudgeable"
    """The model cannot say (volumes, DRA claims, a field it cannot read): nothing may be
    planned on that answer."""


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    rule: str
    """The upstream filter plugin that decided (``"NodePorts"``); empty when it fits."""
    reason: str

    @property
    def fits(self) -> bool:
        return self.outcome is Outcome.FITS


FITS: Final = Verdict(Outcome.FITS, "", "fits")


def refused(rule: str, reason: str) -> Verdict:
    return Verdict(Outcome.REFUSED, rule, reason)


def unjudgeable(reason: str) -> Verdict:
    return Verdict(Outcome.UNJUDGEABLE, "", reason)
