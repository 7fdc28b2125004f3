"""``nvidia-smi topo -m`` (how each pair of GPUs is connected) and ``nvidia-smi topo -p2p r|w|n|a|p`` (whether the
driver allows peer-to-peer between them), found anywhere in a text.

    \tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
    GPU0\t X \tPIX\tSYS\t0-31\t0\t\tN/A
    GPU1\tPIX\t X \tSYS\t0-31\t0\t\tN/A

The cells, as nvidia-smi's legend prints them: ``X`` self, ``NV#`` NVLink (# links), ``PIX`` one PCIe bridge,
``PXB`` several PCIe bridges, ``PHB`` a PCIe host bridge (the CPU), ``NODE`` host bridges within a NUMA node,
``SYS`` across NUMA nodes (QPI/UPI); in a P2P matrix ``OK``, ``NS`` not supported, ``CNS`` chipset not supported,
``GNS`` GPU not supported, ``TNS`` topology not supported, ``DS`` disabled by a regkey, ``U`` unknown. Only the
GPU-to-GPU cells are kept (``nvml.topology``); NIC columns and affinities are left out.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from ._common import Builder
from .normalize import Lines

LINKS = re.compile(r"X|NV\d{1,2}|PIX|PXB|PHB|NODE|SYS|SOC|PSB")
P2P = re.compile(r"X|OK|NS|CNS|GNS|TNS|DS|U|NR")
_HEADER_GPU = re.compile(r"GPU(\d{1,3})")
_ROW = re.compile(r"(?:GPU(\d{1,3}))[ \t]+(.*)$")
_MODE = re.compile(r"topo[ \t]+-p2p[ \t]+([rwnap])\b")
MODES = {"r": "read", "w": "write", "n": "nvlink", "a": "atomics", "p": "prop"}


def _header(line: str) -> Optional[List[int]]:
    """The GPU indices of a matrix header line (`GPU0 GPU1 … NIC0 CPU Affinity …`), or None."""
    words = line.split()
    gpus = []
    for word in words:
        m = _HEADER_GPU.fullmatch(word)
        if not m:
            break
        gpus.append(int(m.group(1)))
    return gpus if gpus and gpus == sorted(set(gpus)) else None


def _rows(lines: List[str], start: int, gpus: List[int]) -> Tuple[Dict[str, Dict[str, str]], int, Optional[str]]:
    """The GPU rows below a header: {row GPU: {column GPU: cell}}, the index after them, and the matrix kind."""
    matrix: Dict[str, Dict[str, str]] = {}
    kind = None
    i = start
    while i < len(lines) and len(matrix) < len(gpus):
        m = _ROW.match(lines[i].strip())
        if not m:
            break
        cells = m.group(2).split()[:len(gpus)]
        if len(cells) < len(gpus):
            break
        links = all(LINKS.fullmatch(c) for c in cells)
        p2p = all(P2P.fullmatch(c) for c in cells)
        if not links and not p2p:
            break
        row_kind = "links" if links and not (p2p and any(c in ("OK", "NS", "CNS", "GNS", "TNS") for c in cells)) \
            else "p2p"
        if kind not in (None, row_kind):
            break
        kind = row_kind
        matrix[m.group(1)] = {str(g): c for g, c in zip(gpus, cells) if str(g) != m.group(1)}
        i += 1
    return matrix, i, kind


def _mode_above(lines: List[str], raw: str, at: int) -> str:
    """Which P2P capability a matrix shows: the `-p2p X` of the command above it, else its legend's wording."""
    for ahead in range(at - 1, max(at - 4, -1), -1):
        m = _MODE.search(lines[ahead])
        if m:
            return MODES[m.group(1)]
    m = _MODE.search(raw)
    return MODES[m.group(1)] if m else "read"


def parse(lines: Lines, name: str) -> Builder:
    builder = Builder(name, lines, "nvidia_smi_topo")
    text = lines.lines
    i = 0
    while i < len(text):
        gpus = _header(text[i].strip()) if "GPU" in text[i] else None
        if not gpus:
            i += 1
            continue
        matrix, end, kind = _rows(text, i + 1, gpus)
        if matrix and kind:
            key = "links" if kind == "links" else "p2p_" + _mode_above(text, lines.text, i)
            note = "nvidia-smi topo -m" if kind == "links" else "nvidia-smi topo -p2p"
            builder.set("nvml.topology." + key, matrix, i, note)
            if kind == "links" and len(matrix) > 1 and all(
                    not cell.startswith("NV") for row in matrix.values() for cell in row.values()):
                builder.set("nvml.topology.pcie_only", True, i, "no NVLink between any two GPUs")
            elif kind == "links" and len(matrix) > 1:
                builder.set("nvml.topology.pcie_only", False, i)
            if kind == "links":
                _stated_hang(builder, text, i, end)
        i = max(end, i + 1)
    return builder


_HANG = re.compile(r"\b(?:hangs?|hanging|hung|stuck|freez(?:e|es|ing)|froze|stall(?:s|ed|ing)?|deadlock(?:s|ed)?)\b",
                   re.IGNORECASE)


def _stated_hang(builder: Builder, text: List[str], start: int, end: int) -> None:
    """A line of the user's own words around a topo matrix that says the job hangs (`all_reduce_perf … will result in
    hanging`): what the paste states, the matrix being the machine it hangs on."""
    for at in list(range(end, min(end + 12, len(text)))) + list(range(max(0, start - 6), start)):
        line = text[at].strip()
        if _HANG.search(line) and not builder.has("nvml.topology.stated_hang"):
            builder.set("nvml.topology.stated_hang", line[:200], at, "said beside the topology")
            return
