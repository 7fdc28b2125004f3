"""``nvidia-smi`` output: the default table (drivers 390 to 590+), ``-L`` and its errors (``-q`` and ``-q -x``:
gpudoctor.ingest.nvidia_smi_query).

Table layouts handled: the 79-column layout (418 and earlier: no ``MIG M.`` row, processes without GI/CI
columns, names truncated with ``...``), 450-470 (``MIG M.`` row, GI/CI columns), the 89-column layout of 525+
(wider Bus-Id column from 570, ``+---`` under the header from 580), ``MIG devices:`` tables, Windows
(``WDDM``/``TCC``, process memory ``N/A``), headers without ``CUDA Version`` (before 410).
``CUDA Version`` is the newest CUDA the driver supports (``nvml.cuda_driver_version``), not a toolkit.
Names are kept as printed, truncation included.

In the table, a Processes section with a header and no rows (and no ``No running processes found`` line) is
what nvidia-smi prints in a container that cannot see the host's PIDs: the process list stays unknown, and each GPU
is marked ``processes_unnamed`` (processes run that nvidia-smi could not name).
ECC: a number in ``Volatile Uncorr. ECC`` is the volatile uncorrectable count (ECC on); ``On`` (MIG mode, the
counts are per MIG device) and ``Off`` give only the mode; ``N/A`` (no ECC on the board) leaves both unknown.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from gpudoctor.knowledge import major_minor
from gpudoctor.units import find as size_bytes

from ._common import Builder, cut_short, yes_no
from .normalize import Lines

# ------------------------------------------------------------------------------------------------
# default table
# ------------------------------------------------------------------------------------------------
_DRIVER = re.compile(r"Driver Version:[ \t]*([0-9][\w.\-]{0,30})")
_CUDA = re.compile(r"CUDA Version:[ \t]*([0-9][\w.\-]{0,30}|N/A)")
_MEM = re.compile(r"(\d{1,9})[ \t]*MiB[ \t]*/[ \t]*(\d{1,9})[ \t]*MiB")
_TOKEN = re.compile(r"\S+")
_PERSISTENCE = {"On", "Off", "N/A", "WDDM", "TCC", "MCDM"}
_L_LINE = re.compile(r"GPU[ \t]+(\d{1,3}):[ \t]*(.{1,200}?)[ \t]*\(UUID:[ \t]*(GPU-[0-9A-Fa-f\-]{1,60})\)")
_L_MIG = re.compile(r"MIG[ \t]+\S{1,40}[ \t]+Device[ \t]+\d{1,3}:")


def _is_sep(s: str) -> bool:
    """'+----+---+', '|----+---|', '|====+===|'."""
    if len(s) < 3 or s[0] not in "|+":
        return False
    body = s.strip("|+")
    return bool(body) and body.strip("-=+|") == "" and ("-" in body or "=" in body)


def _cells(s: str) -> List[str]:
    s = s.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return s.split("|")


def parse_table(lines: Lines, name: str) -> Builder:
    builder = Builder(name, lines, "nvidia_smi")
    text_lines = lines.lines
    header_at = next((i for i, s in enumerate(text_lines)
                      if "NVIDIA-SMI" in s and "Driver Version" in s and "has failed" not in s), None)
    if header_at is not None:
        _header(builder, text_lines[header_at], header_at)
    _gpu_table(builder, text_lines, 0 if header_at is None else header_at + 1)
    _parse_dash_l(builder, text_lines)
    return builder


def _header(builder: Builder, s: str, at: int) -> None:
    """`NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2`."""
    m = _DRIVER.search(s)
    if m:
        builder.set("nvml.driver_version", m.group(1), at)
        builder.set("nvml.status", "ok", at)
    m = _CUDA.search(s)
    if m and m.group(1) != "N/A":
        builder.set("nvml.cuda_driver_version", major_minor(m.group(1)) or m.group(1), at,
                    "the newest CUDA this driver supports")


def _gpu_table(builder: Builder, text_lines: List[str], start: int) -> None:
    """The GPU table below the header, with the MIG devices and processes tables after it."""
    found = _parse_gpu_block(text_lines, start)
    if found is None:
        return
    gpu_list, gpu_idx, complete = found
    mig_at, proc_at = _sections(text_lines, gpu_idx)
    if mig_at is not None:
        _parse_mig_block(text_lines, mig_at, gpu_list)
    if proc_at is not None:
        _parse_processes(text_lines, proc_at, gpu_list)
    builder.set("nvml.gpus", gpu_list, gpu_idx)
    if not complete:
        builder.warnings.append(f"{builder.name}: the nvidia-smi GPU table ends early; the GPU list may be incomplete")
        cut_short(builder, gpu_idx)
    if not builder.has("nvml.status"):
        builder.set("nvml.status", "ok", gpu_idx)


def _sections(text_lines: List[str], start: int) -> Tuple[Optional[int], Optional[int]]:
    """The lines, from `start` on, of the first `MIG devices:` and the first `Processes:` title."""
    mig_at = proc_at = None
    for ahead in range(start, len(text_lines)):
        title = text_lines[ahead].strip().strip("| ")
        if mig_at is None and title.startswith("MIG devices:"):
            mig_at = ahead
        if proc_at is None and title.startswith("Processes:"):
            proc_at = ahead
        if mig_at is not None and proc_at is not None:
            break
    return mig_at, proc_at


def _column_header(text_lines: List[str], start: int) -> Optional[int]:
    """The GPU table's column header (`| GPU  Name …`), unless the Processes table comes first."""
    for ahead in range(start, len(text_lines)):
        s = text_lines[ahead].strip()
        if s.startswith("|") and "GPU" in s and "Name" in s:
            return ahead
        if "Processes:" in s:
            return None
    return None


def _header_rows(text_lines: List[str], first: int, prefixes: Tuple[str, ...]) -> Optional[Tuple[str, int]]:
    """A table's header from line `first` down to its `|===` line: its rows joined, and the line its body starts at.
    None where a header line is no row of the table (starts with none of `prefixes`) or the text ends first."""
    header = []
    ahead = first
    while ahead < len(text_lines) and not text_lines[ahead].strip().startswith("|="):
        t = text_lines[ahead].strip()
        if not t.startswith(prefixes):
            return None
        header.append(t)
        ahead += 1
    if ahead >= len(text_lines):
        return None
    return " ".join(header), ahead + 1


def _row_groups(text_lines: List[str], ahead: int, stop_at_close: bool) -> Tuple[List[List[Tuple[int, str]]], bool]:
    """A table body's rows, grouped between separator lines (one GPU or MIG device each), as (line, row); and
    whether the body ended on a separator. `stop_at_close`: a `+---` line with no row below it ends the table."""
    n = len(text_lines)
    groups: List[List[Tuple[int, str]]] = [[]]
    last_was_sep = False
    while ahead < n:
        s = text_lines[ahead].strip()
        if not s or s[0] not in "|+":
            break
        last_was_sep = _is_sep(s)
        if not last_was_sep:
            groups[-1].append((ahead, s))
        elif groups[-1]:
            groups.append([])
        if last_was_sep and stop_at_close and s.startswith("+") and (
                ahead + 1 >= n or not text_lines[ahead + 1].strip().startswith("|")):
            break
        ahead += 1
    return [group for group in groups if group], last_was_sep


def _parse_gpu_block(text_lines: List[str], start: int) -> Optional[Tuple[List[Dict[str, Any]], int, bool]]:
    """(gpus, index of the first GPU row, whether the block ended normally) or None without a GPU table."""
    col_header = _column_header(text_lines, start)
    header = _header_rows(text_lines, col_header, ("|",)) if col_header is not None else None
    if header is None:
        return None
    header_text, body = header
    groups, complete = _row_groups(text_lines, body, stop_at_close=True)  # a block that stops in a GPU was cut
    gpus: List[Dict[str, Any]] = []
    first = None
    for group in groups:
        gpu = _gpu_from_rows(group, "MIG M." in header_text)
        if gpu is not None:
            gpus.append(gpu)
            first = group[0][0] if first is None else first
    if first is None:
        return None
    return gpus, first, complete


def _gpu_from_rows(rows: List[Tuple[int, str]], has_mig_row: bool) -> Optional[Dict[str, Any]]:
    c0 = _cells(rows[0][1])
    name_cell = c0[0].strip()
    toks = name_cell.split()
    if len(toks) < 2 or not toks[0].isdigit():
        return None
    name = name_cell[len(toks[0]):].strip()
    if toks[-1] in _PERSISTENCE and len(toks) > 2:
        name = name[: len(name) - len(toks[-1])].rstrip()
    if not name:
        return None
    gpu: Dict[str, Any] = {"index": int(toks[0]), "name": name}
    bus = c0[1].split() if len(c0) > 1 else []
    if bus and ":" in bus[0]:
        gpu["pci_bus_id"] = bus[0]
    gpu.update(_ecc_cell(c0[2].strip()) if len(c0) > 2 else {})
    c1 = _cells(rows[1][1]) if len(rows) > 1 else []
    gpu.update(_memory(c1[1]) if len(c1) > 1 else {})
    c2 = _cells(rows[2][1]) if has_mig_row and len(rows) > 2 else []
    mig = yes_no(c2[-1].strip()) if len(c2) > 2 else None
    if mig is not None:
        gpu["mig_enabled"] = mig
    return gpu


def _ecc_cell(ecc: str) -> Dict[str, Any]:
    """`Volatile Uncorr. ECC`: a count (ECC on), `On`/`Off` (the mode only), `N/A` (nothing)."""
    if ecc.isdigit():
        return {"ecc_enabled": True, "ecc_uncorrected_volatile": int(ecc)}
    if ecc in ("On", "Off"):
        return {"ecc_enabled": ecc == "On"}
    return {}


def _memory(cell: str) -> Dict[str, Any]:
    """`  1234MiB / 40960MiB`: used and total bytes."""
    m = _MEM.search(cell)
    if not m:
        return {}
    return {"memory_used_bytes": int(m.group(1)) * 1024 * 1024, "memory_total_bytes": int(m.group(2)) * 1024 * 1024}


def _by_index(gpus: List[Dict[str, Any]]) -> Dict[int, Dict[str, Any]]:
    return {g["index"]: g for g in gpus if isinstance(g.get("index"), int)}


def _parse_mig_block(text_lines: List[str], at: int, gpus: List[Dict[str, Any]]) -> None:
    header = _header_rows(text_lines, at + 1, ("|", "+"))
    if header is None:
        return
    index = _by_index(gpus)
    groups, _ = _row_groups(text_lines, header[1], stop_at_close=False)
    for group in groups:
        found = _mig_device(_cells(group[0][1]))
        gpu = index.get(found[0]) if found is not None else None
        if found is not None and gpu is not None:
            gpu.setdefault("mig_devices", []).append(found[1])
            gpu.setdefault("mig_enabled", True)


def _mig_device(c: List[str]) -> Optional[Tuple[int, Dict[str, Any]]]:
    """The first row of a MIG device (`|  0    1   0   0  |  19MiB / 40192MiB | 98  0 | …`): its GPU and facts."""
    ids = c[0].split() if c else []
    if len(ids) != 4 or not all(x.isdigit() for x in ids):
        return None
    dev: Dict[str, Any] = {"index": int(ids[3]), "gpu_instance_id": int(ids[1]), "compute_instance_id": int(ids[2]),
                           **(_memory(c[1]) if len(c) > 1 else {})}
    sm_ecc = c[2].split() if len(c) > 2 else []
    if len(sm_ecc) == 2 and sm_ecc[0].isdigit():
        dev["sm_count"] = int(sm_ecc[0])
    if len(sm_ecc) == 2 and sm_ecc[1].isdigit():
        dev["ecc_uncorrected_volatile"] = int(sm_ecc[1])
    return int(ids[0]), dev


def _parse_processes(text_lines: List[str], at: int, gpus: List[Dict[str, Any]]) -> None:
    header = _header_rows(text_lines, at + 1, ("|", "+"))
    if header is None:
        return
    has_gi = " GI " in header[0] + " "
    procs: List[Tuple[int, Dict[str, Any]]] = []
    none_found = False
    for ahead in range(header[1], len(text_lines)):
        s = text_lines[ahead].strip()
        if not s or s[0] not in "|" or _is_sep(s):
            break
        cell = s[1:-1] if s.endswith("|") else s[1:]
        if "No running processes found" in cell:
            none_found = True
            continue
        row = _process_row(cell, has_gi)
        if row is not None:
            procs.append(row)
    _assign_processes(gpus, procs, none_found)


def _assign_processes(gpus: List[Dict[str, Any]], procs: List[Tuple[int, Dict[str, Any]]], none_found: bool) -> None:
    """Each GPU's processes from the table's rows; a panel with no row and no ``No running processes found`` (a
    container's nvidia-smi that could not name the host's PIDs) leaves them unknown and marks the GPUs."""
    if not procs and not none_found:
        for g in gpus:
            g["processes_unnamed"] = True
        return
    for g in gpus:
        g["processes"] = []
    index = _by_index(gpus)
    for gpu, proc in procs:
        if gpu in index:
            index[gpu]["processes"].append(proc)


def _process_row(cell: str, has_gi: bool) -> Optional[Tuple[int, Dict[str, Any]]]:
    """`  0   N/A  N/A    1234      C   python train.py     4096MiB`: the GPU's index and the process's facts."""
    toks = list(_TOKEN.finditer(cell))
    k = 3 if has_gi else 1
    if len(toks) < k + 3 or not toks[0].group().isdigit():
        return None
    pid = toks[k].group()
    proc: Dict[str, Any] = {"pid": int(pid)} if pid.isdigit() else {}
    proc["type"] = toks[k + 1].group()
    if len(toks) >= k + 4:
        proc["name"] = cell[toks[k + 2].start(): toks[-2].end()]
    used = size_bytes(toks[-1].group())
    if used is not None:
        proc["used_bytes"] = used
    gi, ci = (toks[1].group(), toks[2].group()) if has_gi else ("", "")
    if gi.isdigit():
        proc["gpu_instance_id"] = int(gi)
    if ci.isdigit():
        proc["compute_instance_id"] = int(ci)
    return int(toks[0].group()), proc


def _parse_dash_l(builder: Builder, text_lines: List[str]) -> None:
    """``nvidia-smi -L``: 'GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-…)' with optional MIG lines."""
    gpus: List[Dict[str, Any]] = []
    first = None
    for i in range(len(text_lines)):
        s = text_lines[i].strip()
        if s.startswith("GPU"):
            m = _L_LINE.match(s)
            if m:
                gpus.append({"index": int(m.group(1)), "name": m.group(2).strip(), "uuid": m.group(3)})
                if first is None:
                    first = i
                continue
        elif s.startswith("MIG") and gpus and _L_MIG.match(s):
            gpus[-1]["mig_enabled"] = True
    if gpus:
        builder.set("nvml.gpus", gpus, first, "nvidia-smi -L")
        builder.set("nvml.health_read", False, first, "names only")
        builder.set("nvml.status", "ok", first)


# ------------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------------
_ERRORS: Tuple[Tuple[str, re.Pattern[str]], ...] = (
    ("driver_mismatch", re.compile(r"Driver/library version mismatch", re.I)),
    ("driver_not_loaded", re.compile(r"couldn.{0,2}t communicate with the NVIDIA driver", re.I)),
    ("no_devices", re.compile(r"No devices were found", re.I)),
    ("library_not_found", re.compile(r"NVIDIA-SMI couldn.{0,2}t find libnvidia-ml", re.I)),
    ("no_permission", re.compile(r"Failed to initialize NVML: Insufficient Permissions", re.I)),
    ("other", re.compile(r"Failed to initialize NVML: [A-Za-z]", re.I)),
    ("other", re.compile(r"Unable to determine the device handle for GPU", re.I)),
)


def parse_error(lines: Lines, name: str) -> Builder:
    """nvidia-smi's own error messages. The text is searched with line breaks joined, so a message wrapped over
    two lines (as some versions print it) is still found."""
    builder = Builder(name, lines, "nvidia_smi_error")
    text_lines = lines.lines
    for i in range(len(text_lines)):
        s = text_lines[i].strip()
        if not s:
            continue
        window = s
        # join up to two following lines for wrapped messages
        k = i + 1
        while k < len(text_lines) and k <= i + 2 and text_lines[k].strip():
            window = window + " " + text_lines[k].strip()
            k += 1
        window = " ".join(window.split())
        for kind, pat in _ERRORS:
            m = pat.search(window)
            if m and m.start() < len(s) + 1:
                msg = _message(text_lines, i)
                status = "unavailable" if kind == "library_not_found" else "error"
                builder.set("nvml.status", status, i)
                builder.set("nvml.error_kind", kind, i)
                builder.set("nvml.error", msg, i)
                if kind == "no_devices":
                    builder.set("nvml.gpus", [], i, "nvidia-smi found no devices")
                return builder
    return builder


_KV_LINE = re.compile(r"[A-Z][A-Za-z ]{0,40}:[ \t]")


def _message(text_lines: List[str], i: int) -> str:
    """The error message verbatim: its line and the continuation lines that belong to it. A line wrapped by
    the terminal is joined with a space; a line of its own ('NVML library version: 570.124') keeps its break."""
    out = text_lines[i].strip()
    for ahead in range(i + 1, min(i + 4, len(text_lines))):
        t = text_lines[ahead].strip()
        if not t or t.startswith(("|", "+", "$", "#")) or "NVIDIA-SMI " in t:
            break
        out += ("\n" if _KV_LINE.match(t) else " ") + t
    return out[:500]
