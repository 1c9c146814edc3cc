"""Cluster state as columnar numpy arrays, one row per node."""
