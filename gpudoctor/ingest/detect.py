"""Which tool outputs a pasted text contains, in the order they appear.

A text may hold several (an ``nvidia-smi`` screen followed by ``pip show torch``, a ``collect_env`` dump with a
``ds_report`` below it). Detection only decides which parsers run; each parser then reads the parts it
recognises and ignores the rest, so parts may come in any order and be interleaved with prose.
No pattern starts with ``^[ \\t]*`` or another repeat: each starts with a literal, so the regular expression
engine skips quickly through text that cannot match, and a search stays linear even on a 50 MB text.
"""

from __future__ import annotations

import re
from typing import Dict, List, Pattern, Tuple

from .normalize import Lines

# kind -> patterns searched in the lower-cased text; the earliest match orders the kinds. Every pattern starts
# with a literal, so the engine's fast literal scan does the work (an alternation, or re.IGNORECASE, would
# disable it and cost ten times more on a large text).
def _p(*patterns: str) -> Tuple[Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


MARKERS: Dict[str, Tuple[Pattern[str], ...]] = {
    "collect_env": _p(
        r"collecting environment information", r"pytorch version[ \t]*:", r"cuda used to build pytorch[ \t]*:",
        r"rocm used to build pytorch[ \t]*:", r"is cuda available[ \t]*:", r"gpu models and configuration[ \t]*:",
        r"nvidia driver version[ \t]*:", r"cuda runtime version[ \t]*:", r"relevant libraries[ \t]*:",
    ),
    "ds_report": _p(
        r"deepspeed c\+\+/cuda extension op report", r"deepspeed general environment info",
        r"torch version[ \t]*\.{3}", r"deepspeed info[ \t]*\.{3}", r"torch cuda version[ \t]*\.{3}",
        r"nvcc version[ \t]*\.{3}", r"deepspeed wheel compiled w\.[ \t]*\.{3}",
        r"\][ \t]{0,5}\.{1,60}[ \t]{0,5}\[(?:okay|no|yes|fail)\]",
    ),
    "nvidia_smi_xml": _p(r"<nvidia_smi_log\b"),
    "nvidia_smi_q": _p(r"nvsmi log", r"driver version[ \t]+:", r"kmd version[ \t]+:", r"attached gpus[ \t]+:"),
    "nvidia_smi": _p(
        r"nvidia-smi[ \t]+\d", r"driver version:[ \t]*\d", r"\|[ \t]{1,20}gpu[ \t]{1,20}name\b",
        r"\(uuid:[ \t]*gpu-",
    ),
    "nvidia_smi_error": _p(
        r"failed to initialize nvml",
        r"communicate[ \t\n]{1,20}with[ \t\n]{1,20}the[ \t\n]{1,20}nvidia[ \t\n]{1,20}driver",
        r"no devices were found", r"find libnvidia-ml", r"unable to determine the device handle for gpu",
    ),
    "nvcc": _p(r"cuda compilation tools,[ \t]*release", r"cuda compiler driver"),
    "pip_show": _p(r"name:[ \t]{0,5}(?:torch|pytorch|deepspeed|nvidia-nccl-cu\d{2})[ \t]*(?:\n|$)",
                   r"package\(s\) not found:"),
    "nvidia_smi_topo": _p(r"gpu0[ \t]+gpu1[ \t]", r"gpu0[ \t]+nic0", r"gpu0[ \t]+cpu affinity",
                          r"connection traversing pcie", r"chipset not supported"),
    "nccl_tests": _p(r"# nthread", r"avg bus bandwidth", r"out of bounds values", r"test cuda failure",
                     r"test nccl failure"),
    "env_command": _p(r"- pytorch version", r"- gpu type:", r"`transformers` version", r"`accelerate` version",
                      r"`llamafactory` version"),
    "package_list": _p(r"package[ \t]+version[ \t]*\n", r"# name[ \t]+version[ \t]+build", r"torch==",
                       r"nvidia-cudnn-cu1", r"nvidia-nccl-cu1", r"nvidia-cublas-cu1"),
    "library_path": _p(r"\(libc6", r"ld_library_path"),
    "torch_warning": _p(r"found version[ \t\n]{1,5}\d{4,6}", r"driver on your system is too old",
                        r"found no nvidia driver on your system", r"supports cuda capabilities[ \t]"),
}


def detect(lines: Lines) -> List[str]:
    """The kinds of tool output present in the text, earliest first (torch warnings are a hint, listed last)."""
    low = lines.text.lower()
    found = []
    for kind, patterns in MARKERS.items():
        best = -1
        for pattern in patterns:
            m = pattern.search(low)
            if m and (best < 0 or m.start() < best):
                best = m.start()
        if best >= 0:
            found.append((1 if kind == "torch_warning" else 0, best, kind))
    found.sort()
    return [kind for _, _, kind in found]
