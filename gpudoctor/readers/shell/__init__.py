"""Shell and sbatch scripts: `parser` (tokens, variables, what reaches the environment), `jobs` (the commands that
start a training script), `slurm` (`#SBATCH` directives). One walk of the script's tokens gives its env, its jobs and
its directives."""

from __future__ import annotations

import re
from pathlib import Path

from gpudoctor.files import is_dotenv
from gpudoctor.readers import TEXT_SUFFIXES
from gpudoctor.readers.file_facts import FileFacts

SHELL_SUFFIXES = {".sh", ".bash", ".zsh", ".ksh", ".sbatch", ".slurm", ".job", ".pbs", ".qsub", ".lsf", ".envrc"}
SHEBANG = re.compile(r"^#!\s*\S*(?:/|env\s+)(?:ba|z|k|da)?sh\b")
SHELL_COMMAND = re.compile(r"(?m)^\s*(?:export\s+[A-Za-z_]\w*=|(?:srun|sbatch|torchrun|mpirun|deepspeed|"
                           r"accelerate\s+launch|python3?\s+-m\s+torch\.distributed)\s|set\s+-[euxo]+\s*$|"
                           r"module\s+load\s)")
SHELL_LINE = re.compile(r"^\s*(?:[A-Za-z_]\w*=|(?:export|unset|srun|sbatch|salloc|torchrun|python3?|mpirun|mpiexec|"
                        r"deepspeed|accelerate|set|module|ml|source|\.|cd|echo|printf|if|then|elif|else|fi|for|while|"
                        r"do|done|case|esac|conda|nvidia-smi|mkdir|cp|mv|rm|ls|exec|wait|trap|sleep|ulimit|apptainer|"
                        r"singularity|docker|podman|enroot|pip3?|bash|sh|hostname|scontrol|local|declare|return|exit|"
                        r"true|false|\[\[?|\{|\}|\w[\w-]*\s*\(\)\s*\{?)(?:\s|$|;))")
PYTHON_LINE = re.compile(r"(?m)^(?:import\s+\w|from\s+[\w.]+\s+import\s|def\s+\w+\(|class\s+\w)")


def detect(path: Path, text: str) -> bool:
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


def read(path: Path, text: str) -> FileFacts:
    from gpudoctor.readers.shell.jobs import read_script

    env, jobs = read_script(text, str(path))
    return FileFacts(env=env, jobs=jobs)
