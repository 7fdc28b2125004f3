"""Kubernetes manifests (Pod, Deployment, Job, CronJob, PyTorchJob, MPIJob, JobSet, TrainJob, ... any object with
container `env:` lists, multi-document) and Docker Compose files (`services.*.environment`).

Parsed with PyYAML's safe composer, so every value keeps its line. Per container (its own scope):
`env: [{name, value}]` (a missing value is ""; `$(VAR)` refers to an earlier entry of the same list and is
resolved, `$$` escapes it), `envFrom`/`configMapKeyRef` of a ConfigMap in the same file (its data; `env` wins),
other `valueFrom` (unknown value), unquoted numbers/booleans (the API server rejects
them: reported with the line), and `bash -c` scripts in `command`/`args`, read with the shell reader
(`export`, `mpirun -x`, ...). Megatron/NeMo tensor-parallel flags in `command`/`args` become GD408 evidence.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

import yaml

from gpudoctor.readers.env import Assignment, ReadResult, is_env_name
from gpudoctor.readers.k8s import nodes
from gpudoctor.readers.k8s.scripts import Scripts, script_node

STR_TAG = "tag:yaml.org,2002:str"
NULL_TAG = "tag:yaml.org,2002:null"
DEPENDENT = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


class EnvReader(nodes.Collector):
    """The env of every container, collected from the file's one walk (nodes.walk)."""

    def __init__(self, text: str, path: str, scripts: Optional[Scripts] = None, config_maps: Optional[dict] = None):
        self.text = text
        self.config_maps = config_maps or {}  # the file's ConfigMaps: {name: {key: (value, line)}}
        self.path = path
        self.scripts = scripts or Scripts(path)
        self.result = ReadResult()
        self.scope = self.label = ""

    def document(self, index: int, top: dict, kind: Optional[str], label: str) -> None:
        self.scope, self.label = f"k8s:{self.path}#{index}", label

    def enter(self, node, fields: dict, trail: List[str], depth: int) -> None:
        has_env = "env" in fields and isinstance(fields["env"][1], yaml.SequenceNode)
        if has_env or "image" in fields and ("command" in fields or "args" in fields):
            self.container(node, fields, self.scope, self.label, trail)

    def parse_error(self, error: Optional[BaseException]) -> None:
        """What stopped the file's composition or its walk, as a GD003 input error."""
        if isinstance(error, yaml.YAMLError):
            mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
            problem = getattr(error, "problem", None) or str(error).splitlines()[0]
            message = f"YAML does not parse: {problem}"
            if "{{" in self.text and "}}" in self.text:
                message += " (this looks like a Helm template: render it first with `helm template`)"
            self.result.error(message, mark.line + 1 if mark else None, mark.column + 1 if mark else None)
        elif error is not None:
            self.result.error("YAML nested too deeply to read")

    def container(self, node, fields: dict, scope: str, label: str, trail: List[str]) -> None:
        name = nodes.scalar(fields["name"][1]) if "name" in fields else None
        role = next((part for part in reversed(trail) if part in ("Master", "Worker", "Launcher", "Chief", "PS",
                                                                   "Evaluator", "Head")), "")
        where = f"container {name}" if name else "env of " + ".".join(trail[-3:])
        context = f"{where} of {label}" + (f" ({role})" if role else "")
        container_scope = f"{scope}:{'.'.join(trail)}:{name or ''}"
        known: Dict[str, Any] = {}
        if "envFrom" in fields and isinstance(fields["envFrom"][1], yaml.SequenceNode):
            for item in fields["envFrom"][1].value:  # first: `env` entries override what envFrom gives
                self.env_from(item, known, container_scope, context)
        if "env" in fields and isinstance(fields["env"][1], yaml.SequenceNode):
            for item in fields["env"][1].value:
                self.env_entry(item, known, container_scope, context)
        self.command(fields, container_scope, context)

    def config_map(self, ref) -> Tuple[Optional[str], Optional[dict]]:
        """(name, data) of the ConfigMap a `configMapRef`/`configMapKeyRef` names, data None when not in the file."""
        name = nodes.scalar(nodes.mapping(ref).get("name", (None, None))[1])
        return name, self.config_maps.get(name)

    def env_from(self, item, known: dict, scope: str, context: str) -> None:
        """`envFrom: [{configMapRef: {name}, prefix}]`: each key of that ConfigMap (when it is in the file) whose
        name, prefixed, is a valid variable (the kubelet skips the others)."""
        entry = nodes.mapping(item)
        name, data = self.config_map(entry["configMapRef"][1]) if "configMapRef" in entry else (None, None)
        prefix = nodes.scalar(entry["prefix"][1]) or "" if "prefix" in entry else ""
        for key, (value, line) in (data or {}).items():
            if is_env_name(prefix + key):
                self.result.assignments.append(Assignment(prefix + key, value, self.path, line, None, scope=scope,
                                                          context=f"{context}, from ConfigMap {name} (envFrom)"))
                known[prefix + key] = value

    def env_entry(self, item, known: dict, scope: str, context: str) -> None:
        entry = nodes.mapping(item)
        if "name" not in entry:
            if isinstance(item, yaml.MappingNode):
                self.result.error("env entry without a name", nodes.line(item))
            return
        name_node = entry["name"][1]
        name = nodes.scalar(name_node)
        line = nodes.line(name_node)
        if not name or not is_env_name(name):
            self.result.error(f"env name {name!r} is not a valid variable name", line)
            return
        if "valueFrom" in entry:
            source = nodes.mapping(entry["valueFrom"][1])
            how = next(iter(source), "valueFrom")
            if how == "configMapKeyRef":
                map_name, data = self.config_map(source[how][1])
                key = nodes.scalar(nodes.mapping(source[how][1]).get("key", (None, None))[1])
                if data is not None and key in data:
                    self.result.assignments.append(Assignment(
                        name, data[key][0], self.path, line, None, scope=scope,
                        context=f"{context}, key {key} of ConfigMap {map_name}"))
                    known[name] = data[key][0]
                    return
            self.result.assignments.append(Assignment(
                name, f"<{how}>", self.path, line, f"valueFrom: {how} (known only when the pod starts)",
                scope=scope, context=context))
            known[name] = None
            return
        value_node = entry["value"][1] if "value" in entry else None
        if value_node is None or value_node.tag == NULL_TAG:
            value = ""
        elif not isinstance(value_node, yaml.ScalarNode):
            self.result.error(f"{name}: value must be a string", nodes.line(value_node))
            return
        else:
            value = value_node.value
            if value_node.tag != STR_TAG and not value_node.style:
                self.result.error(f"{name}: value {value} is not a string; Kubernetes rejects the manifest "
                                  f"(quote it: \"{value}\")", nodes.line(value_node), value_node.start_mark.column + 1)
        resolved, reason = self.dependent(value, known)
        if "{{" in value:
            reason = reason or "Helm template expression"
        self.result.assignments.append(Assignment(name, resolved if reason is None else value, self.path, line,
                                                  reason, scope=scope, context=context))
        known[name] = resolved if reason is None else None

    @staticmethod
    def dependent(value: str, known: dict):
        """Resolve `$(VAR)` references to earlier entries of the same env list, as the kubelet does."""
        reason = None

        def replace(match):
            nonlocal reason
            if match.group(0) == "$$":
                return "$"
            ref = match.group(1)
            if ref in known and known[ref] is not None:
                return known[ref]
            if ref not in known:
                return match.group(0)  # the kubelet leaves unknown references as they are
            reason = f"refers to $({ref}), whose value is known only when the pod starts"
            return match.group(0)

        return DEPENDENT.sub(replace, value), reason

    def command(self, fields: dict, scope: str, context: str) -> None:
        """Megatron/NeMo tensor-parallel flags given as list items, and what an `sh -c` script sets."""
        from gpudoctor.knowledge import table
        from gpudoctor.readers.shell import parser as shell

        tp = table("nccl_env").get("tensor_parallel", {})
        items = []
        for key in ("command", "args"):
            if key in fields and isinstance(fields[key][1], yaml.SequenceNode):
                listed = [child for child in fields[key][1].value if isinstance(child, yaml.ScalarNode)]
                walker = shell.Walker(self.path, self.result, scope, context, 0, tp)
                walker.tensor_parallel([shell.Word([("lit", child.value)], nodes.line(child)) for child in listed])
                items += listed
        script = script_node(items)
        if script is not None:
            found = self.scripts.env(script, scope, context)
            self.result.assignments += found.assignments
            self.result.errors += found.errors
            self.result.tensor_parallel += found.tensor_parallel

    def service(self, service_name: str, fields: dict, index: int) -> None:
        """A Compose service's `environment` (a mapping or a list of NAME=value)."""
        if "environment" in fields:
            scope = f"k8s:{self.path}#{index}:services.{service_name}"
            context = f"service {service_name}"
            for name, value, at in self._compose_items(fields["environment"][1]):
                if is_env_name(name):
                    self.result.assignments.append(Assignment(name, value, self.path, at, self._compose_reason(value),
                                                              scope=scope, context=context))

    @staticmethod
    def _compose_items(env) -> List[Tuple[str, str, int]]:
        """(name, value, line) of a Compose `environment:` mapping (a null value passes the host's through) or list."""
        found: List[Tuple[str, str, int]] = []
        if isinstance(env, yaml.MappingNode):
            for key, node in env.value:
                value = nodes.scalar(node)
                if node.tag != NULL_TAG and value is not None:
                    found.append((nodes.scalar(key) or "", value, nodes.line(key)))
        elif isinstance(env, yaml.SequenceNode):
            for item in env.value:
                setting = nodes.scalar(item)
                if setting and "=" in setting:
                    name, value = setting.split("=", 1)
                    found.append((name, value, nodes.line(item)))
        return found

    @staticmethod
    def _compose_reason(value: str) -> Optional[str]:
        match = re.search(r"\$\{?[A-Za-z_]", value.replace("$$", ""))
        return f"interpolated by Compose from `{match.group(0)}…`" if match else None


def read(text: str, path: str) -> ReadResult:
    """The env of every container of a YAML text, alone (a file's reader walks it once with the pod reader too)."""
    documents, error = nodes.compose(text)
    reader = EnvReader(text, path, config_maps=nodes.config_maps(documents))
    stopped = nodes.walk(documents, [reader])
    reader.parse_error(error or stopped)
    return reader.result
