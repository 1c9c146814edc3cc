"""The coordinator: cluster state, the scoring engine and (next) its HTTP and Kubernetes sides."""
