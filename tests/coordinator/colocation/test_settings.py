"""Colocation settings from a config mapping: pools by selector, and every refusal naming
the pool and the key."""

from __future__ import annotations

import pytest

from common.config import build
from common.errors import ConfigError
from coordinator.config import CoordinatorSettings


def test_pools_load_in_order_with_the_default_after_them() -> None:
    settings = build(
        CoordinatorSettings,
        {
            "colocation": {
                "qos_label": "example.com/qos",
                "pools": [
                    {"name": "online", "selector": {"tier": "online"}, "pressure_high_pct": 15},
                    {"name": "batch", "selector": {"tier": "batch"}, "enabled": False},
                ],
                "default": {"floor_min_m": 1000},
            }
        },
    )
    colocation = settings.colocation
    assert colocation.qos_label == "example.com/qos"
    assert colocation.pool_of({"tier": "online"}).pressure_high_pct == 15.0
    assert colocation.pool_of({"tier": "batch"}).enabled is False
    assert colocation.pool_of({}).floor_min_m == 1000
    assert colocation.pool_of({}).pressure_high_pct == 30.0  # the seed's 0.3


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        (
            {"pressure_low_pct": 30, "pressure_high_pct": 30},
            "need 0 <= pressure_low_pct < pressure_high_pct <= 100",
        ),
        ({"pressure_high_pct": 101}, "need 0 <= pressure_low_pct < pressure_high_pct <= 100"),
        ({"pressure_low_pct": -1}, "need 0 <= pressure_low_pct < pressure_high_pct <= 100"),
        ({"tighten_factor": 1.0}, "tighten_factor: expected 0 < value < 1"),
        ({"tighten_factor": 0}, "tighten_factor: expected 0 < value < 1"),
        ({"tighten_after_s": 0}, "tighten_after_s: must be positive"),
        ({"relax_after_s": -5}, "relax_after_s: must be positive"),
        ({"relax_step_pct": 0}, "relax_step_pct: must be positive"),
        ({"floor_min_m": 0}, "floor_min_m: must be positive"),
        ({"local_window_s": 0}, "local_window_s: must be positive"),
        ({"local_hold_s": 0}, "local_hold_s: must be positive"),
        ({"floor_pct": 101}, "floor_pct: expected 0..100"),
        ({"usage_threshold_pct": -1}, "usage_threshold_pct: expected 0..100"),
        ({"usage_band_pct": 101}, "usage_band_pct: expected 0..100"),
        ({"reclaim_margin_pct": 150}, "reclaim_margin_pct: expected 0..100"),
    ],
)
def test_bad_pool_settings_name_the_pool_and_key(pool: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        build(CoordinatorSettings, {"colocation": {"pools": [{"name": "gpu", **pool}]}})
    assert "colocation.pools[gpu]" in str(info.value)
    assert message in str(info.value)


def test_unknown_pool_keys_are_refused() -> None:
    with pytest.raises(ConfigError, match="colocation.pools"):
        build(CoordinatorSettings, {"colocation": {"pools": [{"pressure_hi": 15}]}})
