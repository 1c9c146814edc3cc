"""NodePorts, NodeResourcesFit, InterPodAffinity, PodTopologySpread, eligibility and
what the model will not judge — with pods gone as well as present, from kube-scheduler's
documented behaviour."""

from __future__ import annotations

import pytest

from coordinator.feasibility import Outcome, Question, could_run
from tests.coordinator.feasibility.objs import node, pod, snapshot


def verdict_rule(verdict) -> str:
    return "fits" if verdict.fits else verdict.rule or verdict.outcome.value


def ported(name: str, port: int, *, on: str | None = None, protocol: str = "TCP", ip: str = ""):
    entry = {"containerPort": 80, "hostPort": port, "protocol": protocol}
    if ip:
        entry["hostIP"] = ip
    container = {"name": "c", "ports": [entry], "resources": {"requests": {"cpu": "100m"}}}
    return pod(name, on=on, containers=[container])


# ---------------------------------------------------------------------- NodePorts


@pytest.mark.parametrize(
    "held, wanted, fits",
    [
        (dict(port=8080), dict(port=8080), False),
        (dict(port=8080), dict(port=8081), True),
        (dict(port=8080, protocol="UDP"), dict(port=8080), True),
        (dict(port=8080, ip="10.0.0.1"), dict(port=8080, ip="10.0.0.2"), True),
        (dict(port=8080, ip="10.0.0.1"), dict(port=8080, ip="10.0.0.1"), False),
        (dict(port=8080, ip="10.0.0.1"), dict(port=8080), False),  # 0.0.0.0 is every IP
        (dict(port=8080), dict(port=8080, ip="10.0.0.2"), False),
    ],
)
def test_host_ports_conflict_by_protocol_ip_and_port(held, wanted, fits) -> None:
    s = snapshot([node("n")], [ported("holder", on="n", **held)])
    verdict = could_run(ported("p", **wanted), "n", s)
    assert verdict_rule(verdict) == ("fits" if fits else "NodePorts")


def test_evicting_the_port_holder_frees_the_port() -> None:
    s = snapshot([node("n")], [ported("holder", 8080, on="n")])
    question = Question(ported("p", 8080), s)
    assert question.without("n").rule == "NodePorts"
    assert question.without("n", {"uid-holder"}).fits
    assert question.matters("uid-holder")


def test_sidecar_ports_count() -> None:
    sidecar = {
        "name": "s",
        "restartPolicy": "Always",
        "ports": [{"containerPort": 1, "hostPort": 9000}],
    }
    s = snapshot([node("n")], [pod("holder", on="n", initContainers=[sidecar])])
    assert could_run(ported("p", 9000), "n", s).rule == "NodePorts"


# --------------------------------------------------------------- NodeResourcesFit


def test_resources_fit_counts_the_pods_staying() -> None:
    s = snapshot([node("n", cpu="4")], [pod("a", on="n", cpu="2"), pod("b", on="n", cpu="1")])
    question = Question(pod("p", cpu="2"), s)
    assert question.without("n").rule == "NodeResourcesFit"
    assert question.short("n") == {"cpu": 1000}
    assert question.without("n", {"uid-b"}).fits


def test_the_pod_count_is_a_resource() -> None:
    s = snapshot([node("n", pods="2")], [pod("a", on="n", cpu="0"), pod("b", on="n", cpu="0")])
    question = Question(pod("p", cpu="0"), s)
    assert "pods" in question.without("n").reason
    assert question.without("n", {"uid-a"}).fits


def test_extended_resources_the_node_lacks_refuse() -> None:
    wants = pod("p", containers=[{"name": "c", "resources": {"limits": {"example.com/fpga": "1"}}}])
    assert could_run(wants, "n", snapshot([node("n")])).rule == "NodeResourcesFit"
    offered = node("n", extra={"example.com/fpga": "2"})
    assert could_run(wants, "n", snapshot([offered])).fits


def test_init_containers_count_at_their_peak_sidecars_all_along() -> None:
    def init(cpu: str, sidecar: bool = False) -> dict:
        c = {"name": f"i{cpu}", "resources": {"requests": {"cpu": cpu}}}
        if sidecar:
            c["restartPolicy"] = "Always"
        return c

    main = [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
    # max(sum(containers), max(init)): an init container of 3 needs 3, not 1 + 3.
    plain = pod("p", containers=main, initContainers=[init("3")])
    assert could_run(plain, "n", snapshot([node("n", cpu="3")])).fits
    assert not could_run(plain, "n", snapshot([node("n", cpu="2900m")])).fits
    # A sidecar (restartPolicy Always) runs alongside the containers: 1 + 2 = 3.
    side = pod("p", containers=main, initContainers=[init("2", sidecar=True)])
    assert not could_run(side, "n", snapshot([node("n", cpu="2900m")])).fits
    assert could_run(side, "n", snapshot([node("n", cpu="3")])).fits


def test_overhead_is_requested() -> None:
    heavy = pod("p", cpu="1", overhead={"cpu": "500m"})
    assert not could_run(heavy, "n", snapshot([node("n", cpu="1400m")])).fits
    assert could_run(heavy, "n", snapshot([node("n", cpu="1500m")])).fits


# ----------------------------------------------------------------- InterPodAffinity


ZONES = [
    node("a1", labels={"zone": "a"}),
    node("a2", labels={"zone": "a"}),
    node("b1", labels={"zone": "b"}),
]


def term(app: str, key: str = "zone", **more) -> dict:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key, **more}


def anti(*terms_) -> dict:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms_)}}


def near(*terms_) -> dict:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms_)}}


def test_anti_affinity_keeps_the_pod_out_of_the_domain_until_the_pod_is_gone() -> None:
    s = snapshot(ZONES, [pod("db", on="a1", labels={"app": "db"})])
    question = Question(pod("p", affinity=anti(term("db"))), s)
    assert question.without("a2").rule == "InterPodAffinity"  # same zone, other node
    assert question.without("b1").fits
    assert question.without("a1", {"uid-db"}).fits
    assert question.matters("uid-db")


def test_an_existing_pods_anti_affinity_keeps_the_pod_out() -> None:
    guard = pod("guard", on="a1", labels={"app": "g"}, affinity=anti(term("web")))
    s = snapshot(ZONES, [guard])
    question = Question(pod("p", labels={"app": "web"}), s)
    assert question.without("a2").rule == "InterPodAffinity"
    assert question.without("b1").fits
    assert question.without("a1", {"uid-guard"}).fits
    # Another namespace: the guard's term names its own namespace only.
    assert could_run(pod("p", namespace="other", labels={"app": "web"}), "a2", s).fits


def test_affinity_needs_a_selected_pod_in_the_domain() -> None:
    s = snapshot(ZONES, [pod("cache", on="a1", labels={"app": "cache"})])
    question = Question(pod("p", affinity=near(term("cache"))), s)
    assert question.without("a2").fits
    assert question.without("b1").rule == "InterPodAffinity"
    # Evicting the only cache pod breaks it (and the pod does not match itself).
    assert question.without("a1", {"uid-cache"}).rule == "InterPodAffinity"


def test_the_first_pod_of_a_self_attracting_group_fits() -> None:
    lonely = pod("p", labels={"app": "ring"}, affinity=near(term("ring")))
    assert could_run(lonely, "a1", snapshot(ZONES)).fits
    stranger = pod("p", labels={"app": "other"}, affinity=near(term("ring")))
    assert not could_run(stranger, "a1", snapshot(ZONES)).fits


def test_affinity_on_a_node_without_the_topology_key_fails() -> None:
    bare = node("bare")
    s = snapshot([*ZONES, bare], [pod("c", on="a1", labels={"app": "c"})])
    assert not could_run(pod("p", affinity=near(term("c"))), "bare", s).fits


def test_terms_select_by_namespace() -> None:
    s = snapshot(ZONES, [pod("db", on="a1", namespace="data", labels={"app": "db"})])
    assert could_run(pod("p", affinity=anti(term("db"))), "a2", s).fits  # own namespace only
    listed = anti(term("db", namespaces=["data"]))
    assert not could_run(pod("p", affinity=listed), "a2", s).fits
    everywhere = anti(term("db", namespaceSelector={}))
    assert not could_run(pod("p", affinity=everywhere), "a2", s).fits
    by_labels = anti(term("db", namespaceSelector={"matchLabels": {"team": "x"}}))
    assert could_run(pod("p", affinity=by_labels), "b1", s).outcome is Outcome.UNJUDGEABLE


def test_match_label_keys_join_the_selector() -> None:
    s = snapshot(ZONES, [pod("old", on="a1", labels={"app": "w", "rev": "1"})])
    keyed = anti({**term("w"), "matchLabelKeys": ["rev"]})
    assert could_run(pod("p", labels={"app": "w", "rev": "2"}, affinity=keyed), "a2", s).fits
    assert not could_run(pod("p", labels={"app": "w", "rev": "1"}, affinity=keyed), "a2", s).fits


# -------------------------------------------------------------- PodTopologySpread


def spread(max_skew: int = 1, key: str = "zone", **more) -> list[dict]:
    return [
        {
            "maxSkew": max_skew,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "w"}},
            **more,
        }
    ]


def workers(*nodes_: str) -> list:
    return [pod(f"w{i}", on=n, labels={"app": "w"}) for i, n in enumerate(nodes_)]


def test_spread_keeps_the_skew_within_max_skew() -> None:
    s = snapshot(ZONES, workers("a1", "a2", "b1"))  # a: 2, b: 1
    incoming = pod("p", labels={"app": "w"}, topologySpreadConstraints=spread())
    question = Question(incoming, s)
    assert question.without("a1").rule == "PodTopologySpread"  # 2 + 1 - 1 = 2 > 1
    assert question.without("b1").fits
    assert question.without("a1", {"uid-w0"}).fits  # a: 1 after the eviction
    assert question.matters("uid-w0")


def test_schedule_anyway_does_not_filter() -> None:
    s = snapshot(ZONES, workers("a1", "a2"))
    soft = spread(whenUnsatisfiable="ScheduleAnyway")
    assert could_run(pod("p", labels={"app": "w"}, topologySpreadConstraints=soft), "a1", s).fits


def test_a_node_without_the_topology_key_fails_the_spread() -> None:
    s = snapshot([*ZONES, node("bare")], workers("a1"))
    assert not could_run(
        pod("p", labels={"app": "w"}, topologySpreadConstraints=spread()), "bare", s
    ).fits


def test_min_domains_counts_the_fewest_as_zero_while_domains_are_missing() -> None:
    s = snapshot(ZONES, workers("a1", "b1"))  # two domains, one pod each
    assert could_run(
        pod("p", labels={"app": "w"}, topologySpreadConstraints=spread()), "a1", s
    ).fits
    three = spread(minDomains=3)
    assert not could_run(
        pod("p", labels={"app": "w"}, topologySpreadConstraints=three), "a1", s
    ).fits


def test_spread_counts_only_nodes_matching_the_pods_node_affinity() -> None:
    # Zone b is excluded by the pod's selector: it does not count as an empty domain.
    s = snapshot(
        [node("a1", labels={"zone": "a", "pool": "x"}), node("b1", labels={"zone": "b"})],
        workers("a1"),
    )
    incoming = pod(
        "p", labels={"app": "w"}, nodeSelector={"pool": "x"}, topologySpreadConstraints=spread()
    )
    assert could_run(incoming, "a1", s).fits
    ignored = spread(nodeAffinityPolicy="Ignore")
    loose = pod(
        "p", labels={"app": "w"}, nodeSelector={"pool": "x"}, topologySpreadConstraints=ignored
    )
    assert could_run(loose, "a1", s).rule == "PodTopologySpread"


def test_spread_skips_terminating_pods_and_other_namespaces() -> None:
    s = snapshot(
        ZONES,
        [
            pod("gone", on="a1", labels={"app": "w"}, deletionTimestamp="2026-01-01T00:00:00Z"),
            pod("far", on="a1", namespace="other", labels={"app": "w"}),
        ],
    )
    assert could_run(
        pod("p", labels={"app": "w"}, topologySpreadConstraints=spread()), "a1", s
    ).fits


# -------------------------------------------------------------------- eligibility


def test_preemption_policy_never_bars_preemption() -> None:
    question = Question(pod("p", preemptionPolicy="Never"), snapshot([node("n")]))
    assert "Never" in question.barred()
    assert Question(pod("p"), snapshot([node("n")])).barred() is None


def test_scheduling_gates_bar_preemption() -> None:
    question = Question(pod("p", schedulingGates=[{"name": "wait"}]), snapshot([node("n")]))
    assert "gate" in question.barred()


def test_a_nominated_pod_waits_for_its_victims_terminating() -> None:
    dying = pod("v", on="n", priority=1, deletionTimestamp="2026-01-01T00:00:00Z")
    s = snapshot([node("n")], [dying])
    waiting = pod("p", priority=100, status={"nominatedNodeName": "n"})
    assert "terminating" in Question(waiting, s).barred()
    assert Question(pod("p", priority=100), s).barred() is None
    higher = pod("p", priority=0, status={"nominatedNodeName": "n"})
    assert Question(higher, s).barred() is None  # not a pod of lower priority


# --------------------------------------------------------------------- unjudgeable


@pytest.mark.parametrize(
    "spec",
    [
        {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]},
        {"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]},
        {"resourceClaims": [{"name": "gpu", "resourceClaimName": "x"}]},
    ],
)
def test_volumes_and_dra_claims_are_unjudgeable(spec) -> None:
    verdict = could_run(pod("p", **spec), "n", snapshot([node("n")]))
    assert verdict.outcome is Outcome.UNJUDGEABLE


def test_plain_volumes_are_judged() -> None:
    volumes = [{"name": "c", "configMap": {"name": "x"}}, {"name": "t", "emptyDir": {}}]
    assert could_run(pod("p", volumes=volumes), "n", snapshot([node("n")])).fits
