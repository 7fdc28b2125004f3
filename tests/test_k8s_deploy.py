"""deploy/kubernetes/: the initContainer manifests parse, have the structure that makes the check meaningful (same
image, GPUs, /dev/shm and env as the trainer), pass `gpudoctor lint`, and their command works as written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES, ROOT, gpudoctor_cmd

K8S = ROOT / "deploy" / "kubernetes"
MANIFESTS = [K8S / "pod.yaml", K8S / "pytorchjob.yaml"]
COMMAND = ["gpudoctor", "check", "--format", "json", "--fail-on", "error"]


def pod_specs(path: Path):
    specs = []
    for doc in yaml.safe_load_all(path.read_text()):
        if doc["kind"] == "Pod":
            specs.append(doc["spec"])
        elif doc["kind"] == "PyTorchJob":
            specs += [replica["template"]["spec"] for replica in doc["spec"]["pytorchReplicaSpecs"].values()]
    assert specs, path
    return specs


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_init_container_gets_what_the_trainer_gets(path):
    for spec in pod_specs(path):
        (init,) = spec["initContainers"]
        (main,) = spec["containers"]
        assert init["name"] == "gpudoctor"
        assert init["command"] == COMMAND
        assert init["image"] == main["image"]
        assert init["resources"] == main["resources"] and init["resources"]["limits"]["nvidia.com/gpu"] >= 1
        assert init["env"] == main["env"]
        shm = {m["name"] for m in init["volumeMounts"] if m["mountPath"] == "/dev/shm"}
        assert shm and shm == {m["name"] for m in main["volumeMounts"] if m["mountPath"] == "/dev/shm"}
        (volume,) = [v for v in spec["volumes"] if v["name"] in shm]
        assert volume["emptyDir"]["medium"] == "Memory"


def test_lint_reports_nothing():
    result = subprocess.run(gpudoctor_cmd() + ["lint", "--format", "json", *map(str, MANIFESTS)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["findings"] == [] and report["summary"]["error"] == 0


def test_lint_reads_the_manifest_env(tmp_path):
    """Not blind: the same manifest with NCCL_DEBUG=INFO is reported, with the line."""
    bad = tmp_path / "pod.yaml"
    bad.write_text((K8S / "pod.yaml").read_text().replace("value: WARN", "value: INFO"))
    result = subprocess.run(gpudoctor_cmd() + ["lint", "--format", "json", str(bad)],
                            capture_output=True, text=True, timeout=60)
    findings = json.loads(result.stdout)["findings"]
    assert findings and {f["rule"] for f in findings} == {"GD406"}  # once per container that gets the env
    assert {f["location"]["line"] for f in findings} == {bad.read_text().splitlines().index("    - name: NCCL_DEBUG") + 1}


def _init_command(args, path=MANIFESTS[0]):
    (spec,) = pod_specs(path)
    command = spec["initContainers"][0]["command"]
    env = {item["name"]: item["value"] for item in spec["initContainers"][0]["env"]}
    return gpudoctor_cmd() + command[1:] + args, env


@pytest.mark.parametrize("machine, code, errors", [
    ("h100x8-healthy.json", 0, []),
    ("k8s-pod-a100x8.json", 1, ["GD503", "GD506"]),  # 64 MiB /dev/shm, uncorrectable ECC on GPU 3
])
def test_the_init_command_fails_the_pod_on_a_bad_node(machine, code, errors):
    """The manifest's command, as written (on a recorded machine, since this one has no GPU): exit 1 fails the
    init container; stdout is the JSON report `kubectl logs -c gpudoctor` shows."""
    argv, env = _init_command(["--snapshot", str(FIXTURES / "machines" / machine)])
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=dict(os.environ, **env))
    assert result.returncode == code, result.stderr
    report = json.loads(result.stdout)
    assert report["schema"] == "gpudoctor.report/1"
    assert sorted(f["rule"] for f in report["findings"] if f["severity"] == "error") == errors
