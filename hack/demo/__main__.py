"""``python -m hack.demo`` (what ``make run`` starts).

SIGTERM (``timeout``, ``kill``) stops it as Ctrl-C does: the coordinator and the agent it
started are stopped on the way out, not left running without it."""

import signal
import sys

from hack.demo.main import main


def _as_ctrl_c(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _as_ctrl_c)
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # while the trace was read: nothing was started yet
        print("stopped", file=sys.stderr)
        sys.exit(130)
