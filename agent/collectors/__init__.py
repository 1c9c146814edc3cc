"""Collectors: one module per signal; the registry of them is :mod:`agent.registry`."""
