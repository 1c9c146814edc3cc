"""The real Kubernetes control plane Stowage is tested against, built from source.

``build`` compiles kube-apiserver, kube-controller-manager, kube-scheduler (one release of
``k8s.io/kubernetes``), etcd and kwok from the Go modules in this directory into a cache;
``controlplane`` runs them on 127.0.0.1 in a throwaway directory. ``python -m hack.cluster``
does both from the command line.
"""
