"""The scoring engine: one policy interface, one registry, one engine for the extender and the simulator."""
