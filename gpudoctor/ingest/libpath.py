"""Where CUDA libraries are found: ``ldconfig -p`` lines and ``LD_LIBRARY_PATH`` as pasted.

    \tlibcudnn.so.8 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.8     ldconfig -p
    LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/nvidia/lib64                    env, export, vLLM's collect_env
    export LD_LIBRARY_PATH="/usr/local/cuda-11.8/lib64:$LD_LIBRARY_PATH"

Only the CUDA libraries torch also ships as wheels are kept (``host.libraries``: cuDNN, cuBLAS, NCCL, the CUDA
runtime, cuFFT, cuSPARSE …), with the version the file name states (``libcudnn.so.8.9.2`` → 8.9.2; a bare
``libcudnn.so.8`` states only the major).
"""

from __future__ import annotations

import re

from ._common import Builder
from .normalize import Lines

LIBRARIES = {  # soname stem → the nvidia-*-cuXX wheel (torch.cuda_wheels key) that ships it
    "libcudnn": "cudnn", "libcublas": "cublas", "libcublasLt": "cublas", "libnccl": "nccl",
    "libcudart": "cuda_runtime", "libcufft": "cufft", "libcusparse": "cusparse", "libcusolver": "cusolver",
    "libcurand": "curand", "libnvrtc": "cuda_nvrtc", "libnvJitLink": "nvjitlink", "libcupti": "cuda_cupti",
}
_LDCONFIG = re.compile(r"(lib[A-Za-z_]{2,30})\.so(?:\.([\d.]{1,20}))?[ \t]+\([^)]{0,60}\)[ \t]+=>[ \t]+(/\S{1,300})")
_LD_PATH = re.compile(r"(?:export[ \t]+|declare -x[ \t]+)?LD_LIBRARY_PATH[ \t]*[=:][ \t]*[\"']?([^\"'\s]{1,2000})")


def parse(lines: Lines, name: str) -> Builder:
    builder = Builder(name, lines, "library_path")
    found = []
    for i, line in enumerate(lines.lines):
        if "=>" in line:
            m = _LDCONFIG.search(line)
            if m and m.group(1) in LIBRARIES:
                entry = {"name": f"{m.group(1)}.so" + (f".{m.group(2)}" if m.group(2) else ""),
                         "library": LIBRARIES[m.group(1)], "version": m.group(2) or None, "path": m.group(3)}
                if entry not in found:
                    found.append(entry)
                    builder.touch(i)
                    builder.evidence.setdefault(f"host.libraries[{len(found) - 1}]", builder.cite(i))
        elif "LD_LIBRARY_PATH" in line:
            m = _LD_PATH.search(line)
            if m and "/" in m.group(1):
                builder.set("env.LD_LIBRARY_PATH", m.group(1).rstrip(";"), i)
    if found:
        builder.set("host.libraries", found, None, evidence=builder.evidence.get("host.libraries[0]"))
    return builder
