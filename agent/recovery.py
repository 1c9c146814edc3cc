"""Every start of the agent first puts back what a previous one left changed on the node.

An agent killed with SIGKILL (or OOM-killed, or on a node that lost power) leaves the BE
quota it had cut in the cgroups, recorded in its journal (:mod:`agent.journal`). Whoever
starts next on the node restores it, whatever its flags: an agent restarted without
``--enforce`` (the DaemonSet switched to an observe-only overlay, a hand-run ``--once``)
would otherwise leave the quota cut for as long as the pods live. Only then are the flags
honoured: with ``--enforce`` the enforcer stays, holding the journal, for the colocation
side; without, the journal is given up again.

A start with no journal on disk and no ``--enforce`` touches nothing (it does not even
create the journal's directory), so a hand-run agent on a laptop writes nothing. A journal
held by another live agent on the node is left to it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from agent import cgroups
from agent.enforcer import Enforcer
from agent.journal import JournalBusyError, JournalError
from agent.settings import AgentSettings
from common.clock import Clock

log = logging.getLogger(__name__)


def restore_at_start(settings: AgentSettings, clock: Clock, *, enforce: bool) -> Enforcer | None:
    """Restore what the journal says a previous run left changed; the enforcer, holding the
    journal, when this agent is to ``enforce`` (and can), else None."""
    journal = Path(settings.enforcer.journal)
    if not enforce and not journal.exists():
        return None
    layout = cgroups.detect(settings.paths.cgroup)
    if layout is None:
        if journal.exists():
            log.error(
                "enforcer: %s lists values a previous run changed, but there is no kubepods"
                " cgroup tree under %s to restore them in; left as they are",
                journal,
                settings.paths.cgroup,
            )
        if enforce:
            log.warning(
                "--enforce: no kubepods cgroup tree under %s; not enforcing", settings.paths.cgroup
            )
        return None
    try:
        enforcer = Enforcer(layout, journal, clock, exclusive=True)
    except JournalBusyError as e:
        if enforce:
            log.error("--enforce: %s; not enforcing (one enforcer per node)", e)
        else:
            log.info("enforcer: %s; its values are its own to restore", e)
        return None
    except JournalError as e:
        log.error("enforcer: %s; nothing restored%s", e, ", not enforcing" if enforce else "")
        return None
    recovered = enforcer.recover()
    if recovered.error:
        log.error("enforcer: restoring the previous run's values: %s", recovered.error)
    elif recovered.written:
        log.info("enforcer: restored %d cgroup values a previous run left", recovered.written)
    if enforce:
        return enforcer
    enforcer.close()
    return None
