"""Reading node and pod lists: good files become engine types, bad ones a TraceError that
says which file, line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.state.cluster import NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.sim import trace
from hack.sim.trace import TraceError
from tests.sim.simfiles import NODE_HEADER, OPENB, POD_HEADER, need, write_csv

MIB = 1_048_576


def pods_file(tmp_path: Path, *rows: tuple[object, ...], header=POD_HEADER) -> Path:
    return write_csv(tmp_path / "pods.csv", header, rows)


def nodes_file(tmp_path: Path, *rows: tuple[object, ...], header=NODE_HEADER) -> Path:
    return write_csv(tmp_path / "nodes.csv", header, rows)


# ------------------------------------------------------------------ good files


def test_nodes_become_node_specs(tmp_path):
    path = nodes_file(
        tmp_path,
        ("n-a", 96000, 393216, 8, "G2"),
        ("n-b", 32000, 1024, 0, ""),
        ("n-c", 8000, 1, 1, "T4"),
    )
    assert trace.load_nodes(path) == [
        NodeSpec("n-a", 96000, 412316860416, 8, "G2"),
        NodeSpec("n-b", 32000, 1073741824, 0, ""),
        NodeSpec("n-c", 8000, MIB, 1, "T4"),
    ]


def test_pods_become_requests_with_their_gpu_spec(tmp_path):
    path = pods_file(
        tmp_path,
        ("p0", 3152, 5600, 1, 810, ""),
        ("p1", 12000, 0, 1, 1000, "V100M16|V100M32"),
        ("p2", 1000, 2, 8, 1000, "G2"),
        ("p3", 500, 3, 0, 0, ""),
        ("p4", 500, 4, 1, 300, "|T4|"),
    )
    assert trace.load_pods(path) == [
        PodRequest("p0", 3152, 5600 * MIB, 1, 810, frozenset()),
        PodRequest("p1", 12000, 0, 1, 1000, frozenset({"V100M16", "V100M32"})),
        PodRequest("p2", 1000, 2 * MIB, 8, 1000, frozenset({"G2"})),
        PodRequest("p3", 500, 3 * MIB, 0, 0, frozenset()),
        PodRequest("p4", 500, 4 * MIB, 1, 300, frozenset({"T4"})),
    ]


def test_pod_list_without_gpu_spec_column_means_any_model(tmp_path):
    path = pods_file(tmp_path, ("p0", 1000, 1, 2, 1000), header=POD_HEADER[:5])
    assert trace.load_pods(path)[0].gpu_models == frozenset()


def test_extra_columns_are_ignored(tmp_path):
    header = (*POD_HEADER, "qos", "pod_phase")
    path = pods_file(tmp_path, ("p0", 1000, 1, 1, 500, "", "LS", "Running"), header=header)
    assert trace.load_pods(path) == [PodRequest("p0", 1000, MIB, 1, 500)]


@pytest.mark.parametrize(
    ("num_gpu", "gpu_milli", "expected"),
    [
        (1, 1500, 1000),  # above a whole GPU: clamped to 1000
        (2, 1000, 1000),
        (1, 1, 1),
        (0, 500, 0),  # CPU-only: gpu_milli plays no part
        (0, -5, 0),  # clamped to 0, and irrelevant anyway
    ],
)
def test_gpu_milli_is_clamped_to_a_whole_gpu(tmp_path, num_gpu, gpu_milli, expected):
    path = pods_file(tmp_path, ("p0", 1000, 1, num_gpu, gpu_milli, ""))
    (pod,) = trace.load_pods(path)
    assert (pod.gpus, pod.gpu_milli) == (num_gpu, expected)


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    path = tmp_path / "pods.csv"
    path.write_text("\ufeff" + ",".join(POD_HEADER) + "\np0,1000,1,0,0,\n", encoding="utf-8")
    assert [p.name for p in trace.load_pods(path)] == ["p0"]


# ------------------------------------------------------------------- bad files


def test_missing_pod_columns_are_named(tmp_path):
    path = pods_file(tmp_path, ("p0", 1000, 1), header=("name", "cpu_milli", "memory_mib"))
    with pytest.raises(TraceError) as e:
        trace.load_pods(path)
    assert str(e.value) == f"{path}: missing column(s) num_gpu, gpu_milli"


def test_missing_node_column_is_named(tmp_path):
    path = nodes_file(tmp_path, ("n0", 1000, 1, 1), header=NODE_HEADER[:4])
    with pytest.raises(TraceError) as e:
        trace.load_nodes(path)
    assert str(e.value) == f"{path}: missing column(s) model"


@pytest.mark.parametrize("column", ["cpu_milli", "memory_mib", "num_gpu", "gpu_milli"])
@pytest.mark.parametrize("value", ["1.5", "abc", "", "1e3"])
def test_non_integer_pod_value_names_file_line_and_column(tmp_path, column, value):
    good = {"name": "p", "cpu_milli": "1000", "memory_mib": "1", "num_gpu": "0", "gpu_milli": "0"}
    bad = {**good, column: value}
    path = pods_file(
        tmp_path,
        tuple(good[c] for c in POD_HEADER[:5]),
        tuple(bad[c] for c in POD_HEADER[:5]),
        header=POD_HEADER[:5],
    )
    with pytest.raises(TraceError) as e:
        trace.load_pods(path)
    assert str(e.value) == f"{path}:3: {column} {value!r} is not an integer"


@pytest.mark.parametrize("column", ["cpu_milli", "memory_mib", "gpu"])
def test_non_integer_node_value_names_file_line_and_column(tmp_path, column):
    good = {"sn": "n", "cpu_milli": "1000", "memory_mib": "1", "gpu": "1", "model": "T4"}
    path = nodes_file(tmp_path, tuple({**good, column: "x1"}[c] for c in NODE_HEADER))
    with pytest.raises(TraceError) as e:
        trace.load_nodes(path)
    assert str(e.value) == f"{path}:2: {column} 'x1' is not an integer"


@pytest.mark.parametrize("column", ["cpu_milli", "memory_mib", "num_gpu"])
def test_negative_pod_value_is_refused(tmp_path, column):
    good = {"name": "p", "cpu_milli": "1000", "memory_mib": "1", "num_gpu": "1", "gpu_milli": "500"}
    path = pods_file(
        tmp_path, tuple({**good, column: "-1"}[c] for c in POD_HEADER[:5]), header=POD_HEADER[:5]
    )
    with pytest.raises(TraceError) as e:
        trace.load_pods(path)
    assert str(e.value) == f"{path}:2: {column} -1 is negative"


@pytest.mark.parametrize("column", ["cpu_milli", "memory_mib", "gpu"])
def test_negative_node_value_is_refused(tmp_path, column):
    good = {"sn": "n", "cpu_milli": "1000", "memory_mib": "1", "gpu": "1", "model": "T4"}
    path = nodes_file(tmp_path, tuple({**good, column: "-2"}[c] for c in NODE_HEADER))
    with pytest.raises(TraceError) as e:
        trace.load_nodes(path)
    assert str(e.value) == f"{path}:2: {column} -2 is negative"


@pytest.mark.parametrize("gpu_milli", [0, -5])
def test_gpu_pod_with_no_gpu_milli_is_refused(tmp_path, gpu_milli):
    path = pods_file(tmp_path, ("p0", 1000, 1, 2, gpu_milli, ""))
    with pytest.raises(TraceError) as e:
        trace.load_pods(path)
    assert str(e.value) == f"{path}:2: num_gpu 2 with gpu_milli 0"


def test_line_numbers_count_blank_lines(tmp_path):
    path = tmp_path / "pods.csv"
    path.write_text(",".join(POD_HEADER) + "\np0,1,1,0,0,\n\n\np1,x,1,0,0,\n")
    with pytest.raises(TraceError) as e:
        trace.load_pods(path)
    assert str(e.value) == f"{path}:5: cpu_milli 'x' is not an integer"


@pytest.mark.parametrize("loader", [trace.load_pods, trace.load_nodes])
def test_header_only_is_an_empty_list(tmp_path, loader):
    header = POD_HEADER if loader is trace.load_pods else NODE_HEADER
    path = write_csv(tmp_path / "empty.csv", header, [])
    with pytest.raises(TraceError) as e:
        loader(path)
    assert str(e.value) == f"{path}: no rows"


def test_an_empty_file_lacks_every_column(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("")
    with pytest.raises(TraceError) as e:
        trace.load_nodes(path)
    assert str(e.value) == f"{path}: missing column(s) sn, cpu_milli, memory_mib, gpu, model"


def test_duplicate_node_names_are_refused(tmp_path):
    path = nodes_file(tmp_path, ("n0", 1000, 1, 1, "T4"), ("n0", 2000, 1, 1, "T4"))
    with pytest.raises(TraceError, match="node names are not unique"):
        trace.load_nodes(path)


def test_a_missing_file_is_named(tmp_path):
    path = tmp_path / "nowhere.csv"
    with pytest.raises(TraceError) as e:
        trace.load_pods(path)
    assert str(e.value) == f"{path}: No such file or directory"


def test_a_directory_is_not_a_list(tmp_path):
    with pytest.raises(TraceError) as e:
        trace.load_nodes(tmp_path)
    assert str(e.value) == f"{tmp_path}: Is a directory"


def test_a_binary_file_is_not_a_list(tmp_path):
    path = tmp_path / "pods.csv"
    path.write_bytes(b"name,cpu_milli\n\xff\xfe\x00\x81garbage\n")
    with pytest.raises(TraceError) as e:
        trace.load_pods(path)
    assert str(e.value).startswith(f"{path}: not a text file (")


def test_a_malformed_csv_row_names_its_line(tmp_path):
    path = tmp_path / "pods.csv"
    path.write_text(",".join(POD_HEADER) + "\np0,1,1,0,0,\n" + "y" * 200_000 + ",1,1,0,0,\n")
    with pytest.raises(TraceError) as e:
        trace.load_pods(path)
    assert str(e.value).startswith(f"{path}:3: field larger than field limit")


# ------------------------------------------------------------ the shared trace


def test_the_shared_node_list_is_the_papers_cluster():
    nodes = trace.load_nodes(need(OPENB / "openb_node_list_gpu_node.csv"))
    # 1213 nodes, 6212 GPUs, 107,018 cores (benchmark protocol §1.2)
    assert (len(nodes), sum(n.gpus for n in nodes), sum(n.cpu_m for n in nodes)) == (
        1213,
        6212,
        107_018_000,
    )
    assert nodes[0] == NodeSpec("openb-node-0000", 64000, 262144 * MIB, 2, "P100")


@pytest.mark.parametrize(
    ("workload", "pods", "cpu_only", "gpu_milli"),
    [("default", 8152, 1088, 6_086_800), ("multigpu20", 8324, 1088, 7_086_800)],
)
def test_the_shared_pod_lists_load(workload, pods, cpu_only, gpu_milli):
    loaded = trace.load_pods(need(OPENB / f"openb_pod_list_{workload}.csv"))
    assert len(loaded) == pods
    assert sum(1 for p in loaded if not p.gpus) == cpu_only
    assert sum(p.gpu_total_milli for p in loaded) == gpu_milli
    assert not any(p.gpu_models for p in loaded)
