"""The MCP tools: plain functions over gpudoctor.api, each returning one of gpudoctor's JSON documents (the same as
the command named in its description prints with `--format json`) and raising gpudoctor.errors.InputError, in one
line, for input it cannot use. Their docstrings are the descriptions an assistant reads; the parameters' schemas
come from the annotations (pydantic), bounds included."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from typing import Annotated, Any, Callable, Dict, List, Literal, Optional

from pydantic import BaseModel, Field

from gpudoctor import api
from gpudoctor.errors import InputError
from gpudoctor.ingest.registry import FORMATS as PASTED
from gpudoctor.training_settings import Precision

MAX_TEXT = 2_000_000  # characters of pasted text; a longer log is read from its file (`paths`)
MAX_PATHS = 64  # files or folders in one call
MAX_NAME = 4096  # characters of one path, model or GPU name (PATH_MAX)
RELATIVE = "relative paths are read from the server's working directory; only files under the folders it was " \
           "started for"
NEVER = ("/proc", "/sys", "/dev")  # the kernel's and the devices' files: never read, whatever the roots
_roots: List[str] = []  # the folders the tools may read (set_scope); none set: the working directory
REPORTS = ", ".join(fmt.what for fmt in PASTED)

Select = Annotated[Optional[List[Annotated[str, Field(max_length=16)]]], Field(
    max_length=MAX_PATHS, description="Only these rule IDs or prefixes (['GD4'], ['GD401', 'GD5']); default: every "
                                      "rule.")]
Quick = Annotated[bool, Field(description="Read torch's versions from its files instead of importing it in a child "
                                          "process (faster; whether CUDA works stays unknown).")]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
Detail = Annotated[Literal["full", "findings"], Field(description=(
    "full: the whole report (the rules that passed, were unknown or not applicable, the probes); findings: the "
    "findings with the summary and the source only, a much shorter reply."))]
FINDINGS_ONLY = ("schema", "tool", "source", "host", "summary", "findings")  # a report's keys at detail=findings


def _paths(what: str) -> Any:
    return Field(max_length=MAX_PATHS, description=f"{what}; each must exist ({RELATIVE}).")


LogPaths = Annotated[Optional[List[Name]], _paths("Log, report or snapshot files to read as well (any size, streamed)")]
ScriptPaths = Annotated[Optional[List[Name]],
                        _paths("Training scripts to analyse statically (parsed, never imported or run)")]


def _report(collect: Callable[[], Any], select: Optional[List[str]], detail: str = "full") -> Dict[str, Any]:
    """The `gpudoctor.report/1` document of the rules (those of `select`) on what `collect` gathers, with the time it
    took, as `check` reports it (rendered by gpudoctor, so redacted like every other output); `detail="findings"`:
    only the keys of FINDINGS_ONLY."""
    started = time.monotonic()
    report = api.evaluate(collect(), select=select or ())
    return _document(dataclasses.replace(report, seconds=time.monotonic() - started), detail)


def _document(report, detail: str = "full") -> Dict[str, Any]:
    """The report as a gpudoctor.report/1 document (rendered by gpudoctor, so redacted like every other output);
    `detail="findings"`: only the keys of FINDINGS_ONLY."""
    document = json.loads(api.format_report(report, "json"))
    return {key: document[key] for key in FINDINGS_ONLY} if detail == "findings" else document


def set_scope(roots: List[str]) -> None:
    """The folders the tools may read from now on (`gpudoctor mcp --root DIR`); empty: the working directory."""
    _roots[:] = [os.path.realpath(root) for root in roots]


def scope() -> List[str]:
    return list(_roots) or [os.path.realpath(os.getcwd())]


def _inside(path: str, folders) -> bool:
    return any(path == folder or path.startswith(folder.rstrip("/") + "/") for folder in folders)


def _in_scope(path: str, what: str) -> None:
    """A path the server may read: under one of its roots once every link is resolved, never under /proc, /sys or
    /dev. Said before whether it exists, so nothing outside is even probed."""
    real = os.path.realpath(path)
    if _inside(real, NEVER) or not _inside(real, scope()):
        raise InputError(f"{what} {path!r}: outside the folders this server may read ({', '.join(scope())}; "
                         f"never {', '.join(NEVER)}): start it with `gpudoctor mcp --root DIR` to allow a folder")


def _existing(paths: Optional[List[str]], what: str, folders: bool = False) -> tuple:
    """The paths, each in the server's scope and a regular file (or, with `folders`, a folder): never a device or
    FIFO (/dev/zero streams forever, /dev/stdin is the protocol's)."""
    for path in paths or ():
        _in_scope(path, what)
        if not (os.path.isfile(path) or (folders and os.path.isdir(path))):
            kind = "no such file or folder" if folders else "no such file"
            why = kind if not os.path.exists(path) else "not a regular file" + (" or folder" if folders else "")
            raise InputError(f"{what} {path!r}: {why} (the server runs in {os.getcwd()!r})")
    return tuple(paths or ())


def _model_in_scope(model: Optional[str]) -> None:
    """A model named by its config.json path is read like any file: only in scope (a size such as 7B is no path)."""
    if model and (os.path.sep in model or model.endswith(".json") or os.path.exists(model)):
        _in_scope(model, "model config")


_ASSIGNMENT = re.compile(r"[ \t]*(?:export[ \t]+)?[A-Za-z_][A-Za-z0-9_]*[ \t]*=")


def _env_file_only(path: str) -> None:
    """preview_fix shows the file's unchanged lines around each change: only a .env file gpudoctor reads whole
    (every line blank, a # comment or NAME=value, each value parsed) is previewed, so a .netrc, a .pgpass, a key
    or any other file never comes back through the diff."""
    from gpudoctor.files import read_bytes
    from gpudoctor.readers.dotenv.grammar import read

    try:
        text = read_bytes(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"env file {path!r}: cannot be read as text ({exc})") from None
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#") and not _ASSIGNMENT.match(line):
            raise InputError(f"env file {path!r}: line {number} is not NAME=value, a comment or blank: "
                             "preview_fix previews .env files only")
    errors = read(text, path).errors
    if errors:
        raise InputError(f"env file {path!r}: line {errors[0][1]} cannot be parsed as .env: preview_fix previews "
                         ".env files only")


def diagnose_text(
    text: Annotated[str, Field(max_length=MAX_TEXT, description=(
        "The pasted text: a failed run's log (NCCL INFO/WARN lines, tracebacks, kernel Xid lines, torchrun or SLURM "
        f"errors), a tool's output ({REPORTS}) or a `gpudoctor snapshot` JSON document; at most {MAX_TEXT:,} "
        "characters: give a longer log by path."))] = "",
    paths: LogPaths = None,
    select: Select = None,
    detail: Detail = "full",
) -> Dict[str, Any]:
    """Diagnose a pasted log or report, as `gpudoctor check --from FILE` does: the findings with their evidence
    lines, numbers and fixes, as a gpudoctor.report/1 JSON document. A `gpudoctor snapshot` (text or file) is
    judged as `check --snapshot FILE` judges it, with any logs given on top; several snapshots, one per node, as
    `gpudoctor fleet` does (a gpudoctor.fleet/1 document). Read-only: the text and files are parsed, never
    executed; nothing is written and no benchmark runs."""
    snapshots, text, paths = api.pasted_snapshots(text, _existing(paths, "report"))
    if len(snapshots) > 1:
        if text or paths:
            raise InputError("several snapshots are judged as a fleet, without logs: give the logs with one node's "
                             "snapshot at a time")
        return api.evaluate_fleet(snapshots, select or ())
    if snapshots:
        return _report(lambda: api.overlay_pasted(snapshots[0][1], text, paths), select, detail)
    return _report(lambda: api.collect_pasted(text, paths), select, detail)


def check_machine(
    script: ScriptPaths = None,
    ds_config: Annotated[Optional[Name], Field(description=f"A DeepSpeed config (JSON) to check; {RELATIVE}.")]
    = None,
    model: Annotated[Optional[Name], Field(description=(
        "A model size (7B, 0.5B) or a Hugging Face config.json, for the memory rules."))] = None,
    select: Select = None,
    quick: Quick = False,
    detail: Detail = "full",
) -> Dict[str, Any]:
    """Check the machine this server runs on, as `gpudoctor check` does: driver, GPUs (NVML), nvcc, the torch and
    DeepSpeed of the interpreter running this server, the environment, /dev/shm, ulimits, network interfaces;
    with a training script, DeepSpeed config or model if given. Returns a gpudoctor.report/1 JSON document.
    Read-only: it probes (each probe bounded in time), writes nothing, runs no benchmark and never runs the
    user's code; no other interpreter can be named (run `gpudoctor check --python PATH` for the job's own)."""
    _existing([ds_config] if ds_config else [], "DeepSpeed config")
    _model_in_scope(model)
    request = api.Request(scripts=_existing(script, "script"), ds_config=ds_config, model=model, quick=quick)
    return _report(lambda: api.collect(request), select, detail)


class JobFile(BaseModel):
    """A job file given by its contents."""

    name: Annotated[str, Field(min_length=1, max_length=MAX_NAME, description=(
        "The file's name as in the project (job.sbatch, deploy/pod.yaml, ds_config.json, .env, train.py): with the "
        "text it decides the format, and the findings point at it; nothing is read or written under it."))]
    text: Annotated[str, Field(max_length=MAX_TEXT, description=f"The file's text, at most {MAX_TEXT:,} characters.")]


def lint_files(
    paths: Annotated[Optional[List[Name]], Field(max_length=MAX_PATHS, description=(
        "Job files (.env, sbatch/shell scripts, Kubernetes manifests, Dockerfiles, DeepSpeed configs, training "
        f"scripts) or folders to read recursively; each must exist ({RELATIVE})."))] = None,
    files: Annotated[Optional[List[JobFile]], Field(max_length=MAX_PATHS, description=(
        "Job files given by their contents (what an assistant has in hand), each with its name; linted with the "
        "files of `paths`, grouped into jobs as lint groups files (a launch file with the files it names)."))] = None,
    select: Select = None,
    detail: Detail = "full",
) -> Dict[str, Any]:
    """Lint job files and folders, by path or by contents, as `gpudoctor lint PATH...` does (the same size and
    file-count bounds): the rules that judge files alone, no machine probed. Returns a gpudoctor.report/1 JSON
    document. Read-only: files are parsed, never executed or changed."""
    for item in files or ():  # a name is where the job's other files are looked for: in scope, as a path is
        _in_scope(item.name, "file")
    texts = {item.name: item.text for item in files or ()}
    if not paths and not texts:
        raise InputError("nothing to lint: give paths or files")
    if len(texts) < len(files or ()):
        raise InputError("two files given by contents have the same name")
    names = (*_existing(paths, "path", folders=True), *texts)
    started = time.monotonic()
    report = api.lint(names, select=select or (), texts=texts)
    return _document(dataclasses.replace(report, seconds=time.monotonic() - started), detail)


def estimate_memory(
    model: Annotated[Name, Field(description="A model size (7B, 1.3b, 7e9) or a Hugging Face config.json path.")],
    gpu: Annotated[Optional[Annotated[str, Field(max_length=100)]], Field(description=(
        'The GPU to compare with ("A100 40GB", "H100 SXM", "4090", or a size such as 24GB); default: this '
        "machine's GPUs."))] = None,
    world_size: Annotated[Optional[int], Field(ge=1, le=1_000_000, description="Data-parallel ranks.")] = None,
    zero_stage: Annotated[Optional[int], Field(ge=0, le=3, description=(
        "DeepSpeed ZeRO stage, 0 to 3 (a number or its text, as clients send it)."))] = None,
    precision: Annotated[Optional[Precision], Field(description=(
        "fp32, or bf16/fp16 mixed precision."))] = None,
    micro_batch: Annotated[Optional[int], Field(ge=1, le=1_000_000, description="Micro batch per GPU.")] = None,
    seq_len: Annotated[Optional[int], Field(ge=1, le=100_000_000, description="Sequence length.")] = None,
    ds_config: Annotated[Optional[Name], Field(description=(
        f"A DeepSpeed config to take precision, ZeRO stage, offload and micro batch from; {RELATIVE}."))] = None,
) -> Dict[str, Any]:
    """Estimate training memory per GPU, term by term (weights, gradients, optimizer states, activations), as
    `gpudoctor estimate --model` does, and whether it fits the GPU: a gpudoctor.estimate/1 JSON document.
    Settings not given come from the DeepSpeed config, else gpudoctor's stated defaults (listed under
    `assumptions`). Read-only: arithmetic on the numbers and files given; nothing is loaded, run or written."""
    training = {"world_size": world_size, "zero_stage": zero_stage, "precision": precision,
                "micro_batch": micro_batch, "seq_len": seq_len}
    _existing([ds_config] if ds_config else [], "DeepSpeed config")
    _model_in_scope(model)
    return api.estimate_memory(model, training, ds_config, gpu)


def explain_rule(
    rule_id: Annotated[str, Field(min_length=1, max_length=16, description="A rule ID such as GD304.")],
) -> Dict[str, Any]:
    """One rule's documentation, as `gpudoctor explain ID --format json` shows it: what it checks, why it matters,
    how to fix it (each fix case), references, and its firing and passing examples. Read-only."""
    return api.describe_rule(rule_id)


def preview_fix(
    env_file: Annotated[Name, Field(description=f"The job's .env file; it must exist ({RELATIVE}).")],
    unsafe: Annotated[bool, Field(description="Also apply the fixes marked unsafe.")] = False,
    quick: Quick = False,
) -> Dict[str, Any]:
    """What `gpudoctor fix --write-env ENV_FILE` would change in the file, as a unified diff, WITHOUT writing it
    (its --dry-run): the rules judge this machine with the file's variables, and their env fixes are merged into
    the file's text; conflicts and what is left by hand are listed. Returns a gpudoctor.fix.preview/1 document.
    Read-only: the file is never written (nor its lock), nothing is run."""
    _existing([env_file], "env file")
    _env_file_only(env_file)
    report = api.evaluate(api.collect(api.Request(env_files=(env_file,), quick=quick)))
    return api.preview_fix(report, env_file, unsafe)


TOOLS = (diagnose_text, check_machine, lint_files, estimate_memory, explain_rule, preview_fix)
TITLES = {  # what a client shows for each tool
    "diagnose_text": "Diagnose a log, report or snapshot", "check_machine": "Check this machine",
    "lint_files": "Lint job files", "estimate_memory": "Estimate training memory per GPU",
    "explain_rule": "Explain a gpudoctor rule", "preview_fix": "Preview the env fixes for a .env file",
}
OUTPUTS = {  # the JSON Schemas (docs/schemas/) of the documents a tool returns
    "diagnose_text": ("report", "fleet"), "check_machine": ("report",), "lint_files": ("report",),
    "estimate_memory": ("estimate",),
}


def output_schema(tool: str) -> Optional[Dict[str, Any]]:
    """The tool's outputSchema: its documents' published JSON Schemas, a report's required keys those of
    detail=findings; None for a tool whose document has none."""
    from gpudoctor.data import schemas_dir

    schemas = []
    for name in OUTPUTS.get(tool, ()):
        schema = json.loads((schemas_dir() / f"{name}.schema.json").read_text(encoding="utf-8"))
        if name == "report":
            schema["required"] = [key for key in schema["required"] if key in FINDINGS_ONLY]
        schemas.append(schema)
    if len(schemas) < 2:
        return schemas[0] if schemas else None
    return {"type": "object", "anyOf": schemas}
