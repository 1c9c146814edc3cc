"""Placement policies, one module each; registered in :mod:`coordinator.scoring.registry`."""
