"""``make run``: the demo (see :mod:`hack.demo.main`)."""
