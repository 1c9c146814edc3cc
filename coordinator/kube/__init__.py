"""The coordinator's Kubernetes side: client, watches, leader election, publisher."""
