"""DeepSpeed ``ds_report`` (``python -m deepspeed.env_report``): the op table and the general environment block.

Meaning of the lines (from deepspeed/env_report.py):
- ``ninja .... [OKAY]`` / ``[FAIL]``: whether the ``ninja`` Python package imports (needed to JIT-build ops).
- ``op .... [YES]/[NO] .... [OKAY]/[NO]``: pre-built (installed) and compatible (JIT-buildable here).
- ``torch cuda version`` is ``torch.version.cuda``; ``nvcc version`` is ``$CUDA_HOME/bin/nvcc -V`` (the toolkit
  DeepSpeed builds ops with); ``[FAIL] nvcc missing`` / ``[FAIL] cannot find CUDA_HOME`` mean there is none;
  ``None`` there means a ROCm build (nvcc not looked at).
- ``deepspeed info``: ``version, git hash, git branch``.
- ``deepspeed wheel compiled w.``: ``torch X.Y, cuda X.Y`` (``hip`` on ROCm) that the installed ops were built
  with; ``torch 0.0, cuda 0.0`` is a JIT/dev install (no ops pre-built), not an error. Kept as printed.
- ``shared memory (/dev/shm) size``: ``human_readable_size`` divides by 1024 per step and labels the result
  KB/MB/GB/TB, so ``125.77 GB`` is 125.77 GiB; it is rounded to 2 decimals, hence ``host.shm_bytes`` is exact to
  about 0.005 of the unit (±5 MiB for a size in GB). ``UNKNOWN`` leaves it unknown.
"""

from __future__ import annotations

import re
from typing import Callable, Dict, Optional, Tuple

from gpudoctor.knowledge import major_minor
from gpudoctor.units import find as size_bytes

from ._common import Builder, first_version
from .normalize import Lines

_OP_ROW = re.compile(r"([A-Za-z0-9_]{1,60})[ \t]*\.{1,80}[ \t]*\[(YES|NO|OKAY|FAIL)\][ \t]*\.{0,80}[ \t]*"
                     r"\[(YES|NO|OKAY|FAIL)\]")
_NINJA = re.compile(r"ninja[ \t]*\.{1,80}[ \t]*\[(OKAY|FAIL|NO|YES)\]", re.I)
_ENV_KEYS = (
    ("torch install path", "torch_path"),
    ("torch version", "torch_version"),
    ("deepspeed install path", "ds_path"),
    ("deepspeed info", "ds_info"),
    ("torch cuda version", "torch_cuda"),
    ("torch hip version", "torch_hip"),
    ("nvcc version", "nvcc"),
    ("deepspeed wheel compiled w.", "wheel"),
    ("shared memory (/dev/shm) size", "shm"),
    ("torch_npu version", "npu"),
)
_DOTS = re.compile(r"[ \t]*\.{2,80}[ \t]*")
_WHEEL_PART = re.compile(r"(torch|cuda|hip)[ \t]+([0-9][\w.+\-]{0,30})", re.I)


def parse(lines: Lines, name: str) -> Builder:
    builder = Builder(name, lines, "ds_report")
    ops = _Ops()
    env: Dict[str, Tuple[str, int]] = {}
    for i, s in enumerate(lines.lines):
        if ".." not in s:  # every line read here has a run of dots (the op table, ninja, the env block)
            if "DeepSpeed" in s and ("op report" in s or "environment info" in s):
                builder.touch(i)
            continue
        s = s.strip()
        if len(s) <= 2000 and not _ninja(builder, s, i) and not ops.row(s, i):
            _env_line(env, s, i)
    if ops.installed:
        builder.set("torch.deepspeed.installed_ops", ops.installed, ops.first)
        builder.set("torch.deepspeed.compatible_ops", ops.compatible, ops.first)
    _env_block(builder, env)
    return builder


def _ninja(builder: Builder, s: str, i: int) -> bool:
    """`ninja .... [OKAY]`: whether the ninja package imports; whether the line was that."""
    m = _NINJA.match(s) if s.lower().startswith("ninja") else None
    if m:
        ok = m.group(1).upper() in ("OKAY", "YES")
        builder.set("torch.ninja", "ninja" if ok else None, i,
                    f"ds_report: the ninja package {'imports' if ok else 'is missing'}")
    return m is not None


class _Ops:
    """The op table: each op's installed and compatible flags (the first row of an op wins)."""

    def __init__(self) -> None:
        self.installed: Dict[str, bool] = {}
        self.compatible: Dict[str, bool] = {}
        self.first: Optional[int] = None

    def row(self, s: str, i: int) -> bool:
        """Read `op .... [YES] .... [OKAY]`; whether the line was a row of the table (its header included)."""
        m = _OP_ROW.match(s) if "[" in s else None
        if m is None:
            return False
        op = m.group(1)
        if op.lower() not in ("op", "ninja") and op not in self.installed:
            self.installed[op] = m.group(2) == "YES"
            self.compatible[op] = m.group(3) in ("OKAY", "YES")
            self.first = i if self.first is None else self.first
        return True


def _env_line(env: Dict[str, Tuple[str, int]], s: str, i: int) -> None:
    """`torch version .................... 2.1.0+cu121`: the first value of each key of the env block."""
    low = s.lower()
    key, field = next(((key, field) for key, field in _ENV_KEYS if low.startswith(key)), ("", ""))
    m = _DOTS.match(s, len(key)) if key else None
    if m and field not in env:
        env[field] = (s[m.end():].strip(), i)


def _torch_version(builder: Builder, v: str, i: int) -> None:
    builder.set("torch.version", v.split()[0], i)
    builder.set("torch.status", "ok", i)


def _torch_cuda(builder: Builder, v: str, i: int) -> None:
    if v.strip().lower() == "none":
        builder.set("torch.cuda", None, i, "CPU-only or ROCm build")
    elif major_minor(v):
        builder.set("torch.cuda", major_minor(v), i)


def _torch_hip(builder: Builder, v: str, i: int) -> None:
    if v.strip().lower() == "none":
        builder.set("torch.hip", None, i)
    elif first_version(v) or major_minor(v):
        builder.set("torch.hip", v.split()[0], i)


def _nvcc(builder: Builder, v: str, i: int) -> None:
    low = v.lower()
    if "cannot find cuda_home" in low:
        builder.set("nvcc.version", None, i, "DeepSpeed found no CUDA toolkit")
        builder.set("nvcc.cuda_home", None, i, "torch.utils.cpp_extension.CUDA_HOME is None")
    elif "nvcc missing" in low or "[fail]" in low:
        builder.set("nvcc.version", None, i, "DeepSpeed found no nvcc under CUDA_HOME")
    elif low.strip() != "none" and major_minor(v):
        builder.set("nvcc.version", major_minor(v), i, "DeepSpeed's $CUDA_HOME/bin/nvcc")


def _ds_info(builder: Builder, v: str, i: int) -> None:
    ver = v.split(",")[0].strip()
    if ver and ver[0].isdigit():
        builder.set("torch.deepspeed.version", ver.split()[0], i)


def _wheel(builder: Builder, v: str, i: int) -> None:
    for m in _WHEEL_PART.finditer(v):
        key = {"torch": "wheel_torch", "cuda": "wheel_cuda", "hip": "wheel_hip"}[m.group(1).lower()]
        builder.set("torch.deepspeed." + key, m.group(2).rstrip(","), i,
                    "ops compiled with this torch/CUDA; 0.0 = JIT/dev install" if m.group(2).startswith("0.0")
                    else None)


def _shm(builder: Builder, v: str, i: int) -> None:
    size = size_bytes(v)
    if size is not None:
        builder.set("host.shm_bytes", size, i, "DeepSpeed prints binary units (GB = GiB), rounded to 2 decimals")


# The env block's fields that give facts, each with its reader, in the order the facts are set
_ENV_READERS: Tuple[Tuple[str, Callable[[Builder, str, int], None]], ...] = (
    ("torch_version", _torch_version), ("torch_cuda", _torch_cuda), ("torch_hip", _torch_hip), ("nvcc", _nvcc),
    ("ds_info", _ds_info), ("wheel", _wheel), ("shm", _shm),
)


def _env_block(builder: Builder, env: Dict[str, Tuple[str, int]]) -> None:
    for field, read in _ENV_READERS:
        value, i = env.get(field, ("", 0))
        if value:
            read(builder, value, i)
    touched = [idx for (_, idx) in env.values()]
    if touched:
        builder.touch(min(touched))
