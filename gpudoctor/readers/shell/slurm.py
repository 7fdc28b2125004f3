"""SLURM's share of the launch model: `#SBATCH` directives, the tasks `srun` starts per node, the GPUs a node gets
(and the GPUs a PBS Pro `#PBS -l select=…:ngpus=N` or LSF `#BSUB -gpu "num=N"` directive gives a node).

Defaults follow sbatch(1)/srun(1): without a task count, srun starts one task per node of the allocation; `--gres=gpu:N`
and `--gpus-per-node=N` count per node, `--gpus-per-task=N` per task, `--gpus=N` for the whole job (per node only
when the node count is given and divides it). A value that is not a literal (`$SLURM_GPUS_ON_NODE`) is unknown.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from gpudoctor.redact import cut
from gpudoctor.spelling import one_slip

SHORT = {"-N": "--nodes", "-n": "--ntasks", "-G": "--gpus", "-c": "--cpus-per-task", "-p": "--partition"}
Value = Tuple[str, int, bool]  # (text, line, known)


class Directives:
    """The `#SBATCH` lines of one batch script, as the script's one shell walk meets them: `options` of the leading
    comment block (sbatch stops reading them at the first command) and `ignored`, the lines sbatch never reads:
    after the first command (`{"line", "text", "first_command"}`) or misspelt (`{"line", "text", "misspelt": true}`);
    at most 20. Here-document bodies (a batch script this one writes) never reach it."""

    def __init__(self) -> None:
        self.options: Dict[str, Value] = {}
        self.ignored: List[dict] = []
        self.first: Optional[dict] = None
        self.other: List[Tuple[str, int]] = []  # the leading block's `#PBS`/`#BSUB` lines (`other_gpus`)

    def read(self, words: list, line: int) -> None:
        """The words of one `#SBATCH` line of the leading block (`-N 2`, `--gres=gpu:4`, `-G4` …)."""
        index = 0
        while index < len(words):
            word = words[index]
            name, value = word.text, None
            if name.startswith("--") and "=" in name:
                name, value = name.split("=", 1)
            elif name in SHORT or name.startswith("--"):
                if index + 1 < len(words) and not words[index + 1].text.startswith("-"):
                    value = words[index + 1].text
                    index += 1
            elif re.match(r"^-[NnGcp]\S+$", name):
                name, value = name[:2], name[2:]
            name = SHORT.get(name, name)
            if value is not None:
                self.options[name] = (value, line, not word.dynamic)
            index += 1

    def command(self, line: int, text: str) -> None:
        """The script's first command (`text`: its line)."""
        self.first = {"line": line, "text": cut(text.strip(), 60)}

    def comment(self, text: str, line: int, own_line: bool) -> None:
        """A comment (`text`: after its `#`), `own_line` when nothing comes before it on its line."""
        shown = ("#" + text).strip()
        if self.first is None and re.match(r"^#(?:PBS|BSUB)\s", shown) and len(self.other) < 50:
            self.other.append((shown, line))
        if len(self.ignored) >= 20:
            return
        if self.first is None and _misspelt(shown):
            self.ignored.append({"line": line, "text": cut(shown, 80), "misspelt": True})
        elif self.first is not None and own_line and re.match(r"^#SBATCH\s", shown):
            self.ignored.append({"line": line, "text": cut(shown, 80), "first_command": dict(self.first)})


PBS_SELECT = re.compile(r"^#PBS\s+-l\s+(?:\S*,)?select=(\d+)\S*?:ngpus=(\d+)")
LSF_GPU = re.compile(r"^#BSUB\s+-gpu\s+[\"']?(?:\S*:)?num=(\d+)")


def other_gpus(lines: List[Tuple[str, int]]) -> Optional[dict]:
    """The GPUs a node gets from the PBS Pro or LSF directives of the leading block: `#PBS -l select=1:ngpus=4` (GPUs
    per chunk: per node for one chunk or with `place=scatter`, else unknown, as chunks may share a node) or
    `#BSUB -gpu "num=4"` (per host, LSF's default)."""
    scatter = any(re.search(r"\bplace=scatter", text) for text, _ in lines)
    for text, number in lines:
        match = PBS_SELECT.match(text)
        if match:
            found = {"count": int(match.group(2)), "line": number, "what": cut(text, 80)}
            if match.group(1) == "1" or scatter:
                return found
            return dict(found, count=None, unresolved="PBS chunks may share a node (no place=scatter)")
        match = LSF_GPU.match(text)
        if match:
            return {"count": int(match.group(1)), "line": number, "what": cut(text, 80)}
    return None


def _misspelt(line: str) -> bool:
    """`#SBATCh --gres=gpu:4`, `#sbatch …`, `#SBTACH …`: a directive sbatch does not recognise (it reads `#SBATCH`
    exactly). `# SBATCH` and `##SBATCH` are how directives are switched off on purpose: not these."""
    match = re.match(r"^#([A-Za-z]{5,7})\s+-", line)
    if match is None:
        return False
    return match.group(1) != "SBATCH" and (match.group(1).upper() == "SBATCH"
                                           or one_slip(match.group(1).upper(), "SBATCH"))


def _int(value: Optional[str]) -> Optional[int]:
    return int(value) if value is not None and re.fullmatch(r"\d+", value.strip()) else None


# srun options whose value is the allocation's own (`srun --ntasks-per-node=$SLURM_NTASKS_PER_NODE`): the same as
# leaving them out, which srun reads from the SLURM_* variables sbatch sets (srun(1), INPUT ENVIRONMENT VARIABLES)
INHERITED = {"--ntasks-per-node": ("SLURM_NTASKS_PER_NODE",), "--ntasks": ("SLURM_NTASKS", "SLURM_NPROCS"),
             "--nodes": ("SLURM_NNODES", "SLURM_JOB_NUM_NODES")}


def _own(srun: Dict[str, str]) -> Dict[str, str]:
    """srun's options less those that only repeat the allocation's value."""
    return {name: value for name, value in srun.items()
            if re.sub(r"^\$\{?(\w+)\}?$", r"\1", value.strip()) not in INHERITED.get(name, ())}


def tasks_per_node(srun: Dict[str, str], batch: Dict[str, Value]) -> Tuple[Optional[int], str]:
    """(tasks srun starts on each node, where that comes from); None when it depends on the run."""
    srun = _own(srun)
    for label, options in (("srun", srun), ("#SBATCH", {k: v[0] for k, v in batch.items()})):
        if "--ntasks-per-node" in options:
            value = _int(options["--ntasks-per-node"])
            return value, f"{label} --ntasks-per-node={options['--ntasks-per-node']}"
        if "--ntasks" in options:
            tasks = _int(options["--ntasks"])
            nodes_text = srun.get("--nodes") or (batch.get("--nodes") or (None,))[0]
            nodes = _int(nodes_text) if nodes_text else None
            if tasks is not None and nodes and tasks % nodes == 0:
                return tasks // nodes, f"{label} --ntasks={tasks} over --nodes={nodes}"
            if tasks is not None and nodes_text is None and tasks == 1:
                return 1, f"{label} --ntasks=1"
            return None, f"{label} --ntasks={options['--ntasks']} (spread over nodes as SLURM decides)"
    return 1, "srun's default: one task per node"


def nodes(batch: Dict[str, Value]) -> Optional[dict]:
    """The nodes the batch script is given (`#SBATCH --nodes=2`; the minimum of `--nodes=2-4`), when literal."""
    text, line, known = batch.get("--nodes") or ("", 0, False)
    match = re.fullmatch(r"(\d+)(?:-\d+)?", text.strip()) if known else None
    if not match:
        return None
    return {"count": int(match.group(1)), "line": line, "what": f"#SBATCH --nodes={text}"}


def gpu_count(spec: str) -> Optional[int]:
    """GPUs in a gres or gpus value: `gpu:4`, `gpu:a100:4`, `gpu` (1), `a100:4`, `4`, a comma list of gres."""
    for item in spec.split(","):
        parts = item.strip().split(":")
        if parts[0] in ("gpu", "gres/gpu"):
            if len(parts) == 1:
                return 1
            count = parts[-1].split("(")[0]
            return _int(count) if count.isdigit() else (1 if len(parts) == 2 else None)
    return None


def gpus_per_node(srun: Dict[str, str], batch: Dict[str, Value], tasks: Optional[int],
                  srun_line: Optional[int]) -> Optional[dict]:
    """{"count", "line", "what", "unresolved"?} for the GPUs each node of the job gets; None when nothing asks."""
    for label, options in (("srun", {k: (v, srun_line, True) for k, v in srun.items()}), ("#SBATCH", batch)):
        for option in ("--gres", "--gpus-per-node", "--gpus-per-task", "--gpus"):
            if option not in options:
                continue
            text, line, known = options[option]
            if option == "--gres" and "gpu" not in text:
                continue
            what = f"{label} {option}={text}"
            count = gpu_count(text if option == "--gres" else ("gpu:" + text)) if known else None
            if count is None:
                return {"count": None, "line": line, "what": what, "unresolved": text}
            if option == "--gpus-per-task":
                if tasks is None:
                    return {"count": None, "line": line, "what": what, "unresolved": "tasks per node unknown"}
                return {"count": count * tasks, "line": line, "what": f"{what} × {tasks} task(s) per node"}
            if option == "--gpus":
                nodes = _int((options.get("--nodes") or batch.get("--nodes") or ("",))[0])
                if not nodes or count % nodes:
                    return {"count": None, "line": line, "what": what,
                            "unresolved": "GPUs for the whole job, spread over nodes as SLURM decides"}
                return {"count": count // nodes, "line": line, "what": f"{what} over {nodes} node(s)"}
            return {"count": count, "line": line, "what": what}
    return None
