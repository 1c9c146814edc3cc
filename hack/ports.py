"""Free TCP ports on 127.0.0.1 for the servers the tools and tests start."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on right now (the kernel's pick). Another process may take it
    before the caller binds it; every caller here starts its server at once and fails loudly
    if it is taken."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        return int(s.getsockname()[1])
