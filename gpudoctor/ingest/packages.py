"""Package lists: ``pip list``, ``pip freeze`` and ``conda list`` (and the ``[pip3]``/``[conda]`` lines of
collect_env, which calls ``record`` here): torch and its CUDA build, DeepSpeed, and the ``nvidia-*`` CUDA wheels
(cuDNN, cuBLAS, NCCL …) torch loads from site-packages.

    Package                  Version                 pip list (a header, a dashed rule, then rows)
    torch                    2.3.0+cu121
    torch==2.3.0+cu121                               pip freeze
    # Name        Version       Build                       Channel     conda list
    pytorch       2.1.0         py3.10_cuda11.8_cudnn8.7.0_0 pytorch

A conda ``pytorch`` build string names its CUDA (``cuda11.8``) or ``cpu``; a pip version's ``+cu121`` tag is read
by parse_report. ``torch.cuda_wheels`` keeps the ``nvidia-*-cuXX`` wheels by library (``cudnn``, ``cublas``,
``nccl``, ``cuda_runtime`` …), what GD111 compares with the libraries found on the library path.
"""

from __future__ import annotations

import re
from typing import Optional

from gpudoctor.knowledge import major_minor

from ._common import Builder, raw_lines
from .normalize import MAX_LINE, Lines

_FREEZE = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.\-]{0,100})[ \t]*==[ \t]*([0-9][\w.+!\-]{0,60})[ \t]*$")
_ROW = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.\-]{0,100})[ \t]+([0-9][\w.+!\-]{0,60})(?:[ \t]+(\S{1,100}))?"
                  r"(?:[ \t]+(\S{1,60}))?[ \t]*$")
_PIP_HEADER = re.compile(r"Package[ \t]+Version\b")
_CONDA_HEADER = re.compile(r"#[ \t]*Name[ \t]+Version[ \t]+Build\b")
_NVIDIA_WHEEL = re.compile(r"nvidia-([a-z_\-]{2,40}?)-cu(\d{2})$")
_CONDA_CUDA = re.compile(r"cuda(\d{1,2}\.\d{1,2})")
_TORCH_NAMES = ("torch", "pytorch")


def record(builder: Builder, pkg: str, version: str, idx: Optional[int], build: Optional[str] = None) -> None:
    """The facts one installed package states."""
    pkg = pkg.lower().replace("_", "-")
    wheel = _NVIDIA_WHEEL.match(pkg)
    if wheel:
        library = wheel.group(1).replace("-", "_")
        builder.set(f"torch.cuda_wheels.{library}", version, idx, f"the {pkg} wheel")
        if library == "nccl":
            builder.set("torch.nccl", version, idx, "NCCL wheel torch loads")
    elif pkg == "deepspeed":
        builder.set("torch.deepspeed.version", version, idx)
    elif pkg in ("torchvision", "torchaudio") and not builder.has(f"torch.{pkg}"):  # pip's and conda's, once
        builder.set(f"torch.{pkg}", version, idx, "from the package list")
    elif pkg in _TORCH_NAMES and not builder.has("torch.version"):
        builder.set("torch.version", version, idx, "from the package list")
        builder.set("torch.status", "ok", idx)
        builder.set("torch.imported", False, idx, "a package list: installed, not imported")
        if build and not builder.has("torch.cuda"):
            cuda = _CONDA_CUDA.search(build)
            if cuda:
                builder.set("torch.cuda", major_minor(cuda.group(1)), idx, "inferred from the conda build string")
            elif "cpu" in build.split("_"):
                builder.set("torch.cuda", None, idx, "inferred from the conda build string (CPU-only)")


def parse(lines: Lines, name: str) -> Builder:
    builder = Builder(name, lines, "package_list")
    table = None  # "pip" or "conda" while inside a listed table
    for i, line in raw_lines(lines):  # conda's `# Name …` header is a comment, not a root prompt
        s = line.strip()[:MAX_LINE]
        if not s:
            table = None
            continue
        if _PIP_HEADER.match(s):
            table = "pip"
            continue
        if _CONDA_HEADER.match(s):
            table = "conda"
            continue
        if s[0] in "#-[":
            continue
        if "==" in s:
            m = _FREEZE.match(s)
            if m:
                record(builder, m.group(1), m.group(2), i)
            continue
        if table:
            m = _ROW.match(s)
            if not m:
                table = None
                continue
            record(builder, m.group(1), m.group(2), i, m.group(3) if table == "conda" else None)
    return builder
