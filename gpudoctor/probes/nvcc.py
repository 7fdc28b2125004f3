"""The CUDA toolkit(s): `nvcc` on PATH, CUDA_HOME/CUDA_PATH, and toolkits installed under /usr/local."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Dict, Optional

from gpudoctor.probes import Probe, ProbeContext
from gpudoctor.probes.command import Deadline, run_command

RELEASE = re.compile(r"release (\d+)\.(\d+)")
BUILD = re.compile(r"^Build (\S+)", re.MULTILINE)
TOOLKIT_GLOB = "/usr/local/cuda*"
DEFAULT_TOOLKIT = "/usr/local/cuda"  # where torch.utils.cpp_extension looks last


def parse_nvcc_version(text: str) -> dict:
    """Version and build tag from `nvcc --version` output."""
    release = RELEASE.search(text)
    build = BUILD.search(text)
    return {
        "version": f"{release.group(1)}.{release.group(2)}" if release else None,
        "build": build.group(1) if build else None,
    }


def _toolkit_version(root: Path, deadline: Deadline) -> Optional[str]:
    """A toolkit's version from version.json / version.txt, else from its own nvcc."""
    try:
        data = json.loads((root / "version.json").read_text())
        version = data.get("cuda", {}).get("version", "")
        if version:
            return ".".join(version.split(".")[:2])
    except (OSError, ValueError, AttributeError):
        pass  # older toolkits have version.txt, newer ones may have neither
    try:
        match = re.search(r"(\d+)\.(\d+)", (root / "version.txt").read_text())
        if match:
            return f"{match.group(1)}.{match.group(2)}"
    except OSError:
        pass  # fall back to asking the toolkit's nvcc
    nvcc = root / "bin" / "nvcc"
    if nvcc.is_file():
        return parse_nvcc_version(run_command([str(nvcc), "--version"], deadline.left(str(nvcc))).stdout)["version"]
    return None


def probe_nvcc(ctx: ProbeContext) -> dict:
    """nvcc on PATH, then each toolkit's version: every command within one deadline of ctx.timeout."""
    deadline = Deadline(ctx.timeout)
    path = shutil.which("nvcc", path=ctx.environ.get("PATH", os.defpath))
    facts: Dict[str, Any] = {"path": path, "version": None, "build": None,
                             "cuda_home": ctx.environ.get("CUDA_HOME"), "cuda_path": ctx.environ.get("CUDA_PATH")}
    if path:
        result = run_command([path, "--version"], deadline.left(path), env=ctx.environ)
        if result.returncode != 0:
            raise RuntimeError(f"{path} --version exited {result.returncode}: {result.stderr.strip()[:200]}")
        facts.update(parse_nvcc_version(result.stdout))
    roots = {os.path.realpath(p) for p in glob.glob(TOOLKIT_GLOB) if os.path.isdir(p)}
    for home in (facts["cuda_home"], facts["cuda_path"]):
        if home and os.path.isdir(home):
            roots.add(os.path.realpath(home))
    facts["toolkits"] = [{"path": root, "version": _toolkit_version(Path(root), deadline)} for root in sorted(roots)]
    facts["realpaths"] = _realpaths(facts)
    return {"nvcc": facts}


def _realpaths(facts: dict) -> dict:
    """The directories the rules compare (CUDA_HOME, CUDA_PATH, the nvcc's toolkit root, /usr/local/cuda) with their
    symlinks resolved on this machine, so that the rules never look at the filesystem themselves."""
    paths = [facts["cuda_home"], facts["cuda_path"], DEFAULT_TOOLKIT]
    if facts["path"]:
        paths.append(os.path.dirname(os.path.dirname(facts["path"])))
    return {path: os.path.realpath(path) for path in paths if path}


PROBE = Probe("nvcc", probe_nvcc, starts_child=True)
