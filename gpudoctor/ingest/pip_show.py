"""``pip show torch`` (or deepspeed, nvidia-nccl-cu12) blocks, and pip's 'Package(s) not found' warning.

    Name: torch
    Version: 1.11.0+cu113

A ``+cuXXX`` / ``+cpu`` / ``+rocmX.Y`` tag on the torch version tells its build; ``parse_report`` turns it into
``torch.cuda`` (evidence says it is inferred from the wheel tag). Without a tag, the ``nvidia-*-cuXX`` wheels in
``Requires:`` (PyPI's Linux CUDA wheel) give the CUDA major, ``torch.cuda = "12"``, marked inferred. A plain
version whose ``Requires:`` names no ``nvidia-*`` wheel is not that wheel (a CPU index, conda or macOS build): the
CUDA build stays unknown, as it does when nothing is said.
"""

from __future__ import annotations

import re

from ._common import Builder
from .normalize import Lines

_NAME = re.compile(r"Name:[ \t]*([A-Za-z0-9_.\-]{1,100})[ \t]*$")
_VERSION = re.compile(r"Version:[ \t]*(\S{1,100})[ \t]*$")
_REQUIRES = re.compile(r"Requires:[ \t]*(.{0,2000})$")
_NVIDIA_CU = re.compile(r"\bnvidia-[a-z0-9\-]{1,40}?-cu(\d{2})\b")
_NOT_FOUND = re.compile(r"(?:WARNING:[ \t]*)?Package\(s\) not found:[ \t]*(.{1,500})$")


def parse(lines: Lines, name: str) -> Builder:
    builder = Builder(name, lines, "pip_show")
    text_lines = lines.lines
    n = len(text_lines)
    for i in range(n):
        s = text_lines[i].strip()
        if s.startswith("Name:"):
            m = _NAME.match(s)
            if not m:
                continue
            pkg = m.group(1).lower().replace("_", "-")
            version = None
            vi = ri = None
            for ahead in range(i + 1, min(i + 20, n)):
                t = text_lines[ahead].strip()
                if not t or t.startswith("Name:") or t == "---":
                    break
                found = _VERSION.match(t)
                if found and version is None:
                    version, vi = found.group(1), ahead
                elif t.startswith("Requires:"):
                    ri = ahead
            if version is None:
                continue
            if pkg in ("torch", "pytorch"):
                builder.set("torch.version", version, vi)
                builder.set("torch.status", "ok", vi)
                builder.set("torch.imported", False, vi, "pip show: installed, not imported")
                _infer_cuda_from_requires(builder, version, ri)
            elif pkg == "deepspeed":
                builder.set("torch.deepspeed.version", version, vi)
            elif pkg.startswith("nvidia-nccl-cu"):
                builder.set("torch.nccl", version, vi, "NCCL wheel torch loads")
        elif "Package(s) not found" in s:
            m = _NOT_FOUND.search(s)
            if not m:
                continue
            missing = [p.strip().lower() for p in m.group(1).split(",")]
            if "torch" in missing:
                builder.set("torch.status", "missing", i, "pip show found no torch")
            if "deepspeed" in missing:
                builder.set("torch.deepspeed.version", None, i, "pip show found no deepspeed")
    return builder


def _infer_cuda_from_requires(builder: Builder, version: str, ri) -> None:
    """PyPI's Linux torch wheel requires nvidia-cuda-runtime-cu12 and friends: a CUDA 12 build (major only)."""
    if ri is None or "+" in version:
        return  # a local tag says more; parse_report reads it
    m = _REQUIRES.match(builder.lines.lines[ri].strip())
    majors = sorted(set(_NVIDIA_CU.findall(m.group(1).lower()))) if m else []
    if len(majors) == 1:
        builder.set("torch.cuda", str(int(majors[0])), ri,
                    f"inferred from the nvidia-*-cu{majors[0]} wheels torch requires: PyPI's CUDA {int(majors[0])} "
                    "build, minor version not shown")
