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
    b = Builder(name, lines, "pip_show")
    L = lines.lines
    n = len(L)
    for i in range(n):
        s = L[i].strip()
        if s.startswith("Name:"):
            m = _NAME.match(s)
            if not m:
                continue
            pkg = m.group(1).lower().replace("_", "-")
            version = None
            vi = ri = None
            for j in range(i + 1, min(i + 20, n)):
                t = L[j].strip()
                if not t or t.startswith("Name:") or t == "---":
                    break
                if _VERSION.match(t) and version is None:
                    version, vi = _VERSION.match(t).group(1), j
                elif t.startswith("Requires:"):
                    ri = j
            if version is None:
                continue
            if pkg in ("torch", "pytorch"):
                b.set("torch.version", version, vi)
                b.set("torch.status", "ok", vi)
                _infer_cuda_from_requires(b, version, ri)
            elif pkg == "deepspeed":
                b.set("torch.deepspeed.version", version, vi)
            elif pkg.startswith("nvidia-nccl-cu"):
                b.set("torch.nccl", version, vi, "NCCL wheel torch loads")
        elif "Package(s) not found" in s:
            m = _NOT_FOUND.search(s)
            if not m:
                continue
            missing = [p.strip().lower() for p in m.group(1).split(",")]
            if "torch" in missing:
                b.set("torch.status", "missing", i, "pip show found no torch")
            if "deepspeed" in missing:
                b.set("torch.deepspeed.version", None, i, "pip show found no deepspeed")
    return b


def _infer_cuda_from_requires(b: Builder, version: str, ri) -> None:
    """PyPI's Linux torch wheel requires nvidia-cuda-runtime-cu12 and friends: a CUDA 12 build (major only)."""
    if ri is None or "+" in version:
        return  # a local tag says more; parse_report reads it
    m = _REQUIRES.match(b.lines.lines[ri].strip())
    majors = sorted(set(_NVIDIA_CU.findall(m.group(1).lower()))) if m else []
    if len(majors) == 1:
        b.set("torch.cuda", str(int(majors[0])), ri,
              "inferred from the nvidia-*-cu%s wheels torch requires: PyPI's CUDA %d build, minor version not "
              "shown" % (majors[0], int(majors[0])))
