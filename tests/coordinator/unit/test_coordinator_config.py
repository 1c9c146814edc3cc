from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from common.config import build, load_file
from common.errors import ConfigError
from coordinator.config import CoordinatorSettings

REPO = Path(__file__).resolve().parents[3]


def test_defaults_and_overrides():
    settings = build(
        CoordinatorSettings, {"policy": {"name": "fgd"}, "signals": {"report_ttl_s": 30}}
    )
    assert settings.policy.name == "fgd"
    assert settings.signals.report_ttl_s == 30.0
    assert settings.signals.contiguity_threshold_b == 512 * 2**20  # the seed's default
    assert settings.signals.cpu_utilization_threshold_pct == 95.0
    assert settings.ingest.max_body_b == 2**20


@pytest.mark.parametrize(
    ("data", "names"),
    [
        ({"polcy": {}}, "polcy"),
        ({"signals": {"report_ttl_s": "soon"}}, "signals.report_ttl_s"),
        ({"signals": {"report_ttl_s": -1}}, "signals.report_ttl_s"),
        (
            {"signals": {"cpu_utilization_threshold_pct": 150}},
            "signals.cpu_utilization_threshold_pct",
        ),
        ({"ingest": {"auth": "magic"}}, "ingest.auth"),
        ({"publisher": {"heartbeat_s": 0}}, "publisher.heartbeat_s"),
        ({"leader": {"lease_duration_s": 5}}, "leader"),
        ({"listen": "nowhere"}, "listen"),
        ({"kube": {"namespace": 7}}, "kube.namespace"),
        ({"publisher": {"enabled": "yes"}}, "publisher.enabled"),
        ({"policy": []}, "policy"),
        ({"ingest": {"max_clock_ahead_s": 0}}, "ingest.max_clock_ahead_s"),
        ({"kube": {"max_assumed_per_node": 0}}, "kube.max_assumed_per_node"),
        ({"kube": {"max_assumed": -1}}, "kube.max_assumed"),
    ],
)
def test_bad_settings_name_the_key(data, names):
    with pytest.raises(ConfigError) as info:
        build(CoordinatorSettings, data)
    assert names in str(info.value)


def test_a_bad_config_file_exits_2_naming_the_key(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("signals:\n  report_ttl_s: forever\n")
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "coordinator", "--config", str(config)],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 2
    assert "signals.report_ttl_s" in result.stderr and str(config) in result.stderr
    config.write_text("policy: {name: nosuch}\n")
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "coordinator", "--config", str(config)],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 2 and "nosuch" in result.stderr


def test_load_file_rejects_invalid_yaml(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: [1,\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_file(CoordinatorSettings, path)
    assert load_file(CoordinatorSettings, None) == CoordinatorSettings()


@pytest.mark.parametrize(
    ("evictions", "key"),
    [
        ({"cycle_s": 0}, "evictions.cycle_s"),
        ({"cooldown_s": -1}, "evictions.cooldown_s"),
        ({"max_evictions_per_s": 0}, "evictions.max_evictions_per_s"),
        ({"approval_ttl_s": 0}, "evictions.approval_ttl_s"),
        ({"pressure_for_s": 0}, "evictions.pressure_for_s"),
        ({"pressure_for_s": float("nan")}, "evictions.pressure_for_s"),
        ({"max_per_cycle": 0}, "evictions.max_per_cycle"),
        ({"max_per_node_per_cycle": 0}, "evictions.max_per_node_per_cycle"),
        ({"max_per_namespace_per_cycle": -3}, "evictions.max_per_namespace_per_cycle"),
        ({"eviction_burst": 0}, "evictions.eviction_burst"),
        ({"pressure_full_avg10_pct": 0}, "evictions.pressure_full_avg10_pct"),
        ({"pressure_full_avg10_pct": 101}, "evictions.pressure_full_avg10_pct"),
        ({"pressure_full_avg10_pct": float("nan")}, "evictions.pressure_full_avg10_pct"),
        ({"unknown_work_s": 0}, "evictions.unknown_work_s"),
        ({"plan_deadline_s": 0}, "evictions.plan_deadline_s"),
        ({"cycle_budget_s": -1}, "evictions.cycle_budget_s"),
        ({"preempt_deadline_s": float("nan")}, "evictions.preempt_deadline_s"),
        ({"min_level_gap": 0}, "evictions.min_level_gap"),
        ({"min_level_gap": 4}, "evictions.min_level_gap"),
        ({"level_min_priority": {"urgent": 5}}, "evictions.level_min_priority"),
        ({"level_min_priority": {"medium": 5, "high": 1}}, "evictions.level_min_priority"),
        ({"level_min_priority": {"high": 10, "critical": 9}}, "evictions.level_min_priority"),
        ({"enabled": "yes"}, "evictions.enabled"),
        ({"cooldown_s": "soon"}, "evictions.cooldown_s"),
        ({"queue_weights": {"team-a": "heavy"}}, "evictions.queue_weights"),
        ({"max_per_cycles": 3}, "evictions.max_per_cycles"),
        ({"checkpointing_max_s": 0}, "evictions.checkpointing_max_s"),
        ({"checkpointing_max_s": -60}, "evictions.checkpointing_max_s"),
        ({"checkpointing_max_s": float("nan")}, "evictions.checkpointing_max_s"),
        ({"checkpointing_max_s": float("inf")}, "evictions.checkpointing_max_s"),
        ({"checkpointing_max_s": "a while"}, "evictions.checkpointing_max_s"),
    ],
)
def test_bad_eviction_settings_name_the_key(evictions, key):
    with pytest.raises(ConfigError) as info:
        build(CoordinatorSettings, {"evictions": evictions})
    assert key in str(info.value)


def test_eviction_settings_at_their_bounds_are_taken():
    settings = build(
        CoordinatorSettings,
        {
            "evictions": {
                "pressure_full_avg10_pct": 100,
                "min_level_gap": 3,
                "max_per_cycle": 1,
                "level_min_priority": {"medium": 7, "high": 7},
                "checkpointing_max_s": 0.5,
            }
        },
    ).evictions
    assert settings.checkpointing_max_s == 0.5
    assert settings.pressure_full_avg10_pct == 100.0 and settings.min_level_gap == 3
    assert settings.max_per_cycle == 1 and settings.level_min_priority == {"medium": 7, "high": 7}
