"""kube-scheduler's default filter plugins, one module per family, each mirroring the
upstream plugin its docstring names (``pkg/scheduler/framework/plugins/...``)."""
