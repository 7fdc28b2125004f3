"""Which tool outputs a pasted text contains, in the order they appear.

A text may hold several (an ``nvidia-smi`` screen followed by ``pip show torch``, a ``collect_env`` dump with a
``ds_report`` below it). Detection only decides which parsers run; each parser then reads the parts it
recognises and ignores the rest, so parts may come in any order and be interleaved with prose.
All patterns are anchored or start with a literal and use ``[ \\t]`` rather than ``\\s`` in multi-line mode,
so a search stays linear even on a 50 MB text.
"""

from __future__ import annotations

import re
from typing import Dict, List, Pattern, Tuple

from .normalize import Lines

# kind -> patterns searched in the normalised text; the earliest match orders the kinds.
MARKERS: Dict[str, Tuple[Pattern[str], ...]] = {
    "collect_env": (
        re.compile(r"Collecting environment information"),
        re.compile(
            r"(?mi)^[ \t]*(?:[-*][ \t]+)?(?:PyTorch version|CUDA used to build PyTorch|ROCM used to build PyTorch"
            r"|Is CUDA available|GPU models and configuration|Nvidia driver version|CUDA runtime version"
            r"|Versions? of relevant libraries)[ \t]*:"
        ),
    ),
    "ds_report": (
        re.compile(r"DeepSpeed C\+\+/CUDA extension op report|DeepSpeed general environment info"),
        re.compile(
            r"(?mi)^[ \t]*(?:torch version|deepspeed info|torch cuda version|nvcc version|deepspeed wheel compiled w\."
            r"|shared memory \(/dev/shm\) size)[ \t]*\.{3,}"
        ),
        re.compile(r"(?m)^[ \t]*[A-Za-z0-9_]{1,60}[ \t]*\.{1,60}[ \t]*\[(?:YES|NO)\]"),
    ),
    "nvidia_smi_xml": (re.compile(r"<nvidia_smi_log\b"),),
    "nvidia_smi_q": (
        re.compile(r"=+NVSMI LOG=+"),
        re.compile(r"(?m)^[ \t]*(?:Driver Version|KMD Version|Attached GPUs)[ \t]+:"),
    ),
    "nvidia_smi": (
        re.compile(r"NVIDIA-SMI[ \t]+\d"),
        re.compile(r"Driver Version:[ \t]*\d"),
        re.compile(r"(?m)^[ \t]*\|[ \t]+GPU[ \t]+Name\b"),
        re.compile(r"(?m)^[ \t]*GPU[ \t]+\d{1,3}:[^\n]{1,300}\(UUID:[ \t]*GPU-"),
    ),
    "nvidia_smi_error": (
        re.compile(r"Failed to initialize NVML", re.I),
        re.compile(r"couldn.{0,2}t[ \t\n]{1,20}communicate[ \t\n]{1,20}with[ \t\n]{1,20}the[ \t\n]{1,20}NVIDIA"
                   r"[ \t\n]{1,20}driver", re.I),
        re.compile(r"No devices were found"),
        re.compile(r"NVIDIA-SMI couldn.{0,2}t find libnvidia-ml", re.I),
        re.compile(r"Unable to determine the device handle for GPU", re.I),
    ),
    "nvcc": (
        re.compile(r"Cuda compilation tools,[ \t]*release"),
        re.compile(r"Cuda compiler driver"),
    ),
    "pip_show": (
        re.compile(r"(?mi)^[ \t]*Name:[ \t]*(?:torch|pytorch|deepspeed|nvidia-nccl-cu\d{2})[ \t]*$"),
        re.compile(r"Package\(s\) not found:"),
    ),
    "torch_warning": (
        re.compile(r"found version[ \t\n]{1,5}\d{4,6}"),
        re.compile(r"driver on your system is too old", re.I),
        re.compile(r"Found no NVIDIA driver on your system", re.I),
    ),
}


def detect(lines: Lines) -> List[str]:
    """The kinds of tool output present in the text, earliest first (torch warnings are a hint, listed last)."""
    text = lines.text
    found = []
    for kind, patterns in MARKERS.items():
        best = -1
        for pat in patterns:
            m = pat.search(text)
            if m and (best < 0 or m.start() < best):
                best = m.start()
        if best >= 0:
            found.append((1 if kind == "torch_warning" else 0, best, kind))
    found.sort()
    return [kind for _, _, kind in found]
