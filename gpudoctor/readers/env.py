"""The variables a job will get, read from the files that set them, each with its file and line.

One reader per format (`.env`, shell/sbatch scripts, Kubernetes manifests and Docker Compose files, Dockerfiles,
NCCL's own `nccl.conf`, Python launchers with env dicts). A reader never executes anything and never raises on bad
input: it returns the assignments it could read and the errors it met (with their line), which become GD003.

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
from pathlib import Path
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


# --- format detection and the reader registry ------------------------------------------------------------

SHELL_SUFFIXES = {".sh", ".bash", ".zsh", ".ksh", ".sbatch", ".slurm", ".job", ".pbs", ".qsub", ".lsf", ".envrc"}
SHEBANG = re.compile(r"^#!\s*\S*(?:/|env\s+)(?:ba|z|k|da)?sh\b")


def is_dotenv(path: Path, text: str = "") -> bool:
    name = path.name
    return name == ".env" or name.startswith(".env.") or name.endswith(".env") or name in {"env", "envfile"}


def is_nccl_conf(path: Path, text: str = "") -> bool:
    return path.name in {"nccl.conf", ".nccl.conf"}


DOC_SUFFIXES = {".md", ".rst", ".txt", ".html", ".adoc"}
TEXT_SUFFIXES = {".py", ".yaml", ".yml", ".json", ".toml", ".md", ".txt", ".rst", ".cfg", ".ini"}


def is_shell(path: Path, text: str) -> bool:
    """By suffix, by shebang or batch directives, or (a script without extension) by shell commands a job file
    runs (`export NAME=`, `srun`, `torchrun`, `set -e` …) in a file that is not Python."""
    if path.suffix.lower() in SHELL_SUFFIXES or path.name == ".envrc":
        return True
    if path.suffix.lower() in TEXT_SUFFIXES:
        return False
    head = text.lstrip("\ufeff")[:8192]
    if SHEBANG.match(head) or re.search(r"(?m)^#(?:SBATCH|PBS|BSUB)\s", head):
        return True
    if path.suffix or is_dotenv(path) or head.startswith("#!") or not SHELL_COMMAND.search(head) \
            or PYTHON_LINE.search(head):
        return False
    lines = [line for line in head.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return sum(bool(SHELL_LINE.match(line)) for line in lines) >= 0.8 * len(lines)


DOCKERFILE_FIRST = re.compile(r"^(?:ARG\s+\S+\s*)*FROM\s+\S+", re.IGNORECASE)
DOCKERFILE_INSTRUCTION = re.compile(r"(?m)^\s*(?:RUN|ENV|COPY|ADD|WORKDIR|CMD|ENTRYPOINT|ARG|LABEL|USER)\s",
                                    re.IGNORECASE)
SHELL_COMMAND = re.compile(r"(?m)^\s*(?:export\s+[A-Za-z_]\w*=|(?:srun|sbatch|torchrun|mpirun|deepspeed|"
                           r"accelerate\s+launch|python3?\s+-m\s+torch\.distributed)\s|set\s+-[euxo]+\s*$|"
                           r"module\s+load\s)")
SHELL_LINE = re.compile(r"^\s*(?:[A-Za-z_]\w*=|(?:export|unset|srun|sbatch|salloc|torchrun|python3?|mpirun|mpiexec|"
                        r"deepspeed|accelerate|set|module|ml|source|\.|cd|echo|printf|if|then|elif|else|fi|for|while|"
                        r"do|done|case|esac|conda|nvidia-smi|mkdir|cp|mv|rm|ls|exec|wait|trap|sleep|ulimit|apptainer|"
                        r"singularity|docker|podman|enroot|pip3?|bash|sh|hostname|scontrol|local|declare|return|exit|"
                        r"true|false|\[\[?|\{|\}|\w[\w-]*\s*\(\)\s*\{?)(?:\s|$|;))")
PYTHON_LINE = re.compile(r"(?m)^(?:import\s+\w|from\s+[\w.]+\s+import\s|def\s+\w+\(|class\s+\w)")


def is_dockerfile(path: Path, text: str = "") -> bool:
    """By name (`Dockerfile`, `Dockerfile.gpu`, `train.dockerfile`, `mnist_Dockerfile`) or by content: the first
    instruction is FROM (after ARGs and comments) and others follow, as in every Dockerfile."""
    lower = path.name.lower()
    if path.suffix.lower() in TEXT_SUFFIXES:
        return False  # dockerfile.py is Python, Dockerfile.md documentation
    if (lower in {"dockerfile", "containerfile"} or lower.startswith(("dockerfile.", "containerfile."))
            or lower.endswith(("dockerfile", "containerfile"))):
        return True
    body = "\n".join(line for line in text.lstrip("\ufeff")[:8192].splitlines()
                     if line.strip() and not line.lstrip().startswith("#"))
    return bool(DOCKERFILE_FIRST.match(body)) and bool(DOCKERFILE_INSTRUCTION.search(body))


def is_yaml_manifest(path: Path, text: str) -> bool:
    if path.suffix.lower() not in {".yaml", ".yml"}:
        return False
    return bool(re.search(r"(?m)^\s*(?:-\s+)?(?:apiVersion|kind|services|env|containers)\s*:", text))


def is_python(path: Path, text: str = "") -> bool:
    return path.suffix.lower() in {".py", ".pyw"}


def read_env_text(path: Path, text: str, fmt: Optional[str] = None) -> ReadResult:
    """Read the assignments of one file; `fmt` forces a format (dotenv, shell, yaml, dockerfile, python, ncclconf)."""
    from gpudoctor.readers import dotenv
    from gpudoctor.readers.dockerfile import env as dockerfile
    from gpudoctor.readers.k8s import env as k8s
    from gpudoctor.readers.python import env as pyenv
    from gpudoctor.readers.shell import parser as shell

    fmt = fmt or detect(path, text)
    shown = str(path)
    if fmt == "dotenv":
        return dotenv.read(text, shown)
    if fmt == "ncclconf":
        return dotenv.read_nccl_conf(text, shown)
    if fmt == "shell":
        return shell.read(text, shown)
    if fmt == "yaml":
        return k8s.read(text, shown)
    if fmt == "dockerfile":
        return dockerfile.read(text, shown)
    if fmt == "python":
        return pyenv.read(text, shown)
    if fmt == "config-yaml":
        return k8s.read(text, shown)  # a config (NeMo/Hydra, …): only its parse errors matter here
    result = ReadResult()
    result.error("not an env file gpudoctor knows (.env, shell/sbatch script, Kubernetes or Compose YAML, "
                 "Dockerfile, nccl.conf, Python launcher)")
    return result


def detect(path: Path, text: str) -> Optional[str]:
    for fmt, test in (("ncclconf", is_nccl_conf), ("dockerfile", is_dockerfile), ("python", is_python),
                      ("yaml", is_yaml_manifest), ("shell", is_shell), ("dotenv", is_dotenv)):
        if test(path, text):
            return fmt
    # A file of NAME=value lines (what `--env-file` usually gets, even when it is called env.yaml) is read as a
    # .env file.
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    if lines and all(re.match(r"^(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=", line) for line in lines):
        return "dotenv"
    if path.suffix.lower() in {".yaml", ".yml"}:
        return "config-yaml"
    return None


def _register() -> None:
    from gpudoctor.readers.registry import FileReader, register

    def read(path: Path, text: str, snapshot) -> None:
        from gpudoctor.readers.inputs import add_input_error

        fmt = detect(path, text)
        result = read_env_text(path, text, fmt)
        apply(snapshot, result, str(path))
        if fmt == "config-yaml" and not result.errors:
            add_input_error(snapshot, str(path), KIND, NO_ENV, severity="info")

    def in_tree(path: Path, text: str) -> bool:
        fmt = detect(path, text)
        return fmt not in (None, "config-yaml") and not (fmt == "dotenv" and path.suffix.lower() in DOC_SUFFIXES)

    register(FileReader(KIND, lambda path, text: detect(path, text) is not None, read, in_tree=in_tree))


_register()


def overlay(paths, snapshot) -> None:
    """`check --env-file FILE` (repeatable): the files' variables override the environment the snapshot has
    (this process's, or a recorded machine's), in the order given. Files given together form one environment, so
    a variable they set to different values is a conflict (GD410). Raises InputError for a file that cannot be read."""
    from gpudoctor.files import read_input

    for name in paths:
        path = Path(name)
        text = read_input(str(name), "env file")
        fmt = detect(path, text) or ("yaml" if path.suffix.lower() in (".yaml", ".yml") else "dotenv")
        apply(snapshot, read_env_text(path, text, fmt), str(path), scope_override="--env-file")
    sources = snapshot.source.setdefault("paths", []) if isinstance(snapshot.source, dict) else []
    sources.extend(str(p) for p in paths if str(p) not in sources)


