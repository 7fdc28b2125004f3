"""deploy/kubernetes/: the initContainer manifests parse, have the structure that makes the check meaningful (same
image, GPUs, /dev/shm and env as the trainer), pass `gpudoctor lint`, and their command works as written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES, ROOT, cli_in_process, gpudoctor_cmd

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
    result = cli_in_process("lint", "--format", "json", *MANIFESTS)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["findings"] == [] and report["summary"]["error"] == 0


def test_lint_reads_the_manifest_env(tmp_path):
    """Not blind: the same manifest with NCCL_DEBUG=INFO is reported, with the line."""
    bad = tmp_path / "pod.yaml"
    bad.write_text((K8S / "pod.yaml").read_text().replace("value: WARN", "value: INFO"))
    result = cli_in_process("lint", "--format", "json", bad)
    findings = json.loads(result.stdout)["findings"]
    assert findings and {f["rule"] for f in findings} == {"GD406"}  # once per container that gets the env
    line = bad.read_text().splitlines().index("    - name: NCCL_DEBUG") + 1
    assert {f["location"]["line"] for f in findings} == {line}


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


# --- what the manifests do, checked without a cluster --------------------------------------------------------------

NODE_CHECK = K8S / "node-check.yaml"


def _as_pods(path: Path):
    """Every Pod a manifest makes, as the API server would receive it: a Pod as written; a PyTorchJob replica's
    template with the pod restartPolicy training-operator sets (ExitCode becomes Never, pkg/core/pod.go)."""
    for doc in yaml.safe_load_all(path.read_text()):
        if doc["kind"] == "PyTorchJob":
            for kind, replica in doc["spec"]["pytorchReplicaSpecs"].items():
                template = replica["template"]
                policy = replica.get("restartPolicy", "Never")
                spec = dict(template["spec"], restartPolicy="Never" if policy == "ExitCode" else policy)
                yield {"apiVersion": "v1", "kind": "Pod", "spec": spec,
                       "metadata": dict(template.get("metadata") or {}, name=f"{doc['metadata']['name']}-{kind}")}
        else:
            yield doc


@pytest.mark.parametrize("path", MANIFESTS + [NODE_CHECK], ids=lambda p: p.name)
def test_manifests_are_valid_kubernetes_objects(path):
    """Strict schema validation against the Kubernetes API (kubernetes-validate): unknown fields, wrong types and
    missing required fields are errors. A PyTorchJob (a CRD the schemas lack) is checked through its pod templates."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="pip install -e '.[test]'")
    version = kubernetes_validate.utils.latest_version()
    documents = list(_as_pods(path))
    assert documents
    for document in documents:
        kubernetes_validate.validate(document, version, strict=True)  # raises on any schema error


def test_the_validator_is_not_blind():
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="pip install -e '.[test]'")
    (pod,) = _as_pods(K8S / "pod.yaml")
    pod["spec"]["initContainers"][0]["restartPolicy"] = "Sometimes"
    pod["spec"]["containers"][0]["resource"] = {}  # a typo for resources
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, kubernetes_validate.utils.latest_version(), strict=True)


def test_a_failed_check_fails_the_pytorchjob_instead_of_looping_on_the_node():
    """restartPolicy ExitCode: the operator gives the pods restartPolicy Never (a failed init container fails the
    pod) and treats the exit code of a trainer that never ran as permanent, so the job fails at once. OnFailure would
    keep the pod in Init:CrashLoopBackOff on the bad node while the other replicas wait at the rendezvous."""
    (job,) = yaml.safe_load_all((K8S / "pytorchjob.yaml").read_text())
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        assert replica["restartPolicy"] == "ExitCode"
        assert "restartPolicy" not in replica["template"]["spec"]  # the operator overwrites it anyway
    for pod in _as_pods(K8S / "pytorchjob.yaml"):
        assert pod["spec"]["restartPolicy"] == "Never"


def _node_check_script():
    (daemonset,) = [d for d in yaml.safe_load_all(NODE_CHECK.read_text()) if d["kind"] == "DaemonSet"]
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    assert container["command"][:2] == ["/bin/sh", "-c"]
    env = {item["name"]: item["value"] for item in container["env"] if "value" in item}
    return container["command"][2], env


def test_node_check_script_is_shellcheck_clean(tmp_path):
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (apt-get install shellcheck)")
    script, _ = _node_check_script()
    path = tmp_path / "node-check.sh"
    path.write_text(script)
    result = subprocess.run(["shellcheck", "-s", "sh", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("case", ["bad", "healthy", "usage-error"])
def test_node_check_taints_a_bad_node_only(tmp_path, case):
    """The DaemonSet's own script, run once (GPUDOCTOR_INTERVAL=0) on recorded machines with a stand-in kubectl that
    records its arguments: exit 1 labels, annotates and taints the node with the worst rule; exit 0 labels it ok;
    a usage error (exit 2) leaves the node alone, as the SLURM Prolog does."""
    script, env = _node_check_script()
    calls = tmp_path / "kubectl.calls"
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> {calls}\necho >> {calls}\n')
    kubectl.chmod(0o755)
    machine = {"bad": FIXTURES / "machines" / "k8s-pod-a100x8.json", "healthy": FIXTURES / "machines" /
               "h100x8-healthy.json", "usage-error": tmp_path / "missing.json"}[case]
    env.update(GPUDOCTOR=" ".join(gpudoctor_cmd()), GPUDOCTOR_ARGS=f"--snapshot {machine}", GPUDOCTOR_INTERVAL="0",
               NODE_NAME="gpu-node-7", KUBECTL=str(kubectl), TMPDIR=str(tmp_path))
    result = subprocess.run(["/bin/sh", "-c", script], env=dict(os.environ, **env), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    lines = calls.read_text().splitlines() if calls.exists() else []
    if case == "bad":
        assert lines[0] == "label|node|gpu-node-7|gpudoctor.io/health=bad|--overwrite|"
        assert lines[1].startswith("annotate|node|gpu-node-7|gpudoctor.io/reason=GD506: GPU 3 (NVIDIA A100")
        assert lines[2] == "taint|node|gpu-node-7|gpudoctor.io/unhealthy=GD506:NoSchedule|--overwrite|"
    elif case == "healthy":
        assert lines == ["label|node|gpu-node-7|gpudoctor.io/health=ok|--overwrite|"]
    else:
        assert lines == [] and "node not judged" in result.stderr


# --- preflight.yaml: every pod of an indexed Job tests the allocation together before training -------------------

PREFLIGHT = K8S / "preflight.yaml"


def _preflight_job():
    docs = {doc["kind"]: doc for doc in yaml.safe_load_all(PREFLIGHT.read_text())}
    return docs["Service"], docs["Job"]


def _expanded(args, env):
    """Kubernetes' `$(VAR)` expansion of a container's args from its env (and the Job's completion index)."""
    import re

    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), arg) for arg in args]


def test_preflight_manifest_is_valid_and_gives_the_init_container_what_the_trainer_gets():
    service, job = _preflight_job()
    spec = job["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    (main,) = spec["containers"]
    assert init["image"] == main["image"] and init["resources"] == main["resources"] and init["env"] == main["env"]
    assert init["volumeMounts"] == main["volumeMounts"]
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["backoffLimit"] == 0
    assert spec["restartPolicy"] == "Never" and spec["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {"job-name": job["metadata"]["name"]}
    node_name = [item for item in init["env"] if item["name"] == "NODE_NAME"]
    assert node_name == [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="pip install -e '.[test]'")
    for document in (service, job):
        kubernetes_validate.validate(document, kubernetes_validate.utils.latest_version(), strict=True)


def test_preflight_command_works_as_written():
    """The init container's args, expanded as kubelet expands them on pod 2: torchrun's own parser reads them (one
    node of NNODES, its rank the completion index, the head pod's store on a port the trainer does not use), and
    gpudoctor's parser reads what torchrun runs."""
    run = pytest.importorskip("torch.distributed.run")
    from gpudoctor.cli import build_parser

    _, job = _preflight_job()
    spec = job["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    env = {item["name"]: item["value"] for item in init["env"] if "value" in item}
    env["JOB_COMPLETION_INDEX"] = "2"
    assert init["command"] == ["torchrun"]
    args = run.get_args_parser().parse_args(_expanded(init["args"], env))
    assert (args.nnodes, args.node_rank, args.nproc_per_node) == ("4", 2, "8")
    assert args.nnodes == str(job["spec"]["completions"]) and args.master_addr == "llama-sft-0.llama-sft"
    trainer = run.get_args_parser().parse_args(_expanded(spec["containers"][0]["args"], env))
    assert args.master_port != trainer.master_port
    assert args.module and args.training_script == "gpudoctor" and args.training_script_args[0] == "preflight"
    parsed = build_parser().parse_args(args.training_script_args)
    assert parsed.command == "preflight" and parsed.format == "json" and parsed.budget == 60


def test_preflight_manifest_lints_clean():
    result = cli_in_process("lint", "--format", "json", PREFLIGHT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["findings"] == []
