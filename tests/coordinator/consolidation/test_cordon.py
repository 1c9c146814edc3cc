"""The patrol's optional cordon, through the real client against the API emulator: off by
default, dry-run telling without patching, capped, lowest utilisation first, lifted when
a node no longer qualifies or the feature is switched off, fenced, within the patch
budget — and never touching a cordon the patrol did not put there."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from common import annotations as ann
from coordinator.config import ConfigError, PatrolSettings
from coordinator.consolidation import marker
from hack.bench.ingest import gpu_node
from hack.kubeapi import KubeApi
from hack.kubeapi.resources import NODES
from tests.coordinator.consolidation.test_marker import NODES_, Rig, kube, make

__all__ = ["kube", "make"]

A, B, C = NODES_


def unschedulable(rig: Rig, node: str) -> bool:
    obj = rig.kube.store.get(NODES, "", node)
    return bool((obj.get("spec") or {}).get("unschedulable"))


def cordon_events(rig: Rig) -> list[tuple[str, str]]:
    return [(n, r) for n, r, _ in rig.events() if "ordon" in r]  # (Would)Cordon(ed), Uncordoned


def operator_cordons(rig: Rig, kube: KubeApi, node: str) -> None:
    """An operator's ``kubectl cordon``: on the API server and, as the watch delivers it,
    in the coordinator's view."""

    def cordon(obj: dict[str, Any]) -> dict[str, Any]:
        obj.setdefault("spec", {})["unschedulable"] = True
        obj["metadata"]["resourceVersion"] = ""
        return obj

    kube.store.update(NODES, "", node, cordon)
    rig.cluster.upsert_node({**gpu_node(node), "spec": {"unschedulable": True}})


async def test_off_by_default_a_candidate_is_only_marked(make: Any) -> None:
    rig = make()
    rig.hour({A: 5.0})
    assert await rig.mark() == 1
    assert ann.CONSOLIDATE in rig.annotations(A)
    assert not unschedulable(rig, A) and ann.CONSOLIDATE_CORDONED not in rig.annotations(A)
    assert cordon_events(rig) == []


async def test_dry_run_tells_once_and_patches_nothing(
    make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    rig = make(cordon="dry-run")
    rig.hour({A: 5.0, B: 90.0})
    caplog.set_level(logging.INFO, logger=marker.__name__)
    assert await rig.mark() == 1  # the mark; the dry run writes no patch
    assert not unschedulable(rig, A) and ann.CONSOLIDATE_CORDONED not in rig.annotations(A)
    (event,) = [e for e in rig.events() if e[1] == "ConsolidationWouldCordon"]
    assert event[0] == A and event[2].startswith("would cordon (dry-run): mean utilisation 5.0%")
    assert await rig.mark() == 0
    assert len(cordon_events(rig)) == 1  # told once while it stays a candidate
    told = [r.getMessage() for r in caplog.records if "would cordon" in r.getMessage()]
    assert told == [
        f"patrol would cordon {A}: {event[2].split(': ', 1)[1]} (patrol.cordon is dry-run)"
    ]


async def test_dry_run_events_wait_for_the_patch_budget(make: Any) -> None:
    rig = make(cordon="dry-run", max_patches_per_s=1.0)
    rig.hour({A: 5.0})
    await rig.mark()  # the one token goes to the mark
    assert cordon_events(rig) == []
    await rig.mark()
    assert cordon_events(rig) == [(A, "ConsolidationWouldCordon")]


async def test_on_cordons_the_emptiest_candidate_up_to_the_cap_and_lifts_it_when_busy(
    make: Any,
) -> None:
    rig = make(cordon="enabled", max_cordoned=1)
    rig.hour({A: 20.0, B: 5.0, C: 90.0})
    assert await rig.mark() == 3  # two marks, one cordon
    assert unschedulable(rig, B) and not unschedulable(rig, A)  # B is the emptier
    assert ann.parse(rig.annotations(B)[ann.CONSOLIDATE_CORDONED])[0] == {"window": "1h"}
    assert cordon_events(rig) == [(B, "ConsolidationCordoned")]
    assert await rig.mark() == 0  # the cap holds

    rig.hour({A: 20.0, B: 95.0, C: 90.0})  # B busy again: lifted, and A takes the place
    assert await rig.mark() == 3  # B's mark cleared, B uncordoned, A cordoned
    assert not unschedulable(rig, B) and ann.CONSOLIDATE_CORDONED not in rig.annotations(B)
    assert unschedulable(rig, A)
    assert cordon_events(rig) == [
        (A, "ConsolidationCordoned"),
        (B, "ConsolidationCordoned"),
        (B, "ConsolidationUncordoned"),
    ]
    assert not unschedulable(rig, C)


async def test_an_operators_cordon_is_never_taken_nor_lifted(make: Any, kube: KubeApi) -> None:
    rig = make(cordon="enabled", max_cordoned=3)
    operator_cordons(rig, kube, A)
    rig.hour({A: 5.0, B: 90.0})
    assert await rig.mark() == 1  # marked, not cordoned: the cordon is the operator's
    assert ann.CONSOLIDATE_CORDONED not in rig.annotations(A)
    rig.hour({A: 95.0, B: 90.0})
    assert await rig.mark() == 1  # the mark cleared; the cordon stays
    assert unschedulable(rig, A) and cordon_events(rig) == []


async def test_switched_off_a_new_term_lifts_only_the_patrols_cordons(
    make: Any, kube: KubeApi
) -> None:
    on = make(cordon="enabled", max_cordoned=3)
    on.hour({A: 5.0})
    await on.mark()
    assert unschedulable(on, A)
    operator_cordons(on, kube, B)
    off = make()  # a restart with cordon disabled, a new term
    off.clock.advance(7200.0)  # later than the first (Events are named by their time)
    off.hour({A: 5.0})
    assert await off.mark() == 1
    assert not unschedulable(off, A) and ann.CONSOLIDATE_CORDONED not in off.annotations(A)
    (lifted,) = [e for e in off.events() if e[1] == "ConsolidationUncordoned"]
    assert lifted[0] == A and lifted[2].endswith("patrol.cordon is disabled")
    assert unschedulable(off, B)  # the operator's


async def test_cordons_are_fenced_and_within_the_patch_budget(make: Any) -> None:
    rig = make(cordon="enabled", max_patches_per_s=1.0)
    rig.hour({A: 5.0})
    assert await rig.mark() == 1  # the one token goes to the mark
    assert not unschedulable(rig, A)
    assert await rig.mark() == 1  # the next tick's to the cordon
    assert unschedulable(rig, A)

    fenced = make(cordon="enabled")
    fenced.hour({B: 5.0})
    assert await fenced.marker.start_term()
    fenced.term = True
    fenced.fence.revoke()  # the lease lapsed: neither mark nor cordon
    assert await fenced.mark() == 0
    assert not unschedulable(fenced, B) and [e for e in fenced.events() if e[0] == B] == []


def test_a_cordon_setting_that_cannot_be_meant_is_refused() -> None:
    with pytest.raises(
        ConfigError, match=r"patrol.cordon: expected disabled, dry-run or enabled, got 'yes'"
    ):
        PatrolSettings(cordon="yes")
    with pytest.raises(ConfigError, match=r"patrol.max_cordoned: expected 1..10000"):
        PatrolSettings(max_cordoned=0)
    assert PatrolSettings().cordon == "disabled"
