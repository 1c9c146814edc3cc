"""The scheduling benchmark's account of a coordinator profile (``--profile``): samples
sorted into the parts of its work by their stacks, and the CPU a process used. The
benchmark itself runs on the real control plane (``tests/realcluster/test_real_bench.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

from hack.bench.scheduling import cpu_seconds, parts

FILTER = "run (coordinator/extender/handling.py:51);filter_nodes (coordinator/extender/kube.py:77)"
REPORT = "handle_report (coordinator/ingest.py:91);ingest (coordinator/ingest.py:110)"
LOOP = "_run_once (uvloop);data_received (aiohttp/web_protocol.py:390)"
WATCH = "_run (coordinator/kube/watches.py:120);read (json/decoder.py:1)"


def test_each_sample_counts_once_for_the_first_part_its_stack_holds(tmp_path: Path) -> None:
    samples = tmp_path / "coordinator.txt"
    samples.write_text(
        f"MainThread (1);{LOOP};{FILTER} 60\n"
        f"MainThread (1);{LOOP};{REPORT} 25\n"
        f"MainThread (1);{LOOP} 10\n"
        f"watch-pods (2);{WATCH} 5\n"
    )
    assert parts(samples) == {"filter": 60.0, "reports": 25.0, "server": 10.0, "watches": 5.0}


def test_the_cpu_a_process_used_is_read_from_its_stat(tmp_path: Path) -> None:
    with cpu_seconds(os.getpid()) as used:
        deadline = os.times().user + 0.2
        while os.times().user < deadline:  # burn 0.2 s of user CPU
            pass
    assert 0.15 <= used[0] < 5
