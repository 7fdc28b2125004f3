"""One command line of a job, read as a chain of launchers ending in the script they start.

`parse(words)` takes the words of one command (each `(text, known)`: `known` is False for a value that depends on
the run, such as `$SLURM_GPUS_ON_NODE`) and returns the launchers it names, outermost first, and the script:

    srun --ntasks-per-node=1 torchrun --nproc_per_node 8 train.py --lr 1e-4
    -> [srun: ranks from its options or the batch script's], [torchrun: 8 per node], script train.py

Known launchers: `srun`, `mpirun`/`mpiexec`, `torchrun` / `python -m torch.distributed.run|launch`, `deepspeed`,
`accelerate launch`, and a plain `python script.py` (one process). Wrappers that start the command they are given
(`exec`, `nohup`, `time`, `env A=b`, `numactl …`, `apptainer|singularity exec IMAGE`) are looked through.
A count that is not a literal stays unknown (None with the text in `unresolved`), never guessed.
"""

from __future__ import annotations

import re
from typing import Collection, Dict, List, Optional, Sequence, Tuple

Word = tuple  # (text, known) or (text, known, line)

PYTHON = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)?)?$")
TORCHRUN_MODULES = {"torch.distributed.run", "torch.distributed.launch"}
# Options that take a separate value (the rest are flags or `--opt=value`; srun's `--label` is a flag and
# `--kill-on-bad-exit[=0|1]` takes its value only after `=`, as srun(1) writes them).
SRUN_VALUES = {"-n", "-N", "-c", "-p", "-w", "-t", "-J", "-o", "-e", "-A", "-q", "-G", "-x", "-m", "-D", "-C", "-d",
               "-B", "-L", "-M", "-r", "-T", "-W", "-i", "--ntasks", "--nodes", "--cpus-per-task", "--partition",
               "--nodelist", "--time", "--job-name", "--output", "--error", "--account", "--qos", "--gpus", "--gres",
               "--gpus-per-node", "--gpus-per-task", "--ntasks-per-node", "--mem", "--mem-per-cpu", "--mem-per-gpu",
               "--mpi", "--export", "--container-image", "--container-mounts", "--container-workdir", "--cpu-bind",
               "--distribution", "--exclude", "--constraint", "--dependency",
               "--container-name", "--container-env", "--network", "--reservation", "--signal",
               "--cpus-per-gpu", "--gpu-bind", "--chdir", "--comment", "--wait"}
# Open MPI, MPICH (hydra) and Cray/HPE PALS (`mpiexec --ppn 4 --depth 16 --cpu-bind depth`, ALCF Polaris) and
# Cray ALPS `aprun -n 8 -N 4 -d 16 -cc depth` options that take a separate value.
MPI_VALUES = {"-np", "--np", "-n", "-c", "-N", "-npernode", "--npernode", "--ppn", "--depth", "-d", "--cpu-bind",
              "--env", "-cc", "-j", "-x", "-H", "--host", "-host", "--hostfile",
              "-hostfile", "--machinefile", "-machinefile", "-bind-to", "--bind-to", "-map-by", "--map-by", "-ppn",
              "-genv", "-env", "--prefix", "-wdir", "--wdir", "-f", "-hosts", "--rankfile", "-rf", "--report-bindings",
              "-mca", "--mca", "-gmca", "--gmca"}
MPI_TWO_VALUES = {"-mca", "--mca", "-gmca", "--gmca", "-genv", "-env"}
TORCHRUN_FLAGS = {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path",
                  "--virtual-local-rank", "--virtual_local_rank", "--use-env", "--use_env"}
DEEPSPEED_FLAGS = {"--no_python", "--no_local_rank", "--autotuning", "--force_multi", "--elastic_training",
                   "--enable_each_rank_log", "--bind_cores_to_rank", "--no_ssh", "--no_ssh_check", "--module", "-m"}
ACCELERATE_FLAGS = {"--multi_gpu", "--multi-gpu", "--cpu", "--use_deepspeed", "--use-deepspeed", "--use_fsdp",
                    "--use-fsdp", "--use_megatron_lm", "-m", "--module", "--no_python", "--no-python", "--debug",
                    "--tpu", "--quiet", "-q", "--same_network", "--rdzv_conf"}
CONTAINER_VALUES = {"-B", "--bind", "--env", "--env-file", "--home", "-H", "--pwd", "--overlay", "-o", "--mount",
                    "-W", "--workdir", "--security", "--network", "--hostname", "--app"}
PYTHON_VALUE_FLAGS = {"-W", "-X", "-c", "-Q"}
# tools that run a command given after options of their own: profilers, environment managers
TOOL_WRAPPERS = {"nsys", "ncu", "nv-nsight-cu-cli", "conda", "mamba", "micromamba", "uv", "poetry", "pixi", "pipenv",
                 "py-spy", "perf", "valgrind", "compute-sanitizer", "cuda-memcheck", "likwid-pin"}
LAUNCHER_HEADS = {"srun", "mpirun", "mpiexec", "orterun", "aprun", "torchrun", "deepspeed", "accelerate"}
WRAPPERS = {"exec", "nohup", "time", "command", "stdbuf", "nice", "ionice", "taskset", "chrt", "numactl",
            "unbuffer", "xvfb-run"}


def _launcher_after(words: Sequence[Word], index: int) -> int:
    """`nsys profile -t cuda -o out torchrun …`, `conda run -n env python …`: a tool whose options are its own (some
    take a value, some not) runs the command that starts at the first launcher or Python after it."""
    while index < len(words):
        base = _base(words[index][0]) if words[index][1] else ""
        if base in LAUNCHER_HEADS or PYTHON.match(base):
            return index
        index += 1
    return index


def _base(text: str) -> str:
    return text.rsplit("/", 1)[-1]


def _option(words: Sequence[Word], index: int, values: set) -> Tuple[str, Optional[Word], int]:
    """(option name, its value word or None, next index) for the option at `index`."""
    text = words[index][0]
    if text.startswith("--") and "=" in text:
        name, value = text.split("=", 1)
        return name, (value,) + tuple(words[index][1:]), index + 1
    if text in values and index + 1 < len(words):
        return text, words[index + 1], index + 2
    if re.match(r"^-[nNcGp]\d+$", text):  # srun -n4
        return text[:2], (text[2:],) + tuple(words[index][1:]), index + 1
    return text, None, index + 1


def _line_of(word: Optional[Word], default: int) -> int:
    """The line a word is on, where the caller said (a command continued over several lines)."""
    return word[2] if word is not None and len(word) > 2 and word[2] else default


def _count(word: Optional[Word]) -> Tuple[Optional[int], Optional[str]]:
    """(int, None) for a literal count, (None, text) for a value known only at run time."""
    if word is None:
        return None, None
    text, known = word[0], word[1]
    if known and re.fullmatch(r"\d+", text.strip()):
        return int(text), None
    return None, text


def parse(words: Sequence[Word], line: int) -> Optional[dict]:
    """The launch chain of one command, or None when it starts no Python script."""
    launchers: List[dict] = []
    index = 0
    while index < len(words):
        if not words[index][1]:
            return None
        base = _base(words[index][0])
        after = _after_wrapper(base, words, index)
        if after is not None:
            index = after
        elif base in OUTER_LAUNCHERS:
            entry, index = OUTER_LAUNCHERS[base](words, index + 1, line)
            launchers.append(entry)
        else:
            return _innermost(base, words, index, line, launchers)
    return None


def _after_wrapper(base: str, words: Sequence[Word], index: int) -> Optional[int]:
    """Where the command goes on after a wrapper that runs the rest of it (`env A=1`, `nohup`, `conda run -n x`,
    `apptainer exec IMAGE`) and the wrapper's own options; None when `base` is not one."""
    following = words[index + 1][0] if index + 1 < len(words) else None
    if base in WRAPPERS:
        return _past_options(words, index + 1)
    if base in TOOL_WRAPPERS and following is not None:
        return _launcher_after(words, index + 1)
    if base == "env":
        return _past_options(words, index + 1, assignments=True)
    if base in ("apptainer", "singularity") and following in ("exec", "run"):
        return _past_options(words, index + 2, CONTAINER_VALUES) + 1  # then the image
    return None


def _past_options(words: Sequence[Word], index: int, with_values: Collection[str] = (),
                  assignments: bool = False) -> int:
    """The index after the options at `index` (`with_values`: those that take the next word; `assignments`:
    NAME=value words count as options, as env's do)."""
    while index < len(words) and (words[index][0].startswith("-") or assignments and "=" in words[index][0]):
        index += 2 if words[index][0] in with_values else 1
    return index


def _innermost(base: str, words: Sequence[Word], index: int, line: int, launchers: List[dict]) -> Optional[dict]:
    """The chain ending in the launcher or interpreter that starts the script; None for any other program."""
    if base == "torchrun":
        return _finish(launchers, *_torchrun(words, index + 1, line, "torchrun"))
    if base == "deepspeed":
        return _finish(launchers, *_deepspeed(words, index + 1, line))
    if base == "accelerate" and index + 1 < len(words) and words[index + 1][0] == "launch":
        return _finish(launchers, *_accelerate(words, index + 2, line))
    if PYTHON.match(base):
        return _python(words, index + 1, line, launchers)
    return None


def _finish(launchers: List[dict], entry: dict, script: Optional[dict]) -> Optional[dict]:
    if script is None:
        return None
    if PYTHON.match(_base(script.get("path") or "")) and not entry.get("no_python"):
        script["interpreter"] = True  # `torchrun python train.py`: the launcher runs `python -u python train.py`
    return {"launchers": launchers + [entry], "script": script}


def _script(words: Sequence[Word], index: int, line: int, module: bool = False) -> Optional[dict]:
    if index >= len(words):
        return None
    text, known = words[index][0], words[index][1]
    if not known:
        return {"path": None, "unresolved": text, "line": line}
    if module:
        return {"module": text, "path": None, "line": line}
    if text.endswith(".py") or "/" in text or not text.startswith("-"):
        rest = words[index + 1:index + 81]
        return {"path": text, "line": line, "args": [word[0] for word in rest],
                "args_known": len(words) - index - 1 <= 80 and all(word[1] for word in rest)}
    return None


def _srun(words: Sequence[Word], index: int, line: int) -> Tuple[dict, int]:
    options: dict = {}
    while index < len(words) and words[index][0].startswith("-"):
        name, value, index = _option(words, index, SRUN_VALUES)
        if value is not None:
            options[name] = value
    entry = {"name": "srun", "line": line, "options": {k: v[0] for k, v in options.items()}}
    return entry, index


def _mpirun(words: Sequence[Word], index: int, line: int) -> Tuple[dict, int]:
    per_node, unresolved, said_at = None, None, line
    while index < len(words) and words[index][0].startswith("-"):
        text = words[index][0]
        if text in MPI_TWO_VALUES:
            index += 3
            continue
        name, value, index = _option(words, index, MPI_VALUES)
        if name in ("-npernode", "--npernode", "-N", "-ppn", "--ppn") and value is not None:
            per_node, unresolved = _count(value)
            said_at = _line_of(value, line)
        elif name in ("-map-by", "--map-by") and value is not None:
            match = re.match(r"^ppr:(\d+):node", value[0])
            if match and value[1]:
                per_node = int(match.group(1))
    entry = {"name": "mpirun", "line": said_at, "ranks_per_node": per_node}
    if unresolved:
        entry["unresolved"] = unresolved
    return entry, index


# The launchers that start the rest of the command (once per task) and read their own options.
OUTER_LAUNCHERS = {"srun": _srun, "mpirun": _mpirun, "mpiexec": _mpirun, "orterun": _mpirun, "aprun": _mpirun}


def _options(words: Sequence[Word], index: int, flags: set) -> Tuple[dict, bool, int]:
    """A Python launcher's options up to the script: ({option: value word, or None for a flag}, `-m` given, index
    of the script). Names are written with dashes (`--use_env` → `--use-env`)."""
    found: Dict[str, Optional[Word]] = {}
    module = False
    while index < len(words) and words[index][0].startswith("-"):
        text = words[index][0]
        if text in flags:
            module = module or text in ("-m", "--module")
            found[text.replace("_", "-")] = None
            index += 1
            continue
        option, value, index = _option(words, index, set())
        if "=" not in text and index < len(words) and not words[index][0].startswith("-"):
            value, index = words[index], index + 1
        found[option.replace("_", "-")] = value
    return found, module, index


ARITHMETIC = re.compile(r"^\$\(\((.{1,200})\)\)$", re.S)
ARITHMETIC_NAME = re.compile(r"\$\{([A-Za-z_]\w*)\}|\$?([A-Za-z_]\w*)")


def arithmetic(text: str, values: dict) -> Tuple[Optional[int], str]:
    """A shell arithmetic expansion (`$((NNODES * GPUS_PER_NODE))`) with the names in `values` put in: (its value
    when every name is known, the text with the known names written as numbers). Only + - * / % and parentheses."""
    import ast

    match = ARITHMETIC.match(text.strip())
    if not match:
        return None, text
    body = ARITHMETIC_NAME.sub(lambda m: str(values.get(m.group(1) or m.group(2), m.group(0))), match.group(1))
    shown = f"$(({body}))"
    if not re.fullmatch(r"[\d\s+\-*/%()]+", body):
        return None, shown
    try:
        tree = ast.parse(body.replace("/", "//"), mode="eval")
    except SyntaxError:
        return None, shown
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv,
               ast.Mod, ast.USub, ast.UAdd)
    if not all(isinstance(node, allowed) for node in ast.walk(tree)) or "**" in body:
        return None, shown
    try:
        value = eval(compile(tree, "<arithmetic>", "eval"), {"__builtins__": {}})  # numbers and + - * // % only
    except (ZeroDivisionError, OverflowError, ValueError):
        return None, shown
    return (value, shown) if isinstance(value, int) and abs(value) < 10 ** 9 else (None, shown)


def gpu_count(text: str) -> bool:
    """Whether a run-time count is the node's GPUs (rules/launch.toml `gpu_count_words`: `$SLURM_GPUS_ON_NODE`)."""
    from gpudoctor.knowledge import table

    return any(re.fullmatch(pattern, text.strip().strip('"')) for pattern in table("launch").get("gpu_count_words", []))


def _count_entry(name: str, line: int, value: Optional[Word], option: str, default: object,
                 default_source: str) -> dict:
    """The launcher entry: ranks per node from `option`'s value, else the launcher's default."""
    if value is None:
        return {"name": name, "line": line, "ranks_per_node": default, "source": default_source}
    entry = {"name": name, "line": _line_of(value, line), "source": f"{option} {value[0]}"}
    if value[1] and value[0] in ("gpu", "auto") and name != "accelerate" or not value[1] and gpu_count(value[0]):
        entry["ranks_per_node"] = "gpu"
    else:
        entry["ranks_per_node"], unresolved = _count(value)
        if unresolved:
            entry["unresolved"] = unresolved
    return entry


def _hidden(entry: dict, words: Sequence[Word], index: int, options: dict, option: str) -> None:
    """`torchrun ${DIST_ARGS[@]} train.py`: a run-time word where the options or the script are may hold `option`,
    so the launcher's default count is not known to apply (a word ending in .py is taken for the script)."""
    if option.replace("_", "-") not in options and index < len(words) and not words[index][1] \
            and not words[index][0].endswith(".py"):
        entry.update(ranks_per_node=None, unresolved=words[index][0],
                     source=f"{words[index][0]} (may hold {option})", line=_line_of(words[index], entry["line"]))


def _nodes(entry: dict, value: Optional[Word], option: str) -> None:
    """The nodes a launcher waits for at its rendezvous (`--nnodes 2`, the minimum of `--nnodes 1:4`), when literal."""
    if value is not None and value[1] and re.fullmatch(r"\d+(:\d+)?", value[0].strip()):
        entry["nodes"] = {"count": int(value[0].split(":")[0]), "what": f"{option} {value[0]}",
                          "line": _line_of(value, entry["line"])}


def _rendezvous(entry: dict, options: dict, address: Tuple[str, ...], rank: Tuple[str, ...]) -> None:
    """Where the nodes meet (`--rdzv_endpoint HOST:PORT`, `--master_addr HOST`, accelerate's `--main_process_ip`)
    and this node's rank (`--node_rank 0`), when they are literal."""
    for option in address:
        value = options.get(option)
        if value is not None and value[1]:
            text = value[0].strip()
            host = text.rsplit(":", 1)[0] if option == "--rdzv-endpoint" and text.count(":") == 1 else text
            entry["rendezvous"] = {"host": host.strip("[]"), "what": f"{option} {text}",
                                   "line": _line_of(value, entry["line"])}
            break
    for option in rank:
        node_rank, _ = _count(options.get(option))
        if option in options:
            entry["node_rank"] = node_rank  # None: set at run time (`$SLURM_NODEID`)
            break


def _no_python(entry: dict, options: dict) -> None:
    """`--no-python`: the launcher runs its script argument as an executable, not with Python."""
    if "--no-python" in options:
        entry["no_python"] = True


def _torchrun(words: Sequence[Word], index: int, line: int, name: str) -> Tuple[dict, Optional[dict]]:
    options, module, index = _options(words, index, TORCHRUN_FLAGS)
    entry = _count_entry(name, line, options.get("--nproc-per-node"), "--nproc_per_node", 1, "default (1)")
    _nodes(entry, options.get("--nnodes"), "--nnodes")
    _rendezvous(entry, options, ("--rdzv-endpoint", "--master-addr"), ("--node-rank",))
    _no_python(entry, options)
    _hidden(entry, words, index, options, "--nproc_per_node")
    if name == "torch.distributed.launch" and "--use-env" not in options:
        entry["passes_local_rank"] = True  # `--local-rank=N` (torch >= 2.0; `--local_rank=N` before)
    return entry, _script(words, index, line, module)


def _deepspeed(words: Sequence[Word], index: int, line: int) -> Tuple[dict, Optional[dict]]:
    options, module, index = _options(words, index, DEEPSPEED_FLAGS)
    # the deepspeed launcher starts one rank per visible GPU unless told otherwise
    entry = _count_entry("deepspeed", line, options.get("--num-gpus"), "--num_gpus", "gpu",
                         "default (every GPU of the node)")
    chosen = next((o for o in ("--include", "--exclude", "--hostfile") if o in options), None)
    if chosen and "--num-gpus" not in options:
        entry.update(ranks_per_node=None, source=f"{chosen} (the hosts and GPUs come from it)")
        if chosen == "--hostfile" and not {"--include", "--exclude"} & set(options) and options[chosen] \
                and options[chosen][1]:
            entry["config_file"] = options[chosen][0]  # its slots, read where the file is there (readers/launch.py)
    _hidden(entry, words, index, options, "--num_gpus")
    if "--no-local-rank" not in options:
        entry["passes_local_rank"] = True  # `--local_rank=N`
    _no_python(entry, options)
    return entry, _script(words, index, line, module)


def _accelerate(words: Sequence[Word], index: int, line: int) -> Tuple[dict, Optional[dict]]:
    options, module, index = _options(words, index, {f.replace("_", "-") for f in ACCELERATE_FLAGS} | ACCELERATE_FLAGS)
    entry = _count_entry("accelerate", line, options.get("--num-processes"), "--num_processes", None,
                         "its config file (not read)")
    config = options.get("--config-file")
    if config is not None and config[1] and "--num-processes" not in options:
        entry["config_file"] = config[0]  # its num_processes, read where the file is there (readers/follow.py)
    machines, machines_unknown = _count(options.get("--num-machines"))
    _nodes(entry, options.get("--num-machines"), "--num_machines")
    _rendezvous(entry, options, ("--main-process-ip",), ("--machine-rank",))
    _no_python(entry, options)
    _hidden(entry, words, index, options, "--num_processes")
    per_node = entry["ranks_per_node"]
    machine_name = re.fullmatch(r"\$\{?([A-Za-z_]\w*)\}?", (machines_unknown or "").strip())
    if per_node is None and machine_name and entry.get("unresolved"):
        # `--num_processes $((SLURM_NNODES * 4)) --num_machines $SLURM_NNODES`: 4 per machine, however many
        one, _ = arithmetic(entry["unresolved"], {machine_name.group(1): 1})
        two, _ = arithmetic(entry["unresolved"], {machine_name.group(1): 2})
        if one and two == 2 * one:
            entry.pop("unresolved")
            entry.update(ranks_per_node=one, source=entry["source"] + f" over --num_machines {machines_unknown}")
    # --num_processes counts every machine, and how many is run-time
    elif isinstance(per_node, int) and machines_unknown:
        entry.update(ranks_per_node=None, unresolved=machines_unknown)
        entry["source"] += f" over --num_machines {machines_unknown}"
    elif isinstance(per_node, int) and machines and machines > 1:
        entry["ranks_per_node"] = per_node // machines if per_node % machines == 0 else None
        entry["source"] += f" over {machines} machines"
    return entry, _script(words, index, line, module)


def _python(words: Sequence[Word], index: int, line: int, launchers: List[dict]) -> Optional[dict]:
    while index < len(words) and words[index][0].startswith("-"):
        text = words[index][0]
        if text == "-m" and index + 1 < len(words):
            module = words[index + 1][0]
            if module in TORCHRUN_MODULES:
                name = "torch.distributed.launch" if module.endswith("launch") else "torchrun"
                return _finish(launchers, *_torchrun(words, index + 2, line, name))
            return {"launchers": launchers + [{"name": "python", "line": line, "ranks_per_node": 1}],
                    "script": {"module": module, "path": None, "line": line}}
        if text == "-c":
            return None
        index += 2 if text in PYTHON_VALUE_FLAGS else 1
    script = _script(words, index, line)
    if script is None:
        return None
    return {"launchers": launchers + [{"name": "python", "line": line, "ranks_per_node": 1}], "script": script}
