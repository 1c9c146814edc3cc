"""Property-based fuzzing of ``POST /v1/reports`` over HTTP, authenticated as node-a:
whatever the msgpack body, the answer is never a 5xx, and a refused report changes
nothing in the cluster.

Bodies are node-a's real reports (8 GPUs with their NVLink matrix, NUMA, ~30 pods) with a
few hostile mutations (see :mod:`tests.coordinator.hostile`: NaN and infinite floats,
integers at and past int64, deep nesting, ragged or huge arrays, wrong types), valid
encodings with bytes flipped or cut short, and random bytes. The default run tries
``hostile.DEFAULT_EXAMPLES`` bodies; ``-m slow`` tries ``hostile.SLOW_EXAMPLES``.
"""

from __future__ import annotations

import io
import math
import struct
from typing import Any, Final

import msgspec
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from coordinator.config import CoordinatorSettings, IngestSettings
from coordinator.state.kubeobjects import pod_request
from tests.coordinator import hostile
from tests.coordinator.extender.kubejson import pod
from tests.coordinator.fingerprint import fingerprint
from tests.coordinator.ingest.conftest import (
    MAX_BODY_B,
    TOKENS,
    IngestRig,
    MakeRig,
    plain,
    report_for,
)
from tests.hosts import FakeClock

NOW: Final = FakeClock().wall()
SEEDS: Final = [plain(report_for("node-a", seq=seq, variant=seq, now=NOW)) for seq in (1, 2, 5)]
_DEEP_MSGPACK: Final = b"\x91" * 100_000 + b"\xc0"
"""``[[[…[nil]…]]]`` 100,000 deep: msgpack has no other way to write it."""
_RAW: Final = {
    hostile.NAN_TOKEN: b"\xcb" + struct.pack(">d", math.nan),
    hostile.INF_TOKEN: b"\xcb" + struct.pack(">d", math.inf),
    "\x00ninf\x00": b"\xcb" + struct.pack(">d", -math.inf),
    hostile.DEEP_TOKEN: _DEEP_MSGPACK,
}


TWO_GPUS: Final = pod_request(pod("2", "4Gi", gpus=2), 0)
"""A pod whose scoring reads every GPU signal, the NVLink matrix included."""


def encode_msgpack(value: Any) -> bytes:
    """msgpack bytes of ``value``; integers msgpack cannot hold become floats, and raw
    placeholders their bytes (NaN, infinities, nesting too deep for any encoder)."""
    data = msgspec.msgpack.encode(_representable(value))
    for placeholder, raw in _RAW.items():
        data = data.replace(msgspec.msgpack.encode(placeholder), raw)
    return data


def _representable(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not -(2**63) <= value < 2**64:
        return float(value)
    if isinstance(value, dict):
        return {k: _representable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_representable(v) for v in value]
    return value


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    """A valid report's bytes, some flipped, or cut short."""
    data = bytearray(encode_msgpack(draw(st.sampled_from(SEEDS))))
    if draw(st.booleans()):
        return bytes(data[: draw(st.integers(0, len(data) - 1))])
    for _ in range(draw(st.integers(1, 8))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


def bodies() -> st.SearchStrategy[bytes]:
    seeds = st.sampled_from(SEEDS)
    return st.one_of(
        seeds.flatmap(hostile.mutated).map(encode_msgpack),
        seeds.flatmap(hostile.mutated).map(encode_msgpack),
        seeds.flatmap(hostile.reshaped).map(encode_msgpack),
        damaged(),
        st.binary(max_size=512),
    )


@pytest.fixture
async def rig(make_rig: MakeRig) -> IngestRig:
    """The ingest rig under the default policy (``stowage``), which reads every signal a
    report carries, the NVLink matrix included."""
    ingest = IngestSettings(auth="static", static_tokens=TOKENS, max_body_b=MAX_BODY_B)
    return await make_rig(CoordinatorSettings(ingest=ingest))


async def post_and_check(rig: IngestRig, body: bytes) -> int:
    """POST ``body`` as node-a: never a 5xx; a refusal leaves the cluster as it was, and
    what is accepted can be scored (a report must not break later scheduling calls)."""
    before = fingerprint(rig.cluster)
    resp = await rig.post(io.BytesIO(body))  # aiohttp warns of large raw bytes
    text = (await resp.read()).decode("utf-8", "replace")  # a 200 is msgpack
    assert resp.status < 500, (resp.status, text[:500], body[:200])
    if resp.status != 200:
        assert resp.status in (400, 403, 409, 413), (resp.status, text[:500])
        assert set(await resp.json()) == {"error"}
        assert fingerprint(rig.cluster) == before, (text[:500], body[:200])
    else:
        rig.cluster.filter(TWO_GPUS, list(rig.cluster.specs))
        rig.cluster.prioritize(TWO_GPUS, list(rig.cluster.specs))
    return resp.status


@hostile.FUZZ
@given(data=st.data())
async def test_no_report_gets_a_5xx_or_changes_state_when_refused(
    rig: IngestRig, data: st.DataObject
):
    status = await post_and_check(rig, data.draw(bodies()))
    event(f"HTTP {status}")  # shown by --hypothesis-show-statistics


@pytest.mark.slow
@hostile.FUZZ_SLOW
@given(data=st.data())
async def test_no_report_gets_a_5xx_or_changes_state_when_refused_long_run(
    rig: IngestRig, data: st.DataObject
):
    status = await post_and_check(rig, data.draw(bodies()))
    event(f"HTTP {status}")


async def test_the_seeds_are_accepted(rig: IngestRig):
    """The fuzzer starts from reports ingest takes, so mutations probe past the decoder."""
    for seed in SEEDS:
        assert await post_and_check(rig, encode_msgpack(seed)) == 200
