"""How Slurm numbers this node's GPUs: its gres.conf, read as slurmd reads it.

Since Slurm 21.08 the IDs in SLURM_JOB_GPUS / SLURM_STEP_GPUS are GRES indices (src/plugins/gres/common/
gres_common.c writes `gres_device->index`), positions in slurmd's list of the node's GPUs. slurmd sorts that list by
the number that ends each `File=` (gres_gpu.c, `_sort_gpu_by_file`), and GPUs it detects itself (`AutoDetect=nvml`)
by the order NVML enumerates them (`_sort_gpu_by_links_order`: "the order they enumerate on the PCI bus").
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

from gpudoctor.probes import Probe, ProbeContext

DEFAULT_CONF = "/etc/slurm/slurm.conf"
_BRACKET = re.compile(r"^(.*?)\[([^\]]+)\](.*)$")
_SUFFIX = re.compile(r"(\d+)$")


def expand(expression: str) -> List[str]:
    """A hostlist expression with one bracket (`/dev/nvidia[0-3,5]`, `gpu[01-04]`) as its names, in order."""
    match = _BRACKET.match(expression)
    if not match:
        return [expression] if expression else []
    head, ranges, tail = match.groups()
    names = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            return []
        for number in range(int(low), int(high or low) + 1):
            names.append(f"{head}{str(number).zfill(len(low))}{tail}")
    return names


def _fields(line: str) -> dict:
    """`Name=gpu File=/dev/nvidia[0-3]` as {"name": "gpu", "file": "/dev/nvidia[0-3]"} (keys are case-blind)."""
    fields = {}
    for word in line.split():
        key, equals, value = word.partition("=")
        if equals:
            fields[key.lower()] = value
    return fields


def read_gres_conf(text: str, node: str) -> dict:
    """gres.conf's GPU numbering on `node`: `gpu_autodetect` (AutoDetect=nvml, globally or on the node's lines) and
    `gpu_files` (the GPU device files, in the order slurmd sorts them: by their number)."""
    autodetect, files = None, []
    for raw in text.splitlines():
        fields = _fields(raw.split("#", 1)[0])
        if "nodename" in fields and node not in expand(fields["nodename"]):
            continue
        if "autodetect" in fields and fields.get("name", "gpu") == "gpu":
            autodetect = fields["autodetect"].lower()
        listed = fields.get("file") or fields.get("files")
        if fields.get("name") == "gpu" and listed:
            files += expand(listed)
    numbered = [(int(suffix.group(1)) if (suffix := _SUFFIX.search(name)) else -1, name) for name in files]
    return {"gpu_autodetect": None if autodetect in (None, "off") else autodetect,
            "gpu_files": [name for _number, name in sorted(numbered)]}


def gres_conf_path(environ) -> Path:
    """gres.conf beside slurm.conf (SLURM_CONF, which slurmd passes to its Prolog), else /etc/slurm's."""
    return Path(environ.get("SLURM_CONF") or DEFAULT_CONF).with_name("gres.conf")


def probe_slurm(ctx: ProbeContext) -> dict:
    """The `slurm` group: only under Slurm (a job, a step or a Prolog with GPU IDs); {} elsewhere."""
    if not (ctx.environ.get("SLURM_JOB_GPUS") or ctx.environ.get("SLURM_STEP_GPUS")):
        return {}
    import socket  # here: only under Slurm

    path = gres_conf_path(ctx.environ)
    node = ctx.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    try:
        text = path.read_text(errors="replace")[:1_000_000]
    except OSError:
        return {"slurm": {"gres_conf": None}}
    return {"slurm": {"gres_conf": str(path), **read_gres_conf(text, node)}}


PROBE = Probe("slurm", probe_slurm)
