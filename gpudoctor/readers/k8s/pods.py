"""Jobs and pods in Kubernetes manifests (Pod, Job, Deployment, StatefulSet, PyTorchJob, MPIJob, JobSet …) and
Docker Compose files.

Every container of every pod template (found wherever a `containers:` list is, so custom resources work too)
becomes a `pods` entry: the GPUs it asks for (`nvidia.com/gpu`, limits or requests), `/dev/shm` (a volume mounted
there: `emptyDir` with `medium: Memory`, or the host's `/dev/shm`), `hostIPC`, EFA (`vpc.amazonaws.com/efa`) and
RDMA device requests (`rdma/*`, `mellanox.com/*`), `IPC_LOCK` (or `privileged`), and the EFA settings in its env
(`FI_PROVIDER=efa`, `FI_EFA_*`, the aws-ofi-nccl plugin). A container whose `command`/`args` start a Python script
also becomes a job; in a PyTorchJob the training operator sets RANK/WORLD_SIZE/MASTER_ADDR for one process per pod,
and in an MPIJob `mpirun` starts `slotsPerWorker` ranks on each worker pod.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

import yaml

from gpudoctor.readers import commands
from gpudoctor.readers.k8s import nodes
from gpudoctor.readers.k8s.nodes import line, scalar
from gpudoctor.readers.k8s.scripts import Scripts, script_node
from gpudoctor.readers.launch import finish_job

GPU = "nvidia.com/gpu"
EFA = "vpc.amazonaws.com/efa"
RDMA_PREFIXES = ("rdma/", "mellanox.com/", "nvidia.com/hostdev", "nvidia.com/rdma")
ROLES = ("Master", "Worker", "Launcher", "Chief", "Head")
MAX_DEPTH = 40  # a pod template deeper than this is not one
OPERATORS = {"PyTorchJob": "pytorchjob", "MPIJob": "mpijob"}  # the PodReader method for what each operator adds


def _map(node) -> dict:
    return {key: value for key, (_, value) in nodes.mapping(node).items()}


def _count(node) -> Optional[int]:
    text = scalar(node)
    return int(text) if text is not None and re.fullmatch(r"\d+", text.strip()) else None


class PodReader(nodes.Collector):
    """The pods and jobs of every pod template, collected from the file's one walk (nodes.walk): a pod once the
    walk has left it, so its containers' scripts are already walked in their env scope."""

    def __init__(self, path: str, scripts: Optional[Scripts] = None):
        self.path = path
        self.scripts = scripts or Scripts(path)
        self.jobs: List[dict] = []
        self.pods: List[dict] = []
        self.label, self.first = "", (0, 0)
        self.extra: Dict[str, Any] = {}

    def document(self, index: int, top: dict, kind: Optional[str], label: str) -> None:
        spec = _map(top["spec"][1]) if "spec" in top else {}
        self.label, self.first = label, (len(self.pods), len(self.jobs))
        self.extra = {"kind": kind, "nproc_per_node": spec.get("nprocPerNode"), "slots": spec.get("slotsPerWorker")}

    def leave(self, node, fields: dict, trail: List[str], depth: int) -> None:
        containers = fields["containers"][1] if "containers" in fields else None
        if isinstance(containers, yaml.SequenceNode) and depth <= MAX_DEPTH \
                and not any(part in ("containers", "initContainers") for part in trail):
            self.pod(_map(node), self.label, trail, self.extra)

    def done(self) -> None:
        if self.extra.get("kind") == "MPIJob":  # mpirun runs in the launcher pod; its ranks land on the worker pods
            first_pod, first_job = self.first
            workers = [p for p in self.pods[first_pod:] if p["role"] == "Worker"]
            for job in self.jobs[first_job:]:
                job["gpus"] = workers[-1]["gpus"] if workers else None

    def pod(self, spec: dict, label: str, trail: List[str], extra: dict) -> None:
        role = next((part for part in reversed(trail) if part in ROLES), "")
        volumes = {}
        if isinstance(spec.get("volumes"), yaml.SequenceNode):
            for volume in spec["volumes"].value:
                fields = _map(volume)
                if scalar(fields.get("name")):
                    volumes[scalar(fields["name"])] = fields
        host_ipc = scalar(spec.get("hostIPC")) == "true"
        for container in spec["containers"].value:
            self.container(_map(container), container, label, role, volumes, host_ipc, extra)

    def container(self, fields: dict, node, label: str, role: str, volumes: dict, host_ipc: bool,
                  extra: dict) -> None:
        name = scalar(fields.get("name")) or "?"
        context = f"container {name} of {label}" + (f" ({role})" if role else "")
        resources = _map(fields.get("resources"))
        asked = {}
        for section in ("requests", "limits"):  # limits win, as the scheduler reads them for extended resources
            for key, value in _map(resources.get(section)).items():
                asked[key] = value
        gpus = None
        if GPU in asked:
            count = _count(asked[GPU])
            gpus = {"count": count, "line": line(asked[GPU]), "what": f"{GPU}: {scalar(asked[GPU])}",
                    "path": self.path}
            if count is None:
                gpus["unresolved"] = scalar(asked[GPU]) or "?"
        pod = {"path": self.path, "line": line(node), "context": context, "role": role, "gpus": gpus,
               "host_ipc": host_ipc, "shm": self.shm(fields, volumes),
               "efa": _count(asked[EFA]) if EFA in asked else 0,
               "efa_line": line(asked[EFA]) if EFA in asked else None,
               "rdma": sorted(key for key in asked if key == EFA or key.startswith(RDMA_PREFIXES)),
               "ipc_lock": self.ipc_lock(fields), "efa_env": self.efa_env(fields),
               "resources_line": line(fields["resources"]) if "resources" in fields else None,
               "kind": extra.get("kind"), "image": scalar(fields.get("image")),
               "runs_command": any(isinstance(fields.get(key), yaml.SequenceNode) and fields[key].value
                                   for key in ("command", "args"))}
        self.pods.append(pod)
        if extra.get("kind") == "MPIJob" and role == "Launcher":
            pod["mpi_launcher"] = True
        self.command_jobs(fields, context, pod, extra)

    @staticmethod
    def shm(fields: dict, volumes: dict) -> Optional[dict]:
        mounts = fields.get("volumeMounts")
        if not isinstance(mounts, yaml.SequenceNode):
            return None
        for mount in mounts.value:
            entry = _map(mount)
            if (scalar(entry.get("mountPath")) or "").rstrip("/") != "/dev/shm":
                continue
            volume = volumes.get(scalar(entry.get("name")) or "", {})
            empty = _map(volume.get("emptyDir"))
            host = _map(volume.get("hostPath"))
            memory = scalar(empty.get("medium")) == "Memory"
            return {"line": line(mount), "memory": memory or (scalar(host.get("path")) or "").rstrip("/") ==
                    "/dev/shm", "volume": scalar(entry.get("name"))}
        return None

    @staticmethod
    def ipc_lock(fields: dict) -> bool:
        security = _map(fields.get("securityContext"))
        if scalar(security.get("privileged")) == "true":
            return True
        added = _map(security.get("capabilities")).get("add")
        if isinstance(added, yaml.SequenceNode):
            return any((scalar(item) or "").upper() in ("IPC_LOCK", "CAP_IPC_LOCK", "ALL") for item in added.value)
        return False

    @staticmethod
    def efa_env(fields: dict) -> List[dict]:
        found: List[dict] = []
        env = fields.get("env")
        if not isinstance(env, yaml.SequenceNode):
            return found
        for item in env.value:
            entry = _map(item)
            name, value = scalar(entry.get("name")) or "", scalar(entry.get("value")) or ""
            if name == "FI_PROVIDER" and value.lower() == "efa" or name.startswith("FI_EFA_") \
                    or "aws-ofi-nccl" in value or name == "NCCL_NET_PLUGIN" and "ofi" in value.lower():
                found.append({"name": name, "value": value, "line": line(entry.get("name") or item)})
        return found

    def command_jobs(self, fields: dict, context: str, pod: dict, extra: dict) -> None:
        items = []
        for key in ("command", "args"):
            if isinstance(fields.get(key), yaml.SequenceNode):
                items += [child for child in fields[key].value if isinstance(child, yaml.ScalarNode)]
        if not items:
            return
        found: List[dict] = []
        script = script_node(items)
        if script is not None:
            found = self.scripts.jobs(script)
        else:
            words = [(child.value, "$(" not in child.value, line(child)) for child in items]
            parsed = commands.parse(words, line(items[0]))
            if parsed:
                found = [{"path": self.path, "line": line(items[0]), "launchers": parsed["launchers"],
                          "script": parsed["script"], "conditional": False, "env_sets": [],
                          "command": " ".join(w[0] for w in words)[:200]}]
        for job in found:
            job.update(kind="k8s", context=context, gpus=pod["gpus"])
            self.operator(job, extra, pod)
            self.jobs.append(finish_job(job))

    def operator(self, job: dict, extra: dict, pod: dict) -> None:
        """What the Kubeflow operators add (OPERATORS: the method for each kind)."""
        handler = OPERATORS.get(extra.get("kind") or "")
        if handler:
            getattr(self, handler)(job["launchers"], extra, pod)

    @staticmethod
    def pytorchjob(launchers: List[dict], extra: dict, pod: dict) -> None:
        """PyTorchJob: one process per pod with its rank variables set, or torchrun given spec.nprocPerNode (as the
        operator's PET_NPROC_PER_NODE)."""
        if launchers and launchers[0]["name"] == "python":
            launchers.insert(0, {"name": "training-operator", "line": pod["line"], "ranks_per_node": 1,
                                 "source": "PyTorchJob: one process per pod, RANK/WORLD_SIZE/MASTER_ADDR set"})
            launchers[-1] = dict(launchers[-1], ranks_per_node=1)
        nproc = extra.get("nproc_per_node")
        for entry in launchers:
            if entry["name"] != "torchrun" or not entry.get("source", "").startswith("default"):
                continue
            if nproc is None:
                entry["ranks_per_node"], entry["source"] = None, "PET_NPROC_PER_NODE from the operator"
                continue
            count, value = _count(nproc), scalar(nproc)
            entry["ranks_per_node"] = count if count is not None else ("gpu" if value in ("gpu", "auto") else None)
            entry["source"] = f"spec.nprocPerNode: {value} (line {line(nproc)})"

    @staticmethod
    def mpijob(launchers: List[dict], extra: dict, pod: dict) -> None:
        """MPIJob: mpirun in the launcher pod starts slotsPerWorker ranks on each worker pod."""
        if not pod.get("mpi_launcher"):
            return
        slots = extra.get("slots")
        for entry in launchers:
            if entry["name"] == "mpirun" and entry.get("ranks_per_node") is None and "unresolved" not in entry:
                entry["ranks_per_node"] = _count(slots) if slots is not None else 1
                entry["source"] = f"slotsPerWorker: {scalar(slots)} (line {line(slots)})" if slots \
                    is not None else "slotsPerWorker default (1)"

    def service(self, service_name: str, mapped: dict, index: int) -> None:
        """A Compose service: the GPUs it reserves and the job its `command` starts."""
        fields = {key: value for key, (_, value) in mapped.items()}
        command = fields.get("command")
        words = []
        if isinstance(command, yaml.SequenceNode):
            words = [(scalar(c) or "", True) for c in command.value]
        elif isinstance(command, yaml.ScalarNode):
            words = [(word, "$" not in word) for word in command.value.split()]
        parsed = commands.parse(words, line(command)) if words else None
        if parsed:
            self.jobs.append(finish_job({
                "path": self.path, "line": line(command), "kind": "compose", "context": f"service {service_name}",
                "launchers": parsed["launchers"], "script": parsed["script"], "conditional": False,
                "env_sets": [], "gpus": self.reserved_gpus(fields), "command": " ".join(w[0] for w in words)[:200]}))

    def reserved_gpus(self, fields: dict) -> Optional[dict]:
        """`deploy.resources.reservations.devices[*]` with the `gpu` capability and a `count` or `device_ids`: the
        last one."""
        gpus = None
        devices = _map(_map(_map(fields.get("deploy")).get("resources")).get("reservations")).get("devices")
        for device in devices.value if isinstance(devices, yaml.SequenceNode) else []:
            entry = _map(device)
            capabilities = entry.get("capabilities")
            ids = entry.get("device_ids")
            if isinstance(capabilities, yaml.SequenceNode) and any(scalar(c) == "gpu" for c in capabilities.value) \
                    and isinstance(ids, yaml.SequenceNode):
                gpus = {"count": len(ids.value), "line": line(ids), "path": self.path,
                        "what": f"device_ids: [{', '.join(scalar(i) or '?' for i in ids.value)}]"}
            elif isinstance(capabilities, yaml.SequenceNode) and any(
                    scalar(c) == "gpu" for c in capabilities.value) and "count" in entry:
                count = _count(entry["count"])
                gpus = {"count": count, "line": line(entry["count"]), "path": self.path,
                        "what": f"count: {scalar(entry['count'])}"}
                if count is None:
                    gpus["unresolved"] = scalar(entry["count"]) or "?"
        return gpus
