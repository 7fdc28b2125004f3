"""The ``env`` commands of the Hugging Face tools and the projects that copied them: ``transformers env``
(``transformers-cli env``), ``accelerate env``, ``llamafactory-cli env`` and its forks. Each prints
``- Key: value`` lines (transformers/commands/env.py, accelerate/commands/env.py, llamafactory/extras/env.py):

    - PyTorch version (GPU?): 2.0.1+cu117 (True)          transformers before 4.46, accelerate before 1.0
    - PyTorch version (accelerator?): 2.5.1+cu124 (CUDA)  transformers 4.46+
    - PyTorch version: 2.3.0+cu121 (GPU)                  LLaMA-Factory (" (GPU)" only when CUDA is available)
    - GPU type: Tesla V100-SXM2-32GB                      torch.cuda.get_device_name() of device 0
    - GPU number: 8                                       LLaMA-Factory: torch.cuda.device_count()
    - GPU memory: 79.33GB                                 LLaMA-Factory: torch.cuda.mem_get_info()[1] / 1024**3
    - DeepSpeed version: 0.14.0                           "not installed" when absent

``GPU type`` names device 0 only: with ``GPU number`` every device is taken to be that model (evidence says so);
without it how many GPUs there are stays unknown (``nvml.gpus_counted`` false). No health is stated.
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

from gpudoctor.units import find as size_bytes

from ._common import Builder, is_not_collected
from .normalize import Lines

_LINE = re.compile(r"[-*][ \t]+`?([A-Za-z][\w .?()/`-]{1,60}?)`?[ \t]*:[ \t]*(.{0,200})$")
_TORCH = re.compile(r"(\d+\.\d+(?:\.\d+)?(?:[.+][\w.]{1,30})?)[ \t]*(?:\(([^()]{1,20})\))?")
_AVAILABLE = {"true": True, "gpu": True, "cuda": True, "false": False, "na": False, "cpu": False}
_MARKERS = ("pytorch version", "gpu type", "gpu number", "accelerate version", "deepspeed version",
            "`transformers` version", "`accelerate` version", "`llamafactory` version")


def _fields(lines: Lines) -> Dict[str, Tuple[str, int]]:
    """The first value of each `- Key: value` line, by lower-case key."""
    found: Dict[str, Tuple[str, int]] = {}
    for i, line in enumerate(lines.lines):
        s = line.strip()
        if s[:1] not in "-*":
            continue
        m = _LINE.match(s)
        if m:
            found.setdefault(m.group(1).strip().lower(), (m.group(2).strip(), i))
    return found


def _torch(builder: Builder, fields: Dict[str, Tuple[str, int]]) -> Optional[bool]:
    for key in ("pytorch version (gpu?)", "pytorch version (accelerator?)", "pytorch version"):
        if key not in fields:
            continue
        value, i = fields[key]
        m = _TORCH.match(value)
        if not m:
            return None
        builder.set("torch.version", m.group(1), i)
        builder.set("torch.status", "ok", i)
        said = (m.group(2) or "").strip().lower()
        if said in _AVAILABLE:
            builder.set("torch.cuda_available", _AVAILABLE[said], i)
            return _AVAILABLE[said]
        if key == "pytorch version" and "(" not in value and "llamafactory` version" in fields:
            builder.set("torch.cuda_available", False, i, "LLaMA-Factory adds ' (GPU)' when CUDA is available")
            return False
        return None
    return None


def parse(lines: Lines, name: str) -> Builder:
    builder = Builder(name, lines, "env_command")
    fields = _fields(lines)
    if not any(key in fields for key in _MARKERS):
        return builder
    _torch(builder, fields)
    if "deepspeed version" in fields:
        value, i = fields["deepspeed version"]
        shown = None if is_not_collected(value) or value.lower() == "not installed" else value.split()[0]
        builder.set("torch.deepspeed.version", shown, i)
    if "gpu type" in fields:
        gpu_name, i = fields["gpu type"]
        count_text, ci = fields.get("gpu number", ("", None))
        count = int(count_text) if count_text.isdigit() and 0 < int(count_text) <= 64 else None
        gpu: Dict[str, object] = {"index": 0, "name": gpu_name}
        memory = size_bytes(fields.get("gpu memory", ("", 0))[0])  # accelerate env: `79.14GB`, binary
        if memory:
            gpu["memory_total_bytes"] = memory
        if count:
            builder.set("torch.device_count", count, ci)
        else:
            builder.set("nvml.gpus_counted", False, i, "the report names device 0 and not how many GPUs there are")
        gpus = [dict(gpu, index=k) for k in range(count or 1)]
        note = ("torch's device 0; the other devices are taken to be the same model" if count and count > 1
                else "torch's device 0")
        builder.set("nvml.gpus", gpus, i, note)
        builder.set("nvml.health_read", False, i, "names only")
    return builder
