"""Kubernetes manifests (Pod, Job, PyTorchJob, MPIJob, JobSet … any object with containers) and Docker Compose
files, composed once: the env of each container (`env`), its pod and the jobs it starts (`pods`). A YAML file that
is neither (a training config) is read only for its parse errors."""

from __future__ import annotations

import re
from pathlib import Path

from gpudoctor.readers.env import NO_ENV
from gpudoctor.readers.file_facts import FileFacts

YAML_SUFFIXES = {".yaml", ".yml"}
MANIFEST_KEY = re.compile(r"(?m)^\s*(?:-\s+)?(?:apiVersion|kind|services|env|containers)\s*:")


def detect(path: Path, text: str) -> bool:
    return path.suffix.lower() in YAML_SUFFIXES and bool(MANIFEST_KEY.search(text))


def is_yaml(path: Path, text: str = "") -> bool:
    return path.suffix.lower() in YAML_SUFFIXES


def read(path: Path, text: str) -> FileFacts:
    """Composed once, walked once: the env reader and the pod reader take what they need from the same walk (the
    env reader first at each node, so a container's script is walked once, in its env scope)."""
    from gpudoctor.readers.k8s import env, nodes, pods
    from gpudoctor.readers.k8s.scripts import Scripts

    documents, error = nodes.compose(text)
    if error is not None and nodes.TEMPLATE.search(text):
        rendered, still = nodes.compose_template(text)
        if still is None:
            documents, error = rendered, None
    scripts = Scripts(str(path))
    found, manifest = env.EnvReader(text, str(path), scripts, nodes.config_maps(documents)), \
        pods.PodReader(str(path), scripts)
    stopped = nodes.walk(documents, [found, manifest])
    found.parse_error(error or stopped)  # the pod reader keeps what it found before
    return FileFacts(env=found.result, jobs=manifest.jobs, pods=manifest.pods)


def read_config(path: Path, text: str) -> FileFacts:
    """A YAML config (NeMo/Hydra, …): its parse errors, or a note that it sets no environment."""
    from gpudoctor.readers.k8s import env

    result = env.read(text, str(path))
    return FileFacts(env=result, note=None if result.errors else NO_ENV)
