"""The trace simulator: replays a pod trace against a node list with any policy."""
