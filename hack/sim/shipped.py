"""Where the openb files shipped with the simulator are: paths only, so that the ``stowage``
parser can name them as defaults without importing numpy or the engine."""

from __future__ import annotations

from pathlib import Path
from typing import Final

OPENB: Final = Path(__file__).resolve().parent / "traces" / "openb"
"""``traces/openb/`` beside this module (source, terms and citation in its ``SOURCE.md``):
the GPU node list and the default pod list, what a run without ``--nodes``/``--pods``/
``--trace`` replays. The trace's other workloads are not shipped; they are a ``--pods`` or
``--trace DIR`` away."""
OPENB_GPU_NODES: Final = "openb_node_list_gpu_node.csv"
"""The trace's GPU nodes, in :data:`OPENB`: every workload of the trace runs on them."""
DEFAULT_NODES: Final = OPENB / OPENB_GPU_NODES
DEFAULT_PODS: Final = OPENB / "openb_pod_list_default.csv"
