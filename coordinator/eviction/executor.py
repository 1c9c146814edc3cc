"""Acting on eviction plans — the only part of Stowage that removes pods, so every guard is
here, whatever the planner already checked:

* **Loop prevention.** A victim whose owner (its controller; a bare pod: itself) had a
  pod evicted for the same trigger within ``cooldown_s`` is spared: its replacement is
  never evicted again for the same reason (the descheduler's eviction loop).
* **Cooldown per queue**: one round per ``cooldown_s`` (a node's, for pressure). A round
  that really evicted is also written to the Lease every replica watches
  (:mod:`coordinator.live.cooldowns`), so kube-scheduler's preemption through any
  replica's preempt verb honours it, and so does a leader taking over.
* **Approval** for plans that need it: published on the pending pod (annotation
  :data:`~coordinator.kube.approvals.PLAN_KEY` and an Event, both saying how to approve)
  and executed only once an approval in the coordinator's own namespace
  (:mod:`coordinator.kube.approvals`) names the pod, the plan's id and the digest of its
  victims, unexpired and not used before — while that plan is still the one the planner
  makes. Nothing on the pod approves: its owner writes the pod. A new plan replaces the
  published one (an approval of the old names another digest); an unapproved plan
  expires after ``approval_ttl_s`` and that pod gets no new proposal for ``cooldown_s``.
  With ``approval_webhook`` the plan is also posted there, and a signed callback to this
  leader approves or denies it (:mod:`coordinator.eviction.webhook`); a denied plan is
  withdrawn as an expired one is.
* **Caps per cycle** (global, per node, per namespace) and **a rate** (token bucket).
  A preemption plan is all or nothing — half of one frees too little for the preemptor,
  which would make every victim a wasted one; a pressure plan is cut to what fits
  (each eviction relieves the node).
* **PDBs**: before the first real eviction of a preemption plan every victim is tried in
  dry run; one a budget blocks (429) stops the whole plan with nothing evicted.
* **Dry run** until ``evictions.enabled``: the API server checks everything and changes
  nothing; decisions, Events, metrics and ``/debug/evictions`` read as for real, and the
  cooldowns and loop records are spent alike, so the preview is what a real run does —
  but only here: a round that evicted nothing is not shared with the other replicas.

Every decision: a line in :class:`~coordinator.decisionlog.DecisionLog`, a metric
and an Event (on the victim, and on the pending pod or the node). A refusal is told by
Event once per subject and kind of refusal, not every cycle.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from common import annotations as ann
from common.clock import Clock
from coordinator.config import EvictionSettings
from coordinator.decisionlog import Decision, DecisionLog
from coordinator.eviction.answers import Plan, Refusal, Victim
from coordinator.eviction.guards import Cooldowns, CycleCaps, Replacements
from coordinator.eviction.webhook import ApprovalHook, Awaiting
from coordinator.kube import approvals
from coordinator.kube.approvals import Approval, Invalid
from coordinator.kube.client import KubeError
from coordinator.kube.events import MAX_MESSAGE, EventType, ObjectRef
from coordinator.kube.evictions import EvictionResult, Outcome
from coordinator.kube.leader import LeaseLost
from coordinator.live import cooldowns, nominations
from coordinator.metrics import CoordinatorMetrics
from coordinator.ratelimit import TokenBucket

log = logging.getLogger(__name__)


class EvictionApi(Protocol):
    """The API calls (:class:`coordinator.kube.evictions.Evictor`); synchronous, fenced."""

    def evict(self, namespace: str, name: str, uid: str, *, dry_run: bool) -> EvictionResult: ...

    def annotate_pod(
        self, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> None: ...

    def annotate_node(self, name: str, annotations: Mapping[str, str | None]) -> None: ...


class Recorder(Protocol):
    """:class:`coordinator.kube.events.EventRecorder`: synchronous, never raises."""

    def record(self, obj_ref: ObjectRef, type: EventType, reason: str, message: str) -> Any: ...


class Owners(Protocol):
    """Who owns a plan's pods, which the plan does not say: read when needed
    (:class:`coordinator.kube.evictions.Evictor`); synchronous."""

    def owner(self, victim: Victim) -> str:
        """Its controller (``Kind/ns/name``), or the pod itself (``Pod/ns/name``)."""
        ...


class Approvals(Protocol):
    """Where operators approve plans (:class:`coordinator.kube.approvals.ApprovalReader`);
    synchronous."""

    namespace: str
    """The coordinator's own namespace, which the approvals live in."""

    def find(self, plan: str) -> Sequence[Approval | Invalid]:
        """The approvals labelled for plan id ``plan``, as they are now."""
        ...


class CooldownStore(Protocol):
    """Where the shared cooldowns are written (:class:`coordinator.kube.cooldowns.CooldownLease`);
    synchronous, fenced."""

    def write(self, value: str | None) -> None: ...


@dataclass(frozen=True)
class Sharing:
    """The cooldowns shared with every replica (:mod:`coordinator.live.cooldowns`)."""

    seen: cooldowns.SharedCooldowns
    """The Lease as this replica's watch has it."""
    store: CooldownStore


def identify(plan: Plan) -> tuple[str, str]:
    """A preemption plan's id and the digest of its victims (the approval names both)."""
    assert plan.preemptor is not None
    digest = approvals.victims_digest(plan.node, (v.uid for v in plan.victims))
    return approvals.plan_id(plan.preemptor, digest), digest


@dataclass
class _Proposal:
    plan: Plan
    id: str
    expires_at: float  # monotonic


class Executor:
    def __init__(
        self,
        settings: EvictionSettings,
        api: EvictionApi,
        events: Recorder,
        owners: Owners,
        approval_source: Approvals,
        metrics: CoordinatorMetrics,
        clock: Clock,
        decisions: DecisionLog,
        sharing: Sharing | None = None,
        hook: ApprovalHook | None = None,
    ) -> None:
        """Without ``sharing`` the cooldowns stay this executor's own; with ``hook`` plans
        awaiting approval are posted to the approval webhook too."""
        self._hook = hook
        self._settings = settings
        self._api = api
        self._events = events
        self._owners = owners
        self._approval_source = approval_source
        self._metrics = metrics
        self._clock = clock
        self.decisions = decisions
        self.cooldowns = Cooldowns(settings.cooldown_s)
        self.replacements = Replacements(settings.cooldown_s)
        self._sharing = sharing
        self._evicted: dict[str, float] = {}
        """Key → until when (Unix seconds) it cools down, for the rounds that really
        evicted: what the shared Lease must say, until it does."""
        self._bucket = TokenBucket(settings.max_evictions_per_s, settings.eviction_burst)
        self._caps = CycleCaps(settings)
        self._proposals: dict[str, _Proposal] = {}
        self._declined: dict[str, float] = {}
        """Pending pods whose plan expired unapproved → when they may get a new one."""
        self._told: dict[str, str] = {}
        """Subject → the kind of refusal last told by Event."""
        self._spent: dict[str, float] = {}
        """UIDs of approvals a plan was executed on → when they expire (Unix seconds):
        each is used once, and forgotten once it approves nothing anyway."""

    @property
    def dry_run(self) -> bool:
        return not self._settings.enabled

    def cooling(self, now_mono: float, now_wall: float) -> dict[str, float]:
        """Key → until when (Unix seconds) it cools down, for the planner's view: this
        executor's own cooldowns and the shared ones (a round an earlier leader ran)."""
        found = self.cooldowns.until(now_mono, now_wall)
        if self._sharing is not None:
            for key, until in self._sharing.seen.active(now_wall).items():
                found[key] = max(found.get(key, until), until)
        return found

    # ------------------------------------------------------------------ cycle

    async def start_cycle(self) -> None:
        """A new cycle: fresh caps, the rate refilled, lapsed records dropped (from the
        shared cooldowns too), and plans left unapproved past ``approval_ttl_s`` expired."""
        now = self._clock.monotonic()
        self._caps = CycleCaps(self._settings)
        self._bucket.refill(now)
        self.cooldowns.forget_lapsed(now)
        self.replacements.forget_lapsed(now)
        for pod in [p for p, until in self._declined.items() if until <= now]:
            del self._declined[pod]
        wall = self._clock.wall()
        for uid in [u for u, expires in self._spent.items() if expires <= wall]:
            del self._spent[uid]
        await self._share(wall)
        for pod, proposal in list(self._proposals.items()):
            if proposal.expires_at <= now:
                reason = (
                    f"plan {proposal.id} not approved within {self._settings.approval_ttl_s:g}s"
                )
                await self._withdraw(pod, proposal, reason, "PlanExpired")
        self._metrics.eviction_approvals_pending.set(len(self._proposals))

    async def _withdraw(self, pod: str, proposal: _Proposal, reason: str, step: str) -> None:
        """Take back the proposal for ``pod`` (expired or denied: ``step``): no new one
        for ``cooldown_s``."""
        del self._proposals[pod]
        if self._hook is not None:
            self._hook.forget(proposal.id)
        self._declined[pod] = self._clock.monotonic() + self._settings.cooldown_s
        await self._annotate(pod, {approvals.PLAN_KEY: None})
        self._decide(proposal.plan, "expired", reason)
        await self._event(
            _pod_ref(pod), EventType.WARNING, _approval_event(proposal.plan, step), reason
        )
        self._metrics.eviction_approvals_pending.set(len(self._proposals))

    async def refused(self, trigger: str, subject: str, refusal: Refusal) -> None:
        """The planner found no plan for ``subject`` (a pending pod's ``ns/name``, or a
        node for pressure): counted, logged (``/debug``) and told as an Event on it, so
        ``kubectl describe pod`` says why nothing is preempted for it. The cycle calls
        this only when the reason changed, not every cycle."""
        self._metrics.eviction_plans.labels(trigger, "refused").inc()
        self.decisions.add(
            Decision(self._clock.wall(), trigger, subject, "refused", refusal.reason)
        )
        ref = _pod_ref(subject) if trigger in _POD_TRIGGERS else ObjectRef.node(subject)
        await self._event(
            ref, EventType.NORMAL, "EvictionNotPlanned", f"{trigger}: {refusal.reason}"
        )

    async def consider(self, plan: Plan) -> str:
        """Act on ``plan`` as far as the guards allow; return the decision."""
        now = self._clock.monotonic()
        preemption = plan.preemptor is not None
        victims = list(plan.victims)

        if plan.queue in self.cooling(now, self._clock.wall()):
            return await self._refuse(
                plan,
                "cooldown",
                f"queue {plan.queue} cooling down: one round per {self._settings.cooldown_s:g}s",
            )

        owners = {v.uid: await asyncio.to_thread(self._owners.owner, v) for v in victims}
        spared = [
            (v, s)
            for v in victims
            if (s := self.replacements.spared_s(owners[v.uid], plan.trigger, now)) > 0
        ]
        if spared and (preemption or len(spared) == len(victims)):
            v, s = spared[0]
            why = (
                f"{v.namespace}/{v.name} replaces a pod evicted for {plan.trigger} "
                f"(same owner {owners[v.uid]}): spared another {s:.0f}s"
            )
            return await self._refuse(plan, "loop", why)
        victims = [v for v in victims if all(v is not w for w, _ in spared)]

        approval = None
        if preemption and plan.needs_approval:
            approval = await self._approval(plan, now)
            if approval is None:
                return "awaiting-approval"

        fit = min(self._caps.fitting(victims), int(self._bucket.tokens))
        if fit < len(victims) and (preemption or fit == 0):
            return await self._refuse(
                plan,
                "caps",
                f"{len(victims)} evictions exceed what this cycle's caps and the rate leave"
                f" ({fit})",
            )
        victims = victims[:fit]

        if preemption and not self.dry_run:
            blocked = await self._preflight(victims)
            if blocked is not None:
                return await self._refuse(plan, "budget", blocked)
        if approval is not None:
            self._spent[approval.uid] = approval.expires_at
        return await self._execute(plan, victims, owners, now)

    # -------------------------------------------------------------- internals

    async def _approval(self, plan: Plan, now: float) -> Approval | None:
        """The approval ``plan`` may be executed on, if it is the plan awaiting approval
        and one was given; publishes it (replacing an older proposal) when it is not."""
        pod = plan.preemptor
        assert pod is not None
        pid, digest = identify(plan)
        proposal = self._proposals.get(pod)
        if proposal is None or proposal.id != pid or proposal.expires_at <= now:
            await self._propose(plan, now)
            return None
        if self._hook is not None:
            decided = self._hook.decision(pid)
            if decided == "approve":
                expires = self._clock.wall() + proposal.expires_at - now
                return Approval("the approval webhook", f"webhook:{pid}", pod, pid, digest, expires)
            if decided == "deny":
                why = f"plan {pid} denied through the approval webhook"
                await self._withdraw(pod, proposal, why, "PlanDenied")
                return None
        try:
            found = await asyncio.to_thread(self._approval_source.find, pid)
        except KubeError as e:
            self._decide(plan, "awaiting-approval", f"plan {pid}: {e}")
            return None
        wall = self._clock.wall()
        problems: list[str] = []
        for candidate in found:
            problem = approvals.problem(candidate, pod, digest, wall)
            if problem is None and isinstance(candidate, Approval):
                if candidate.uid not in self._spent:
                    return candidate
                problem = f"{candidate.name} was used already"
            problems.append(problem or f"{candidate.name}: not an approval")
        if not problems:
            self._decide(plan, "awaiting-approval", f"plan {pid}: not approved yet")
            return None
        why = f"plan {pid} not approved: {'; '.join(problems)}"
        self._decide(plan, "awaiting-approval", why)
        if self._told.get(pod) != why:
            self._told[pod] = why
            await self._event(
                _pod_ref(pod), EventType.WARNING, _approval_event(plan, "ApprovalRefused"), why
            )
        return None

    async def _propose(self, plan: Plan, now: float) -> None:
        """Publish ``plan`` on its pending pod (annotation and Event, saying how to approve
        it), unless an earlier plan for that pod expired unapproved lately."""
        pod = plan.preemptor
        assert pod is not None
        declined = self._declined.get(pod)
        if declined is not None:
            self._decide(
                plan,
                "refused",
                f"an earlier plan expired unapproved; no new one for {declined - now:.0f}s",
            )
            return
        pid, digest = identify(plan)
        replaced = self._proposals.get(pod)
        if replaced is not None and self._hook is not None:
            self._hook.forget(replaced.id)
        self._proposals[pod] = _Proposal(plan, pid, now + self._settings.approval_ttl_s)
        wall = self._clock.wall()
        expires = wall + self._settings.approval_ttl_s
        namespace = self._approval_source.namespace
        victims = tuple((f"{v.namespace}/{v.name}", v.uid) for v in plan.victims)
        published = approvals.Published(pid, digest, plan.node, victims, expires)
        await self._annotate(pod, {approvals.PLAN_KEY: published.annotation(pod, namespace, wall)})
        how = (
            f"; approve: {approvals.approve_command(pod, namespace)}, or: "
            f"{approvals.kubectl_command(pod, digest, expires, namespace)}"
        )
        what = f"plan {pid} awaits approval until {ann.timestamp(expires)}: {plan.reason}"
        room = MAX_MESSAGE - len(how)  # the command last and whole, to copy
        message = (what if len(what) <= room else what[: room - 1] + "…") + how
        self._decide(plan, "awaiting-approval", message)
        await self._event(
            _pod_ref(pod), EventType.NORMAL, _approval_event(plan, "PlanProposed"), message
        )
        self._metrics.eviction_approvals_pending.set(len(self._proposals))
        if self._hook is not None:
            payload = {
                "plan": pid, "digest": digest, "trigger": plan.trigger, "queue": plan.queue,
                "pod": pod, "node": plan.node, "reason": plan.reason,
                "victims": [{"pod": name, "uid": uid} for name, uid in victims],
                "expires": ann.timestamp(expires),
            }  # fmt: skip
            await self._hook.propose(pid, Awaiting(pod, digest, expires), payload)

    async def _preflight(self, victims: Sequence[Victim]) -> str | None:
        """Every victim in dry run first: the reason the first one would not go, if any."""
        for v in victims:
            try:
                result = await asyncio.to_thread(
                    self._api.evict, v.namespace, v.name, v.uid, dry_run=True
                )
            except (KubeError, LeaseLost) as e:
                return str(e)
            if result.outcome is not Outcome.DRY_RUN:
                return f"{v.namespace}/{v.name}: {result.outcome}: {result.reason}"
        return None

    async def _execute(
        self, plan: Plan, victims: Sequence[Victim], owners: Mapping[str, str], now: float
    ) -> str:
        self.cooldowns.spend(plan.queue, now)
        self._told.pop(plan.preemptor or plan.node, None)
        outcomes: list[tuple[str, str]] = []
        stopped: str | None = None
        for v in victims:
            self._bucket.take()  # there is one: counted against the tokens above
            self._caps.count(v)
            try:
                result = await asyncio.to_thread(
                    self._api.evict, v.namespace, v.name, v.uid, dry_run=self.dry_run
                )
            except LeaseLost as e:
                stopped = str(e)
                outcomes.append((f"{v.namespace}/{v.name}", "not-leader"))
                break
            except KubeError as e:
                stopped = str(e)
                outcomes.append((f"{v.namespace}/{v.name}", "error"))
                self._metrics.evictions.labels(plan.trigger, "error").inc()
                break
            outcomes.append((f"{v.namespace}/{v.name}", result.outcome.value))
            self._metrics.evictions.labels(plan.trigger, result.outcome.value).inc()
            if result.outcome in (Outcome.EVICTED, Outcome.DRY_RUN):
                self.replacements.evicted(owners[v.uid], plan.trigger, now)
            await self._event(
                ObjectRef(kind="Pod", name=v.name, namespace=v.namespace, uid=v.uid),
                EventType.WARNING if result.outcome is Outcome.BLOCKED else EventType.NORMAL,
                _VICTIM_REASON[result.outcome],
                f"{plan.trigger} on {plan.node}: {v.reason}; {result.reason}",
            )
            if plan.preemptor is not None and result.outcome is Outcome.BLOCKED:
                # The rest would be wasted: the preemptor needs the whole set.
                stopped = f"{v.namespace}/{v.name} blocked: {result.reason}"
                break
        done = sum(1 for _, o in outcomes if o in (Outcome.EVICTED, Outcome.DRY_RUN))
        if any(o == Outcome.EVICTED for _, o in outcomes):
            wall = self._clock.wall()
            self._evicted[plan.queue] = cooldowns.ends(wall, self._settings.cooldown_s)
            await self._share(wall)
        if stopped is None and done == len(plan.victims):
            decision = "dry-run" if self.dry_run else "evicted"
        elif done:
            decision = "partial"
        else:
            decision = "not-leader" if outcomes and outcomes[-1][1] == "not-leader" else "error"
        reason = plan.reason if stopped is None else f"{plan.reason}; stopped: {stopped}"
        self._decide(plan, decision, reason, tuple(outcomes))
        if plan.preemptor is not None:
            if (done_with := self._proposals.pop(plan.preemptor, None)) is not None:
                if self._hook is not None:
                    self._hook.forget(done_with.id)
                await self._annotate(plan.preemptor, {approvals.PLAN_KEY: None})
                self._metrics.eviction_approvals_pending.set(len(self._proposals))
            ref = _pod_ref(plan.preemptor)
        else:
            ref = ObjectRef.node(plan.node)
        verb = "would evict (dry run)" if self.dry_run else "evicted"
        await self._event(
            ref,
            EventType.NORMAL,
            _ROUND_REASON[plan.trigger],
            f"{verb} {done} of {len(plan.victims)} on {plan.node}: {reason}",
        )
        return decision

    async def _refuse(self, plan: Plan, kind: str, why: str) -> str:
        subject = plan.preemptor or plan.node
        self._decide(plan, "refused", why)
        if self._told.get(subject) != kind:
            self._told[subject] = kind
            ref = _pod_ref(subject) if plan.preemptor else ObjectRef.node(plan.node)
            await self._event(ref, EventType.NORMAL, "EvictionRefused", f"{plan.trigger}: {why}")
        return "refused"

    def _decide(
        self, plan: Plan, decision: str, reason: str, victims: tuple[tuple[str, str], ...] = ()
    ) -> None:
        self._metrics.eviction_plans.labels(plan.trigger, decision).inc()
        subject = plan.preemptor or plan.node
        self.decisions.add(
            Decision(self._clock.wall(), plan.trigger, subject, decision, reason, victims)
        )
        log.info("%s %s: %s: %s", plan.trigger, subject, decision, reason)

    async def nominate(self, node: str, value: str | None, why: str) -> bool:
        """Write ``node``'s nominations (:mod:`coordinator.live.nominations`; None removes
        them); ``why`` is for the log. False when the API server did not take it."""
        try:
            await asyncio.to_thread(self._api.annotate_node, node, {nominations.KEY: value})
        except (KubeError, LeaseLost) as e:
            log.warning("nominations on %s (%s): %s", node, why, e)
            return False
        return True

    async def nomination_expired(self, entry: nominations.Nomination, ttl_s: float) -> None:
        """The room held on ``entry.node`` went unused for ``ttl_s``: said once, on the pod."""
        reason = (
            f"the room made on {entry.node} was not used within {ttl_s:g}s: it is open to"
            " other pods again"
        )
        self.decisions.add(Decision(self._clock.wall(), "preemption", entry.pod, "expired", reason))
        await self._event(_pod_ref(entry.pod), EventType.NORMAL, "NominationExpired", reason)

    async def _share(self, now: float) -> None:
        """Bring the shared Lease up to date at ``now`` (Unix seconds): the cooldowns of the
        rounds this executor evicted in, lapsed ones dropped; written only when that
        changes what it says. A failed write is tried again next cycle."""
        if self._sharing is None:
            return
        seen = self._sharing.seen
        self._evicted = {k: until for k, until in self._evicted.items() if until > now}
        wanted = seen.active(now)
        for key, until in self._evicted.items():
            wanted[key] = max(wanted.get(key, until), until)
        if wanted == seen.entries():
            return
        text = cooldowns.value(wanted, now)
        try:
            await asyncio.to_thread(self._sharing.store.write, text)
        except (KubeError, LeaseLost) as e:
            log.warning("cooldowns not shared: %s", e)
            return
        seen.observe(text)  # as the watch will say, before its echo arrives

    async def _annotate(self, pod: str, values: Mapping[str, str | None]) -> None:
        namespace, _, name = pod.partition("/")
        try:
            await asyncio.to_thread(self._api.annotate_pod, namespace, name, values)
        except (KubeError, LeaseLost) as e:
            log.warning("%s", e)

    async def _event(self, ref: ObjectRef, kind: EventType, reason: str, message: str) -> None:
        await asyncio.to_thread(self._events.record, ref, kind, reason, message)


_ROUND_REASON = {
    "preemption": "PreemptionExecuted",
    "pressure": "PressureEviction",
    "consolidation": "ConsolidationEviction",
    "defrag": "DefragMigration",
}
"""The Event on the pending pod (preemption) or the node, by the plan's trigger."""

_POD_TRIGGERS = ("preemption", "defrag")
"""The triggers whose subject is a pending pod (else a node)."""


def _approval_event(plan: Plan, step: str) -> str:
    """The Event reason of a step of ``plan``'s approval (``PlanProposed``, …): on a pod a
    migration (defrag) plan waits for, ``Migration…``, so that ``kubectl describe`` tells
    it from a plan to preempt others for that pod; ``Preemption…`` otherwise."""
    return ("Migration" if plan.trigger == "defrag" else "Preemption") + step


_VICTIM_REASON = {
    Outcome.EVICTED: "Evicted",
    Outcome.DRY_RUN: "WouldEvict",
    Outcome.BLOCKED: "EvictionBlocked",
    Outcome.GONE: "EvictionTargetGone",
}


def _pod_ref(pod: str) -> ObjectRef:
    namespace, _, name = pod.partition("/")
    return ObjectRef(kind="Pod", name=name, namespace=namespace)
