"""The user's own launch command of a batch script, rewritten to start once per node under srun (GD604, GD610): the
launcher's options and the script's arguments are kept; what must differ per node is left to the rendezvous
(torchrun's c10d, which numbers the nodes itself) or read on each node (`bash -c` for accelerate); the rendezvous
host is the allocation's first node, set in the script when it does not set MASTER_ADDR itself.

torchrun's options: https://pytorch.org/docs/stable/elastic/run.html (`--rdzv-backend=c10d`, `--rdzv-endpoint`);
accelerate's: https://huggingface.co/docs/accelerate/package_reference/cli#accelerate-launch."""

from __future__ import annotations

import re
import shlex
from typing import List, Optional, Tuple

SRUN = "srun --ntasks-per-node=1"
MASTER_ADDR = 'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'
RDZV = "--rdzv_backend=c10d --rdzv_endpoint=$MASTER_ADDR:29500"
TORCHRUN = {"torchrun", "torch.distributed.launch", "torch.distributed.run"}
# options each node sets differently, or that a static rendezvous needs: the c10d rendezvous replaces them
PER_NODE = {"torchrun": ("node_rank", "master_addr", "master_port", "rdzv_backend", "rdzv_endpoint", "rdzv_id"),
            "accelerate": ("machine_rank", "main_process_ip", "main_process_port", "num_machines")}


def shell_word(text: str) -> str:
    """A script argument as the shell should see it again: bare when it is one plain word ($VAR kept live)."""
    if re.fullmatch(r"[\w@%+=:,./${}-]+", text):
        return text
    return f'"{text}"' if not re.search(r'["\\`]', text) else shlex.quote(text)


def _without(options: List[str], names: Tuple[str, ...]) -> List[str]:
    """The launcher's words without the options `names` (`--name=V` or `--name V`, - or _ alike)."""
    pattern = re.compile(r"--(%s)(=.*)?$" % "|".join(n.replace("_", "[-_]") for n in names))
    kept, skip = [], False
    for word in options:
        found = pattern.match(word)
        if skip or found:
            skip = bool(found and not found.group(2))
            continue
        kept.append(word)
    return kept


def per_node(job: dict, gpus: Optional[int]) -> Tuple[str, ...]:
    """The commands that start the job's training on every node: MASTER_ADDR first when the script does not set
    it, then srun with the user's launcher (or torchrun for a plain python) and the script with its arguments."""
    script = job.get("script") or {}
    path = script.get("path") or "train.py"
    command = job.get("command") or ""
    found = re.search(r"(?:^|\s)%s(?=\s|$)" % re.escape(path), command)
    launcher = command[:found.start()].split() if found else []
    target = " ".join([path] + [shell_word(arg) for arg in script.get("args") or []])
    name = (job.get("launchers") or [{}])[0].get("name", "")
    if name in TORCHRUN:
        words = _without(launcher, PER_NODE["torchrun"])
        nodes = [] if any(re.match(r"--nnodes\b", w) for w in words) else ["--nnodes=$SLURM_NNODES"]
        line = " ".join([SRUN] + words + nodes + [RDZV, target])
    elif name == "accelerate":
        words = _without(launcher, PER_NODE["accelerate"]) + [
            "--num_machines $SLURM_NNODES --machine_rank $SLURM_NODEID --main_process_ip $MASTER_ADDR",
            "--main_process_port 29500", target]
        line = f"{SRUN} bash -c {shlex.quote(' '.join(words))}"
    else:  # python train.py: torchrun starts its ranks
        count = gpus if gpus else "NUM_GPUS"
        line = f"{SRUN} torchrun --nnodes=$SLURM_NNODES --nproc_per_node={count} {RDZV} {target}"
    sets = "MASTER_ADDR" in (job.get("env_sets") or ())
    return (line,) if sets else (MASTER_ADDR, line)
