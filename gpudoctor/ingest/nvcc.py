"""``nvcc --version`` / ``nvcc -V``.

    nvcc: NVIDIA (R) Cuda compiler driver
    Copyright (c) 2005-2023 NVIDIA Corporation
    Built on Tue_Jun_13_19:16:58_PDT_2023
    Cuda compilation tools, release 12.2, V12.2.91
    Build cuda_12.2.r12.2/compiler.32965470_0

The ``Build`` line exists from CUDA 11 on; before, ``nvcc.build`` stays unknown.
"""

from __future__ import annotations

import re

from gpudoctor.knowledge import major_minor

from ._common import Builder
from .normalize import Lines

_RELEASE = re.compile(r"Cuda compilation tools,[ \t]*release[ \t]+(\d{1,3}\.\d{1,3})(?:,[ \t]*V(\d[\w.]{0,30}))?")
_BUILD = re.compile(r"Build[ \t]+(cuda_[\w.\-/]{1,120})")


def parse(lines: Lines, name: str) -> Builder:
    builder = Builder(name, lines, "nvcc")
    text_lines = lines.lines
    for i in range(len(text_lines)):
        s = text_lines[i].strip()
        if not s.startswith(("Cuda compilation", "Build", "nvcc:")):
            continue
        m = _RELEASE.match(s)
        if m:
            builder.set("nvcc.version", major_minor(m.group(1)), i)
            # The Build line, when there is one, follows within two lines.
            for ahead in range(i + 1, min(i + 3, len(text_lines))):
                bm = _BUILD.match(text_lines[ahead].strip())
                if bm:
                    builder.set("nvcc.build", bm.group(1), ahead)
                    break
            continue
        if s.startswith("nvcc:") and "Cuda compiler driver" in s:
            builder.touch(i)
    return builder
