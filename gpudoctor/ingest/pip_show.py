"""``pip show torch`` (or deepspeed, nvidia-nccl-cu12) blocks, and pip's 'Package(s) not found' warning.

    Name: torch
    Version: 1.11.0+cu113

A ``+cuXXX`` / ``+cpu`` / ``+rocmX.Y`` tag on the torch version tells its build; ``parse_report`` turns it into
``torch.cuda`` (evidence says it is inferred from the wheel tag). Without a tag the CUDA build stays unknown.
"""

from __future__ import annotations

import re

from ._common import Builder
from .normalize import Lines

_NAME = re.compile(r"Name:[ \t]*([A-Za-z0-9_.\-]{1,100})[ \t]*$")
_VERSION = re.compile(r"Version:[ \t]*(\S{1,100})[ \t]*$")
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
            vi = None
            for j in range(i + 1, min(i + 12, n)):
                t = L[j].strip()
                if not t or t.startswith("Name:") or t == "---":
                    break
                vm = _VERSION.match(t)
                if vm:
                    version, vi = vm.group(1), j
                    break
            if version is None:
                continue
            if pkg in ("torch", "pytorch"):
                b.set("torch.version", version, vi)
                b.set("torch.status", "ok", vi)
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
