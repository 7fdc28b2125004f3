"""Kubernetes manifests and Docker Compose files: the env of each container, its pod and the job it starts."""
