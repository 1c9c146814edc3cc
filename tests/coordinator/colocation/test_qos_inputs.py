"""The facts one report gives the colocation controller (who is BE: tests/common/test_qos.py)."""

from __future__ import annotations

import pytest
from msgspec import structs

from common.schema import NodeReport, PodInfo, PodsSection, PodUsage
from coordinator.colocation.inputs import Source, node_input
from tests.common.podinfo import QOS_KEY, pod_info
from tests.kit import build_report


def with_pods(*pods: PodInfo, usage: dict[str, PodUsage] | None = None) -> NodeReport:
    """The load generator's report with these pods and this per-pod use (None: none sent)."""
    report = build_report("n", now=1_790_000_000.0)
    return structs.replace(
        report,
        pods=PodsSection(measured_at=report.measured_at, source="apiserver", pods=list(pods)),
        pod_usage=usage,
    )


def use(cpu_m: int | None, stall: float | None = None) -> PodUsage:
    return PodUsage(cpu_m=cpu_m, cpu_some_avg10_pct=stall, cpu_some_rate_pct=None)


def test_facts_of_a_report() -> None:
    report = with_pods(
        pod_info("ls-1"),
        pod_info("ls-2"),
        pod_info("be-1", labels={QOS_KEY: "BE"}),
        pod_info("be-done", labels={QOS_KEY: "BE"}, phase="Succeeded"),
        pod_info("ls-done", phase="Failed"),
        pod_info("ls-new"),  # listed, no cgroup yet: no use
        usage={
            "ls-1": use(3000, 41.5),
            "ls-2": use(2000, 12.0),
            "be-1": use(5000, 80.0),
            "be-done": use(9000),
            "ls-done": use(9000, 99.0),
            "not-listed": use(7000, 95.0),  # a pod the section does not name: neither side
        },
    )
    facts = node_input(report, QOS_KEY)
    assert (facts.pressure_pct, facts.source) == (41.5, Source.LS_PODS)
    assert (facts.ls_usage_m, facts.be_usage_m) == (5000, 5000)
    assert facts.be_pods == ("be-1",)
    assert facts.ls_pods == 3
    assert facts.allocatable_m == 221_500  # true allocatable


@pytest.mark.parametrize("usage", [None, "no-kubepods-cgroup", {}, {"ls-1": use(None)}])
def test_without_per_pod_signals_the_node_stands_in(usage: object) -> None:
    report = with_pods(pod_info("ls-1"), pod_info("be-1", labels={QOS_KEY: "BE"}), usage=usage)  # type: ignore[arg-type]
    facts = node_input(report, QOS_KEY)
    assert report.psi.system.cpu.some is not None  # type: ignore[union-attr]
    assert facts.source is Source.NODE
    assert facts.pressure_pct == report.psi.system.cpu.some.avg10_pct  # type: ignore[union-attr]
    assert report.usage.cpu.used_m > 0  # type: ignore[union-attr]
    # No pod measured: the whole node's use counts as LS, BE's is unknown.
    assert (facts.ls_usage_m, facts.be_usage_m) == (report.usage.cpu.used_m, None)  # type: ignore[union-attr]


def test_without_any_psi_there_is_no_pressure() -> None:
    report = structs.replace(
        with_pods(pod_info("be-1", labels={QOS_KEY: "BE"})), psi="psi-unsupported"
    )  # type: ignore[type-var]
    facts = node_input(report, QOS_KEY)
    assert (facts.pressure_pct, facts.source) == (None, Source.NONE)


def test_be_pods_are_capped_but_all_their_use_counts() -> None:
    many = [pod_info(f"be-{i}", labels={QOS_KEY: "BE"}) for i in range(600)]
    facts = node_input(with_pods(*many, usage={f"be-{i}": use(10) for i in range(600)}), QOS_KEY)
    assert len(facts.be_pods) == 512
    assert facts.be_usage_m == 6000


def test_an_unchanged_pods_section_carries_the_pod_classes_over_and_joins_new_use() -> None:
    whole = with_pods(
        pod_info("ls-1"), pod_info("be-1", labels={QOS_KEY: "BE"}), usage={"ls-1": use(3000, 41.5)}
    )
    first = node_input(whole, QOS_KEY)
    assert (first.ls_usage_m, first.be_usage_m) == (3000, 0)
    # The next report: the same pods (sent as "unchanged"), their use measured anew.
    between = structs.replace(
        whole,
        pods="unchanged",  # type: ignore[arg-type]
        pod_usage={"ls-1": use(1000, 12.5), "be-1": use(5000)},
    )
    carried = node_input(between, QOS_KEY, first)
    assert carried.pods == first.pods
    assert (carried.pressure_pct, carried.source, carried.be_pods) == (
        12.5,
        Source.LS_PODS,
        ("be-1",),
    )
    assert (carried.ls_usage_m, carried.be_usage_m) == (1000, 5000)
    # Nothing to carry (a restarted coordinator): no pods known until the next whole
    # report, so the use of UIDs it cannot class counts for neither side.
    fresh = node_input(between, QOS_KEY)
    assert (fresh.be_pods, fresh.source, fresh.ls_usage_m) == (
        (),
        Source.NODE,
        between.usage.cpu.used_m,
    )  # type: ignore[union-attr]
    # Any other absent reason is not "unchanged": the pods are not known.
    gone = structs.replace(whole, pods="apiserver-unreachable")  # type: ignore[arg-type]
    assert node_input(gone, QOS_KEY, first).be_pods == ()


def test_an_ls_pods_stall_is_its_rate_where_measured_else_its_avg10() -> None:
    def rated(avg10: float | None, rate: float | None) -> PodUsage:
        return PodUsage(cpu_m=1000, cpu_some_avg10_pct=avg10, cpu_some_rate_pct=rate)

    pods = (pod_info("ls-1"), pod_info("ls-2"), pod_info("be-1", labels={QOS_KEY: "BE"}))
    # avg10 still climbing (12 %) while the interval's measured share is 47.5 %: the rate.
    facts = node_input(with_pods(*pods, usage={"ls-1": rated(12.0, 47.5)}), QOS_KEY)
    assert (facts.pressure_pct, facts.pressure_rate) == (47.5, True)
    # avg10 trailing a stall that is over (40 %, the interval had 3 %): the rate.
    facts = node_input(with_pods(*pods, usage={"ls-1": rated(40.0, 3.0)}), QOS_KEY)
    assert (facts.pressure_pct, facts.pressure_rate) == (3.0, True)
    # A pod's first sample (no rate yet) stands in with its avg10, and says so.
    usage = {"ls-1": rated(22.0, None), "ls-2": rated(35.0, 18.0), "be-1": rated(90.0, 95.0)}
    facts = node_input(with_pods(*pods, usage=usage), QOS_KEY)
    assert (facts.pressure_pct, facts.pressure_rate) == (22.0, False)
    usage = {"ls-1": rated(22.0, None), "ls-2": rated(35.0, 31.0)}
    facts = node_input(with_pods(*pods, usage=usage), QOS_KEY)
    assert (facts.pressure_pct, facts.pressure_rate) == (31.0, True)
