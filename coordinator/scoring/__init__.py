"""The scoring engine: one policy interface, one registry, one engine — the same code for
the scheduler extender and the trace simulator."""
