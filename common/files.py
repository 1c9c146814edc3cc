"""Reading a file that must be a plain, bounded file — never a pipe, a device or endless.

Kernel files, settings files, kubelet's configuration and token files are all expected to
be regular files of modest size. Anything else in their place must fail at once rather
than hang or exhaust memory: a FIFO blocks ``open`` until a writer appears and then
``read`` until it writes, ``/dev/zero`` never ends, a multi-gigabyte file ends in
MemoryError. :func:`read_regular` therefore

* opens with ``O_NONBLOCK``, so opening a FIFO (or a device that waits for a carrier)
  returns at once instead of waiting for a writer;
* refuses anything whose ``fstat`` is not a regular file — checked on the opened
  descriptor, so a path swapped between a check and the open cannot slip through;
* reads at most ``max_bytes`` (and one byte more, to know it is too large): procfs,
  sysfs and cgroupfs files report ``st_size`` 0 or 4096 whatever their content (it is
  generated on read), so the limit is enforced while reading, never from ``st_size``.

Every failure is an :class:`OSError` with ``strerror`` saying what was wrong, so callers
keep one ``except OSError`` and one message format.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_CHUNK = 65536

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def read_regular(path: Path | str, max_bytes: int) -> bytes:
    """The whole content of the regular file at ``path``, at most ``max_bytes`` of it.

    Raises OSError (``FileNotFoundError`` and friends as the OS reports them, or
    ``EINVAL`` "not a regular file …", or ``EFBIG`` "larger than … bytes").
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "a special file")
            raise OSError(errno.EINVAL, f"not a regular file ({kind})", str(path))
        chunks = []
        total = 0
        # One byte over the limit is enough to know the file is too large.
        while chunk := os.read(fd, min(_CHUNK, max_bytes + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise OSError(errno.EFBIG, f"larger than {max_bytes} bytes", str(path))
        return b"".join(chunks)
    finally:
        os.close(fd)
