"""The env facts of job files: the variables a job will get, each with its file and line, as every format's
reader gives them (`.env`, shell/sbatch scripts, Kubernetes manifests and Docker Compose files, Dockerfiles, NCCL's
own `nccl.conf`, Python launchers with env dicts). A reader never executes anything and never raises on bad input:
it returns the assignments it could read and the errors it met (with their line), which become GD003.

What lands in the snapshot (see docs/snapshot.md):
- `facts["env"][NAME]`: the value the job gets, only when it is a literal. A value that depends on the run
  (`$VAR`, `$(cmd)`, `${X:-d}`, Kubernetes `valueFrom`, a Python expression) is unknown: it is NOT put in `env`
  (a rule must never judge `$SLURM_LOCALID` as if it were the value), but kept verbatim in `env_sources`.
- `facts["env_sources"][NAME]`: `{"path", "line", "context", "scope", "conditional", "value"?, "unresolved"?,
  "also": [...]}` for the assignment that wins; `also` lists the other assignments of the same name (earlier ones,
  other containers, other files) with `shadowed: true` when a later assignment in the same scope overrides them
  for certain. GD4xx rules read every assignment (so a bad value in one container of several is still reported
  at its line) and GD410 reports different values set twice in one scope.
- `facts["requests"]["tensor_parallel"]`: Megatron/NeMo tensor-parallel flags found in job command lines (GD408).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Optional

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CVD = "CUDA_VISIBLE_DEVICES"
KIND = "env_file"
NO_ENV = ("no environment variables found: a YAML file that is not a Kubernetes manifest, a Compose file or a list "
          "of NAME=value lines (a training config is fine here)")


@dataclass
class Assignment:
    """One place a file sets (or unsets) a variable."""

    name: str
    value: Optional[str]
    path: str
    line: Optional[int]
    unresolved: Optional[str] = None  # why the value is not a literal; value then holds the verbatim text
    conditional: bool = False  # inside if/case/loop/function, after && or ||, setdefault, ...
    scope: str = ""  # assignments in different scopes are different environments (e.g. two containers)
    context: str = ""  # for humans: "container trainer of Pod distributed-training"
    unset: bool = False


@dataclass
class ReadResult:
    assignments: List[Assignment] = field(default_factory=list)
    errors: List[tuple] = field(default_factory=list)  # (message, line, column)
    tensor_parallel: List[dict] = field(default_factory=list)  # requests.tensor_parallel entries

    def error(self, message: str, line: Optional[int] = None, column: Optional[int] = None) -> None:
        self.errors.append((message, line, column))


def is_env_name(name: str) -> bool:
    return bool(NAME_RE.match(name or ""))


def _record(item: Assignment) -> dict:
    record = {"path": item.path, "line": item.line}
    if item.context:
        record["context"] = item.context
    if item.scope:
        record["scope"] = item.scope
    if item.conditional:
        record["conditional"] = True
    if item.unset:
        record["unset"] = True
    if item.unresolved:
        record["unresolved"] = item.unresolved
        record["value"] = item.value
    return record


def apply(snapshot, result: ReadResult, path: str, scope_override: Optional[str] = None) -> None:
    """Merge one file's assignments, errors and tensor-parallel evidence into the snapshot's facts."""
    from gpudoctor.readers.inputs import add_input_error

    facts = snapshot.facts
    env = facts.setdefault("env", {})
    sources = facts.setdefault("env_sources", {})
    for item in result.assignments:
        if scope_override and not item.scope.startswith("k8s:"):
            item.scope = scope_override
        new = _record(item)
        old = sources.get(item.name)
        if old is not None and item.conditional and not old.get("conditional") and not old.get("unset") \
                and old.get("scope") == new.get("scope"):
            # `export X=a` then `if …; then export X=b; fi`: the job gets a unless the branch runs; keep a as the
            # value and record b beside it.
            new["shadowed"] = False
            old.setdefault("also", []).append(new if item.unresolved or item.unset else
                                              dict(new, value=item.value))
            continue
        if old is not None:
            also = old.pop("also", [])
            previous = dict(old)
            if item.name in env and "value" not in previous:
                previous["value"] = env[item.name]
            previous["shadowed"] = bool(previous.get("scope") == new.get("scope") and not item.conditional)
            new["also"] = also + [previous]
        sources[item.name] = new
        if item.unset or item.unresolved or item.value is None:
            env.pop(item.name, None)
        else:
            env[item.name] = item.value
    if result.tensor_parallel:
        facts.setdefault("requests", {}).setdefault("tensor_parallel", []).extend(result.tensor_parallel)
    for message, line, column in result.errors:
        add_input_error(snapshot, path, KIND, message, line, column)
