"""The CUDA a job gets, as the driver, toolkit and DeepSpeed rules read it: torch's CUDA runtime and the toolkits
the nvcc probe found, their paths resolved as the probe recorded them."""

from __future__ import annotations

import posixpath
from typing import Optional

from gpudoctor.facts import MissingFact
from gpudoctor.knowledge import major_minor


def require_torch(facts) -> None:
    """A torch that is not installed or does not import has no build to judge: the rule is unknown (GD110/GD108
    say why), never passed."""
    if facts.get("torch.status", "ok") in ("missing", "broken"):
        raise MissingFact("torch.cuda")


def torch_cuda(facts) -> Optional[str]:
    """torch's CUDA runtime (major.minor); None for CPU and ROCm builds. Unknown when torch is missing or broken."""
    require_torch(facts)
    if facts.get("torch.hip", None):
        return None
    cuda = facts.get("torch.cuda")
    if isinstance(cuda, str) and cuda.isdigit():
        return cuda
    return major_minor(cuda)


def resolved(facts, path: str) -> str:
    """The directory with symlinks resolved as the nvcc probe recorded it (`nvcc.realpaths`), else as written."""
    return posixpath.normpath((facts.get("nvcc.realpaths", None) or {}).get(path) or path)


def toolkit_version_at(facts, root: str) -> Optional[str]:
    real = resolved(facts, root)
    for toolkit in facts.get("nvcc.toolkits", []):
        if resolved(facts, toolkit.get("path") or "") == real:
            return major_minor(toolkit.get("version"))
    return None
