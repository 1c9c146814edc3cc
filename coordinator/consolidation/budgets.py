"""How many nodes of a node group may be draining now: the group's drain budgets
(:class:`coordinator.config.DrainBudget`, Karpenter's disruption budgets with a weekly
window in words), judged at a given wall-clock second (UTC) so a test or the simulator
can ask for any time.

Of the budgets holding now, the most restrictive applies; none holding, the group has no
budget of its own (``drain.max_draining`` still limits the cluster). A share is of the
group's nodes, rounded up as Karpenter rounds it: 10 % of 5 nodes lets one drain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from coordinator.config import DAYS, DrainBudget, DrainSettings


def holds(budget: DrainBudget, now: float) -> bool:
    """Whether ``budget`` applies at Unix second ``now``: always without a window, else
    while a window opened on one of its days (UTC) has not closed — one opened yesterday
    evening may still be open this morning."""
    if budget.start is None or budget.duration_h is None:
        return True
    at = datetime.fromtimestamp(now, UTC)
    hour, minute = (int(part) for part in budget.start.split(":"))
    span = timedelta(hours=budget.duration_h)
    back = math.ceil(budget.duration_h / 24)  # windows opened this many days ago may be open
    for days_ago in range(back + 1):
        day = at - timedelta(days=days_ago)
        if budget.days and DAYS[day.weekday()] not in budget.days:
            continue
        opened = day.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if opened <= at < opened + span:
            return True
    return False


def limit(budget: DrainBudget, group_size: int) -> int:
    """The number of nodes ``budget`` lets drain at once in a group of ``group_size``."""
    text = budget.nodes.strip()
    if text.endswith("%"):
        return math.ceil(group_size * int(text[:-1]) / 100)
    return int(text)


def allowed(settings: DrainSettings, group: str, group_size: int, now: float) -> int | None:
    """How many nodes of ``group`` (``group_size`` nodes) may be draining at once at
    ``now``; None when no budget of the group holds."""
    budgets: Sequence[DrainBudget] = settings.group_budgets.get(group, settings.budgets)
    limits = [limit(b, group_size) for b in budgets if holds(b, now)]
    return min(limits) if limits else None
