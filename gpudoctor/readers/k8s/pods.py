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
from typing import List, Optional, Tuple

import yaml

from gpudoctor.readers import commands
from gpudoctor.readers.k8s.nodes import Documents, compose, line, scalar
from gpudoctor.readers.k8s.scripts import Scripts, script_node
from gpudoctor.readers.launch import finish_job

GPU = "nvidia.com/gpu"
EFA = "vpc.amazonaws.com/efa"
RDMA_PREFIXES = ("rdma/", "mellanox.com/", "nvidia.com/hostdev", "nvidia.com/rdma")
ROLES = ("Master", "Worker", "Launcher", "Chief", "Head")


def _map(node) -> dict:
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {key.value: value for key, value in node.value if isinstance(key, yaml.ScalarNode)}


def _count(node) -> Optional[int]:
    text = scalar(node)
    return int(text) if text is not None and re.fullmatch(r"\d+", text.strip()) else None


class Manifest:
    def __init__(self, text: str, path: str, scripts: Optional[Scripts] = None):
        self.text = text
        self.path = path
        self.scripts = scripts or Scripts(path)
        self.jobs: List[dict] = []
        self.pods: List[dict] = []
        self.seen: set = set()  # nodes walked: an alias is walked once (a YAML alias bomb stays linear)

    def read(self, parsed: Optional[Tuple[Documents, Optional[BaseException]]] = None) -> "Manifest":
        documents, _ = parsed or compose(self.text)  # the env reader reports a parse error (GD003)
        try:
            for index, document in documents:
                self.document(document, index)
        except RecursionError:
            pass
        return self

    def document(self, node, index: int) -> None:
        self.seen = set()  # ids of this document's nodes (a finished document's ids may be reused)
        top = _map(node)
        kind = scalar(top.get("kind"))
        name = scalar(_map(top.get("metadata")).get("name"))
        label = " ".join(part for part in (kind, name) if part) or f"document {index + 1}"
        if kind is None and isinstance(top.get("services"), yaml.MappingNode):
            self.compose(top["services"])
            return
        spec = _map(top.get("spec"))
        extra = {"kind": kind, "nproc_per_node": spec.get("nprocPerNode"), "slots": spec.get("slotsPerWorker")}
        first_pod, first_job = len(self.pods), len(self.jobs)
        self.walk(node, label, [], extra, 0)
        if kind == "MPIJob":  # mpirun runs in the launcher pod; its ranks land on the worker pods
            workers = [p for p in self.pods[first_pod:] if p["role"] == "Worker"]
            for job in self.jobs[first_job:]:
                job["gpus"] = workers[-1]["gpus"] if workers else None

    def walk(self, node, label: str, trail: List[str], extra: dict, depth: int) -> None:
        if depth > 40 or id(node) in self.seen:
            return
        self.seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            fields = _map(node)
            if isinstance(fields.get("containers"), yaml.SequenceNode):
                self.pod(fields, label, trail, extra)
            for key, value in fields.items():
                if key not in ("containers", "initContainers"):
                    self.walk(value, label, trail + [key], extra, depth + 1)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                self.walk(item, label, trail, extra, depth + 1)

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
        found = []
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
        """What the Kubeflow operators add: PyTorchJob's rank variables, MPIJob's slots per worker."""
        launchers = job["launchers"]
        if extra.get("kind") == "PyTorchJob":
            if launchers and launchers[0]["name"] == "python":
                launchers.insert(0, {"name": "training-operator", "line": pod["line"], "ranks_per_node": 1,
                                     "source": "PyTorchJob: one process per pod, RANK/WORLD_SIZE/MASTER_ADDR set"})
                launchers[-1] = dict(launchers[-1], ranks_per_node=1)
            nproc = extra.get("nproc_per_node")
            for entry in launchers:
                if entry["name"] == "torchrun" and entry.get("source", "").startswith("default") and nproc is not None:
                    count = _count(nproc)
                    value = scalar(nproc)
                    entry["ranks_per_node"] = count if count is not None else (value if value in ("gpu", "auto")
                                                                               else None)
                    entry["ranks_per_node"] = "gpu" if entry["ranks_per_node"] == "auto" else entry["ranks_per_node"]
                    entry["source"] = f"spec.nprocPerNode: {value} (line {line(nproc)})"
                elif entry["name"] == "torchrun" and entry.get("source", "").startswith("default"):
                    entry["ranks_per_node"], entry["source"] = None, "PET_NPROC_PER_NODE from the operator"
        if extra.get("kind") == "MPIJob" and pod.get("mpi_launcher"):
            slots = extra.get("slots")
            for entry in launchers:
                if entry["name"] == "mpirun" and entry.get("ranks_per_node") is None and "unresolved" not in entry:
                    count = _count(slots) if slots is not None else 1
                    entry["ranks_per_node"] = count
                    entry["source"] = f"slotsPerWorker: {scalar(slots)} (line {line(slots)})" if slots \
                        is not None else "slotsPerWorker default (1)"

    def compose(self, services) -> None:
        for service_name, service in _map(services).items():
            fields = _map(service)
            context = f"service {service_name}"
            gpus = None
            devices = _map(_map(_map(fields.get("deploy")).get("resources")).get("reservations")).get("devices")
            if isinstance(devices, yaml.SequenceNode):
                for device in devices.value:
                    entry = _map(device)
                    capabilities = entry.get("capabilities")
                    if isinstance(capabilities, yaml.SequenceNode) and any(
                            scalar(c) == "gpu" for c in capabilities.value) and "count" in entry:
                        count = _count(entry["count"])
                        gpus = {"count": count, "line": line(entry["count"]), "path": self.path,
                                "what": f"count: {scalar(entry['count'])}"}
                        if count is None:
                            gpus["unresolved"] = scalar(entry["count"]) or "?"
            command = fields.get("command")
            words = []
            if isinstance(command, yaml.SequenceNode):
                words = [(scalar(c) or "", True) for c in command.value]
            elif isinstance(command, yaml.ScalarNode):
                words = [(word, "$" not in word) for word in command.value.split()]
            parsed = commands.parse(words, line(command)) if words else None
            if parsed:
                self.jobs.append(finish_job({
                    "path": self.path, "line": line(command), "kind": "compose", "context": context,
                    "launchers": parsed["launchers"], "script": parsed["script"], "conditional": False,
                    "env_sets": [], "gpus": gpus, "command": " ".join(w[0] for w in words)[:200]}))


def read(text: str, path: str, parsed: Optional[Tuple[Documents, Optional[BaseException]]] = None,
         scripts: Optional[Scripts] = None) -> Manifest:
    """The jobs and pods; `parsed`, `scripts`: the text's documents (nodes.compose) and container scripts, when the
    caller shares them with the env reader."""
    return Manifest(text, path, scripts).read(parsed)


