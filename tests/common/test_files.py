"""``read_regular`` on this machine's real kernel files and on what may replace them."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from common.files import read_regular

MIB = 2**20


def _read_in_thread(path: Path, max_bytes: int) -> bytes | BaseException:
    """Run the read in a daemon thread so a read that blocks fails this test instead of
    hanging the run; the 30 s wait only bounds a broken guard, it is never the outcome."""
    outcome: list[bytes | BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            outcome.append(read_regular(path, max_bytes))
        except BaseException as e:
            outcome.append(e)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(30), f"reading {path} blocked"
    return outcome[0]


def _a_cgroup_file() -> Path:
    """A file of this machine's cgroup mount: cgroup v2's root files or a v1 controller's."""
    root = Path("/sys/fs/cgroup")
    for candidate in (
        root / "cgroup.controllers",
        root / "memory" / "memory.limit_in_bytes",
        root / "cpu" / "cpu.shares",
        root / "unified" / "cgroup.controllers",
    ):
        if candidate.is_file():
            return candidate
    pytest.skip("no cgroup file found under /sys/fs/cgroup (needs a cgroup mount)")


@pytest.mark.parametrize(
    "path",
    [
        Path("/proc/meminfo"),  # procfs: st_size 0, content generated on read
        Path("/proc/self/status"),
        Path("/sys/devices/system/cpu/online"),  # sysfs: st_size 4096 whatever the content
        "cgroup",
    ],
)
def test_real_kernel_files_read_whole(path):
    path = _a_cgroup_file() if path == "cgroup" else path
    expected = path.read_bytes()
    data = read_regular(path, 8 * MIB)
    if path.name == "status":  # per-process counters move between two reads
        assert data.splitlines()[0] == expected.splitlines()[0]
    else:
        assert data == expected
    assert data.endswith(b"\n")


def test_a_fifo_is_refused_at_once_even_without_a_writer(tmp_path):
    fifo = tmp_path / "meminfo"
    os.mkfifo(fifo)
    error = _read_in_thread(fifo, MIB)
    assert isinstance(error, OSError) and error.errno == errno.EINVAL
    assert error.strerror == "not a regular file (a FIFO)"
    assert error.filename == str(fifo)


def test_an_endless_device_behind_a_symlink_is_refused(tmp_path):
    link = tmp_path / "zoneinfo"
    link.symlink_to("/dev/zero")
    error = _read_in_thread(link, MIB)
    assert (
        isinstance(error, OSError) and error.strerror == "not a regular file (a character device)"
    )


def test_a_directory_is_refused(tmp_path):
    error = _read_in_thread(tmp_path, MIB)
    assert isinstance(error, OSError) and error.strerror == "not a regular file (a directory)"


def test_a_file_over_the_limit_is_refused_not_read_whole(tmp_path):
    huge = tmp_path / "stat"
    with huge.open("wb") as f:
        f.truncate(16 * MIB)  # sparse: no disk used
    error = _read_in_thread(huge, MIB)
    assert isinstance(error, OSError) and error.errno == errno.EFBIG
    assert error.strerror == f"larger than {MIB} bytes"


def test_the_limit_holds_for_kernel_files_whose_size_reads_zero():
    """procfs says 0 bytes: only counting while reading catches an oversized one."""
    assert os.stat("/proc/meminfo").st_size == 0
    error = _read_in_thread(Path("/proc/meminfo"), 100)
    assert isinstance(error, OSError) and error.errno == errno.EFBIG


def test_exactly_the_limit_is_fine(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000)
    assert read_regular(path, 1000) == b"x" * 1000
    with pytest.raises(OSError, match="larger than 999 bytes"):
        read_regular(path, 999)


def test_a_missing_file_is_the_os_error():
    with pytest.raises(FileNotFoundError):
        read_regular("/proc/no-such-file", MIB)
