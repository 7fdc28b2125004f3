"""``nvidia-smi`` output: the default table (drivers 390 to 590+), ``-L``, ``-q``, ``-q -x`` (XML) and its errors.

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
import xml.etree.ElementTree as ET
from typing import Any, Callable, Dict, List, Optional, Tuple

from gpudoctor.knowledge import major_minor
from gpudoctor.units import find as size_bytes

from ._common import Builder, first_version, to_int, yes_no
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
    n = len(text_lines)
    i = 0
    header_at = None
    while i < n:
        s = text_lines[i]
        if "NVIDIA-SMI" in s and "Driver Version" in s and "has failed" not in s:
            header_at = i
            break
        i += 1
    if header_at is not None:
        s = text_lines[header_at]
        m = _DRIVER.search(s)
        if m:
            builder.set("nvml.driver_version", m.group(1), header_at)
            builder.set("nvml.status", "ok", header_at)
        m = _CUDA.search(s)
        if m and m.group(1) != "N/A":
            builder.set("nvml.cuda_driver_version", major_minor(m.group(1)) or m.group(1), header_at,
                        "the newest CUDA this driver supports")
        start = header_at + 1
    else:
        start = 0

    gpus = _parse_gpu_block(builder, text_lines, start)
    if gpus is not None:
        gpu_list, gpu_idx, complete = gpus
        if gpu_list:
            mig_at = _find(text_lines, gpu_idx, lambda t: t.strip("| ").startswith("MIG devices:"))
            proc_at = _find(text_lines, gpu_idx, lambda t: t.strip("| ").startswith("Processes:"))
            if mig_at is not None:
                _parse_mig_block(text_lines, mig_at, gpu_list)
            if proc_at is not None:
                _parse_processes(text_lines, proc_at, gpu_list)
            builder.set("nvml.gpus", gpu_list, gpu_idx)
            if not complete:
                builder.warnings.append(f"{name}: the nvidia-smi GPU table ends early; the GPU list may be incomplete")
                _cut(builder, gpu_idx)
            if not builder.has("nvml.status"):
                builder.set("nvml.status", "ok", gpu_idx)

    _parse_dash_l(builder, text_lines)
    return builder


def _find(text_lines: List[str], start: int, pred) -> Optional[int]:
    for ahead in range(start, len(text_lines)):
        if pred(text_lines[ahead].strip()):
            return ahead
    return None


def _parse_gpu_block(builder: Builder, text_lines: List[str], start: int):
    """(gpus, index of the first GPU row, whether the block ended normally) or None without a GPU table."""
    n = len(text_lines)
    ahead = start
    col_header = None
    while ahead < n:
        s = text_lines[ahead].strip()
        if s.startswith("|") and "GPU" in s and "Name" in s:
            col_header = ahead
            break
        if "Processes:" in s:
            return None
        ahead += 1
    if col_header is None:
        return None
    header_text = []
    ahead = col_header
    while ahead < n and not text_lines[ahead].strip().startswith("|="):
        t = text_lines[ahead].strip()
        if not t.startswith("|"):
            return None
        header_text.append(t)
        ahead += 1
    if ahead >= n:
        return None
    has_mig_row = "MIG M." in " ".join(header_text)
    ahead += 1
    groups: List[List[Tuple[int, str]]] = [[]]
    last_was_sep = False
    while ahead < n:
        s = text_lines[ahead].strip()
        if not s or s[0] not in "|+":
            break
        if _is_sep(s):
            last_was_sep = True
            if groups[-1]:
                groups.append([])
            if s.startswith("+") and (ahead + 1 >= n or not text_lines[ahead + 1].strip().startswith("|")):
                break
        else:
            last_was_sep = False
            groups[-1].append((ahead, s))
        ahead += 1
    complete = last_was_sep  # a block that stops inside a GPU's rows was cut
    gpus: List[Dict[str, Any]] = []
    first = None
    for group in groups:
        if not group:
            continue
        gpu = _gpu_from_rows(group, has_mig_row)
        if gpu is None:
            continue
        gpus.append(gpu)
        if first is None:
            first = group[0][0]
    if first is None:
        return None
    return gpus, first, complete


def _gpu_from_rows(rows: List[Tuple[int, str]], has_mig_row: bool) -> Optional[Dict[str, Any]]:
    c0 = _cells(rows[0][1])
    if not c0:
        return None
    name_cell = c0[0].strip()
    toks = name_cell.split()
    if len(toks) < 2 or not toks[0].isdigit():
        return None
    gpu: Dict[str, Any] = {"index": int(toks[0])}
    name = name_cell[len(toks[0]):].strip()
    if toks[-1] in _PERSISTENCE and len(toks) > 2:
        name = name[: len(name) - len(toks[-1])].rstrip()
    if not name:
        return None
    gpu["name"] = name
    if len(c0) > 1:
        bt = c0[1].split()
        if bt and ":" in bt[0]:
            gpu["pci_bus_id"] = bt[0]
    if len(c0) > 2:
        ecc = c0[2].strip()
        if ecc.isdigit():
            gpu["ecc_enabled"] = True
            gpu["ecc_uncorrected_volatile"] = int(ecc)
        elif ecc in ("On", "Off"):
            gpu["ecc_enabled"] = ecc == "On"
    if len(rows) > 1:
        c1 = _cells(rows[1][1])
        if len(c1) > 1:
            m = _MEM.search(c1[1])
            if m:
                gpu["memory_used_bytes"] = int(m.group(1)) * 1024 * 1024
                gpu["memory_total_bytes"] = int(m.group(2)) * 1024 * 1024
    if has_mig_row and len(rows) > 2:
        c2 = _cells(rows[2][1])
        if len(c2) > 2:
            mig = yes_no(c2[-1].strip())
            if mig is not None:
                gpu["mig_enabled"] = mig
    return gpu


def _by_index(gpus: List[Dict[str, Any]]) -> Dict[int, Dict[str, Any]]:
    return {g["index"]: g for g in gpus if isinstance(g.get("index"), int)}


def _parse_mig_block(text_lines: List[str], at: int, gpus: List[Dict[str, Any]]) -> None:
    n = len(text_lines)
    ahead = at + 1
    while ahead < n and not text_lines[ahead].strip().startswith("|="):
        if not text_lines[ahead].strip().startswith(("|", "+")):
            return
        ahead += 1
    ahead += 1
    index = _by_index(gpus)
    expect_first = True
    while ahead < n:
        s = text_lines[ahead].strip()
        if not s or s[0] not in "|+":
            break
        if _is_sep(s):
            expect_first = True
            ahead += 1
            continue
        if expect_first:
            expect_first = False
            c = _cells(s)
            ids = c[0].split() if c else []
            if len(ids) == 4 and all(x.isdigit() for x in ids):
                dev: Dict[str, Any] = {"index": int(ids[3]), "gpu_instance_id": int(ids[1]),
                                       "compute_instance_id": int(ids[2])}
                if len(c) > 1:
                    m = _MEM.search(c[1])
                    if m:
                        dev["memory_used_bytes"] = int(m.group(1)) * 1024 * 1024
                        dev["memory_total_bytes"] = int(m.group(2)) * 1024 * 1024
                if len(c) > 2:
                    t = c[2].split()
                    if len(t) == 2:
                        if t[0].isdigit():
                            dev["sm_count"] = int(t[0])
                        if t[1].isdigit():
                            dev["ecc_uncorrected_volatile"] = int(t[1])
                gpu = index.get(int(ids[0]))
                if gpu is not None:
                    gpu.setdefault("mig_devices", []).append(dev)
                    gpu.setdefault("mig_enabled", True)
        ahead += 1


def _parse_processes(text_lines: List[str], at: int, gpus: List[Dict[str, Any]]) -> None:
    n = len(text_lines)
    ahead = at + 1
    header = []
    while ahead < n and not text_lines[ahead].strip().startswith("|="):
        t = text_lines[ahead].strip()
        if not t.startswith(("|", "+")):
            return
        header.append(t)
        ahead += 1
    if ahead >= n:
        return
    has_gi = " GI " in " ".join(header) + " "
    ahead += 1
    procs: List[Tuple[int, Dict[str, Any]]] = []
    none_found = False
    while ahead < n:
        s = text_lines[ahead].strip()
        if not s or s[0] not in "|" or _is_sep(s):
            break
        cell = s[1:-1] if s.endswith("|") else s[1:]
        if "No running processes found" in cell:
            none_found = True
            ahead += 1
            continue
        toks = list(_TOKEN.finditer(cell))
        k = 3 if has_gi else 1
        if len(toks) >= k + 3 and toks[0].group().isdigit():
            pid = toks[k].group()
            proc: Dict[str, Any] = {}
            if pid.isdigit():
                proc["pid"] = int(pid)
            proc["type"] = toks[k + 1].group()
            mem = toks[-1].group()
            if len(toks) >= k + 4:
                proc["name"] = cell[toks[k + 2].start(): toks[-2].end()]
            used = size_bytes(mem)
            if used is not None:
                proc["used_bytes"] = used
            if has_gi:
                gi, ci = toks[1].group(), toks[2].group()
                if gi.isdigit():
                    proc["gpu_instance_id"] = int(gi)
                if ci.isdigit():
                    proc["compute_instance_id"] = int(ci)
            procs.append((int(toks[0].group()), proc))
        ahead += 1
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
    for gi, proc in procs:
        if gi in index:
            index[gi]["processes"].append(proc)


def _cut(builder: Builder, idx: Optional[int]) -> None:
    """A report cut short states neither how many GPUs there are nor the health of the GPU it stops in."""
    builder.set("nvml.gpus_counted", False, idx, "the report is cut short")
    builder.set("nvml.health_read", False, idx, "the report is cut short")


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
# nvidia-smi -q
# ------------------------------------------------------------------------------------------------
_BUS_KEY = re.compile(r"GPU[ \t]+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$")


class _Node:
    __slots__ = ("key", "value", "indent", "children", "idx")

    def __init__(self, key: str, value: Optional[str], indent: int, idx: int):
        self.key = key
        self.value = value
        self.indent = indent
        self.children: List[_Node] = []
        self.idx = idx

    def child(self, *path: str) -> Optional[_Node]:
        node: Optional[_Node] = self
        for p in path:
            if node is None:
                return None
            nxt = None
            for c in node.children:
                if c.key == p:
                    nxt = c
                    break
            node = nxt
        return node

    def val(self, *path: str) -> Optional[str]:
        node = self.child(*path)
        return node.value if node is not None else None


def _qkey(k: str) -> str:
    return " ".join(k.lower().split())


_Q_TOP = ("timestamp", "driver version", "kmd version", "cuda version", "cuda umd version", "attached gpus")


def _q_tree(text_lines: List[str], start: int) -> _Node:
    """The key : value tree of one ``nvidia-smi -q`` output, from its first line to the first line at the top
    level that is neither a top-level key nor a ``GPU 0000:…`` header (prose or another tool's output)."""
    root = _Node("", None, -1, start)
    stack = [root]
    base = len(text_lines[start]) - len(text_lines[start].lstrip(" "))
    for i in range(start, len(text_lines)):
        raw = text_lines[i]
        s = raw.strip()
        if not s or s.startswith("=") or len(s) > 1000:
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        if indent <= base and not _BUS_KEY.match(s) and not s.lower().startswith(_Q_TOP):
            break
        k = s.find(" : ")
        if k >= 0:
            key, value = s[:k], s[k + 3:].strip()
        elif s.endswith(" :"):
            key, value = s[:-2], ""
        else:
            key, value = s, None
        node = _Node(_qkey(key), value, indent, i)
        while stack[-1].indent >= indent:
            stack.pop()
        stack[-1].children.append(node)
        stack.append(node)
    return root


def parse_q(lines: Lines, name: str) -> Builder:
    builder = Builder(name, lines, "nvidia_smi_q")
    text_lines = lines.lines
    start = None
    for i in range(len(text_lines)):
        s = text_lines[i].strip()
        if "NVSMI LOG" in s or (s.startswith(("Driver Version", "KMD Version", "Attached GPUs")) and " : " in s):
            start = i
            break
    if start is None:
        return builder
    root = _q_tree(text_lines, start)
    top = {}
    gpu_nodes: List[_Node] = []
    stack = list(reversed(root.children))
    while stack:
        node = stack.pop()
        if node.value is None and _BUS_KEY.match(node.key.upper()):
            gpu_nodes.append(node)
            continue
        if node.value is not None and node.key not in top:
            top[node.key] = node
        stack.extend(reversed(node.children))

    drv = top.get("driver version") or top.get("kmd version")
    if drv is not None and first_version(drv.value):
        builder.set("nvml.driver_version", first_version(drv.value), drv.idx)
        builder.set("nvml.status", "ok", drv.idx)
    cud = top.get("cuda version") or top.get("cuda umd version")
    if cud is not None and first_version(cud.value):
        builder.set("nvml.cuda_driver_version", major_minor(first_version(cud.value)), cud.idx,
                    "the newest CUDA this driver supports")

    gpus = []
    for index, node in enumerate(gpu_nodes):
        gpu = _gpu_from_q(node, index)
        if gpu is not None:
            gpus.append(gpu)
    if gpus:
        builder.set("nvml.gpus", gpus, gpu_nodes[0].idx)
        if not builder.has("nvml.status"):
            builder.set("nvml.status", "ok", gpu_nodes[0].idx)
        attached = top.get("attached gpus")
        if attached is not None and to_int(attached.value) is not None and to_int(attached.value) != len(gpus):
            builder.warnings.append(f"{name}: nvidia-smi -q says {attached.value} GPUs attached but lists {len(gpus)} "
                                    "(cut?)")
            _cut(builder, gpu_nodes[0].idx)
    return builder


def _sum_known(values) -> Optional[int]:
    """The sum of the values that are known; None when none is (every counter N/A)."""
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def _sum_uncorrectable(node: Optional[_Node]) -> Optional[int]:
    """Volatile/Aggregate ECC: the sum of the uncorrectable counters (SRAM/DRAM, parity/SEC-DED), or the
    'Double Bit' total in older drivers. None when every counter is N/A."""
    if node is None:
        return None

    def double_bit(c: _Node) -> Optional[int]:
        total = to_int(c.val("total"))
        return total if total is not None else _sum_known(to_int(x.value) for x in c.children if x.key != "total")

    return _sum_known(double_bit(c) if c.key == "double bit" else to_int(c.value) if "uncorr" in c.key else None
                      for c in node.children)


def _uuid(text: Optional[str]) -> Optional[str]:
    return text if text and text.startswith("GPU-") else None


def _text(text: Optional[str]) -> Optional[str]:
    return text


# The fields `nvidia-smi -q` and `nvidia-smi -q -x` both carry, said once:
# (fact key, path in the -q text (lower-case keys), path in the -q -x XML, conversion of the text).
GPU_FIELDS: Tuple[Tuple[str, Tuple[str, ...], str, Callable[[Optional[str]], Any]], ...] = (
    ("uuid", ("gpu uuid",), "uuid", _uuid),
    ("pci_bus_id", ("pci", "bus id"), "pci/pci_bus_id", _text),
    ("memory_total_bytes", ("fb memory usage", "total"), "fb_memory_usage/total", size_bytes),
    ("memory_used_bytes", ("fb memory usage", "used"), "fb_memory_usage/used", size_bytes),
    ("ecc_enabled", ("ecc mode", "current"), "ecc_mode/current_ecc", yes_no),
    ("remapped_rows_pending", ("remapped rows", "pending"), "remapped_rows/remapped_row_pending", yes_no),
    ("remapped_rows_failure", ("remapped rows", "remapping failure occurred"), "remapped_rows/remapped_row_failure",
     yes_no),
    ("mig_enabled", ("mig mode", "current"), "mig_mode/current_mig", yes_no),
)
MIG_FIELDS: Tuple[Tuple[str, Tuple[str, ...], str, Callable[[Optional[str]], Any]], ...] = (
    ("index", ("index",), "index", to_int),
    ("gpu_instance_id", ("gpu instance id",), "gpu_instance_id", to_int),
    ("compute_instance_id", ("compute instance id",), "compute_instance_id", to_int),
    ("memory_total_bytes", ("fb memory usage", "total"), "fb_memory_usage/total", size_bytes),
    ("memory_used_bytes", ("fb memory usage", "used"), "fb_memory_usage/used", size_bytes),
)


def _fields(table, read: Callable[[Tuple[str, ...], str], Optional[str]]) -> Dict[str, Any]:
    """The table's facts that the report carries; `read(q_path, xml_path)` gives a field's text or None."""
    facts = {}
    for key, q_path, xml_path, convert in table:
        value = convert(read(q_path, xml_path))
        if value is not None:
            facts[key] = value
    return facts


def _gpu_from_q(node: _Node, index: int) -> Optional[Dict[str, Any]]:
    name = node.val("product name")
    if not name:
        return None
    gpu: Dict[str, Any] = {"index": index, "name": name, **_fields(GPU_FIELDS, lambda q, _: node.val(*q))}
    m = _BUS_KEY.match(node.key.upper())
    if "pci_bus_id" not in gpu and m:
        gpu["pci_bus_id"] = m.group(1)
    errors = node.child("ecc errors")
    if errors is not None:
        vol = _sum_uncorrectable(errors.child("volatile"))
        agg = _sum_uncorrectable(errors.child("aggregate"))
        if vol is not None:
            gpu["ecc_uncorrected_volatile"] = vol
        if agg is not None:
            gpu["ecc_uncorrected_aggregate"] = agg
    retired = node.child("retired pages")
    if retired is not None:
        flags = [yes_no(c.value) for c in retired.children if c.key.startswith("pending")]
        flags = [f for f in flags if f is not None]
        if flags:
            gpu["retired_pages_pending"] = any(flags)
    migs = node.child("mig devices")
    if migs is not None and migs.children:
        devs = []
        for d in migs.children:
            if d.key != "mig device":
                continue
            dev = _fields(MIG_FIELDS, lambda q, _, d=d: d.val(*q))
            v = _sum_uncorrectable(d.child("ecc errors", "volatile"))
            if v is not None:
                dev["ecc_uncorrected_volatile"] = v
            devs.append(dev)
        if devs:
            gpu["mig_devices"] = devs
    procs = node.child("processes")
    if procs is not None:
        if procs.value is not None and procs.value.lower() in ("none", "no running processes found"):
            gpu["processes"] = []
        elif procs.children:
            gpu["processes"] = _q_processes(procs)
    return gpu


def _q_processes(procs: _Node) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    pending: Dict[str, Any] = {}
    cur: Optional[Dict[str, Any]] = None

    def apply(target: Dict[str, Any], key: str, value: Optional[str]) -> None:
        if value is None:
            return
        if key == "type":
            target["type"] = value
        elif key in ("name", "process name"):
            target["name"] = value
        elif key == "used gpu memory":
            used = size_bytes(value)
            if used is not None:
                target["used_bytes"] = used

    for c in procs.children:
        if c.key == "gpu instance id":
            v = to_int(c.value)
            pending = {"gpu_instance_id": v} if v is not None else {}
        elif c.key == "compute instance id":
            v = to_int(c.value)
            if v is not None:
                pending["compute_instance_id"] = v
        elif c.key == "process id":
            cur = {}
            pid = to_int(c.value)
            if pid is not None:
                cur["pid"] = pid
            cur.update(pending)
            pending = {}
            for d in c.children:
                apply(cur, d.key, d.value)
            out.append(cur)
        elif cur is not None:
            apply(cur, c.key, c.value)
    return out


# ------------------------------------------------------------------------------------------------
# nvidia-smi -q -x
# ------------------------------------------------------------------------------------------------
_ENTITY = re.compile(r"<!ENTITY", re.I)


def _xtext(el: Optional[ET.Element], path: str) -> Optional[str]:
    if el is None:
        return None
    node = el.find(path)
    if node is None or node.text is None:
        return None
    t = node.text.strip()
    return t or None


def parse_xml(lines: Lines, name: str) -> Builder:
    builder = Builder(name, lines, "nvidia_smi_xml")
    text = lines.text
    start = text.find("<nvidia_smi_log")
    if start < 0:
        return builder
    if _ENTITY.search(text):
        builder.warnings.append(f"{name}: XML with entity declarations refused (nvidia-smi never writes them)")
        return builder
    end = text.find("</nvidia_smi_log>", start)
    # The DOCTYPE (before the root) is left out: nothing is resolved or fetched.
    chunk = text[start: end + len("</nvidia_smi_log>")] if end >= 0 else text[start:]
    line0 = text.count("\n", 0, start)

    parser = ET.XMLPullParser(events=("start",))
    root = None
    truncated = False
    try:
        parser.feed(chunk)
        parser.close()
    except (ET.ParseError, ValueError, UnicodeError):
        truncated = True
    try:
        for _ev, el in parser.read_events():
            root = el
            break
    except (ET.ParseError, ValueError, UnicodeError):
        truncated = True
    if root is None or root.tag != "nvidia_smi_log":
        return builder
    if truncated or end < 0:
        builder.warnings.append(f"{name}: the nvidia-smi XML is cut or malformed; read what came before the break")

    def cite(tag: str) -> Optional[int]:
        pos = chunk.find("<" + tag)
        if pos < 0:
            return None
        no = line0 + chunk.count("\n", 0, pos)  # 0-based line in text
        return _line_index(lines, no + 1)

    drv = _xtext(root, "driver_version") or _xtext(root, "kmd_version")
    if drv and first_version(drv):
        builder.set("nvml.driver_version", first_version(drv), cite("driver_version"))
        builder.set("nvml.status", "ok", cite("driver_version"))
    cuda = _xtext(root, "cuda_version") or _xtext(root, "cuda_umd_version")
    if cuda and first_version(cuda):
        builder.set("nvml.cuda_driver_version", major_minor(first_version(cuda)), cite("cuda_version"),
                    "the newest CUDA this driver supports")
    gpus = []
    for index, g in enumerate(root.findall("gpu")):
        gpu = _gpu_from_xml(g, index)
        if gpu is not None:
            gpus.append(gpu)
    if gpus:
        builder.set("nvml.gpus", gpus, cite("gpu"))
        if not builder.has("nvml.status"):
            builder.set("nvml.status", "ok", cite("gpu"))
        if truncated or end < 0:
            _cut(builder, cite("gpu"))
    if not builder.empty():
        builder.touch(_line_index(lines, line0 + 1))
    return builder


def _line_index(lines: Lines, lineno: int) -> Optional[int]:
    """Index in lines.lines of the original line number (binary search: nos is increasing)."""
    nos = lines.nos
    lo, hi = 0, len(nos)
    while lo < hi:
        mid = (lo + hi) // 2
        if nos[mid] < lineno:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < len(nos) else None


def _xml_uncorrectable(el: Optional[ET.Element]) -> Optional[int]:
    """`_sum_uncorrectable` for the XML of `nvidia-smi -q -x`."""
    if el is None:
        return None
    return _sum_known(to_int(_xtext(c, "total")) if c.tag == "double_bit" else to_int(c.text)
                      if "uncorrectable" in c.tag else None for c in el)


def _gpu_from_xml(g: ET.Element, index: int) -> Optional[Dict[str, Any]]:
    name = _xtext(g, "product_name")
    if not name:
        return None
    gpu: Dict[str, Any] = {"index": index, "name": name, **_fields(GPU_FIELDS, lambda _, x: _xtext(g, x))}
    if "pci_bus_id" not in gpu and g.get("id"):
        gpu["pci_bus_id"] = g.get("id")
    vol = _xml_uncorrectable(g.find("ecc_errors/volatile"))
    agg = _xml_uncorrectable(g.find("ecc_errors/aggregate"))
    if vol is not None:
        gpu["ecc_uncorrected_volatile"] = vol
    if agg is not None:
        gpu["ecc_uncorrected_aggregate"] = agg
    flags = [yes_no(_xtext(g, "retired_pages/" + t)) for t in ("pending_blacklist", "pending_retirement")]
    flags = [f for f in flags if f is not None]
    if flags:
        gpu["retired_pages_pending"] = any(flags)
    devs = []
    for d in g.findall("mig_devices/mig_device"):
        dev = _fields(MIG_FIELDS, lambda _, x, d=d: _xtext(d, x))
        v = _xml_uncorrectable(d.find("ecc_error_count/volatile_count"))
        if v is not None:
            dev["ecc_uncorrected_volatile"] = v
        devs.append(dev)
    if devs:
        gpu["mig_devices"] = devs
    procs = g.find("processes")
    if procs is not None:
        infos = procs.findall("process_info")
        if infos:
            out = []
            for pi in infos:
                proc: Dict[str, Any] = {}
                pid = to_int(_xtext(pi, "pid"))
                if pid is not None:
                    proc["pid"] = pid
                t = _xtext(pi, "type")
                if t:
                    proc["type"] = t
                pn = _xtext(pi, "process_name")
                if pn:
                    proc["name"] = pn
                used = size_bytes(_xtext(pi, "used_memory"))
                if used is not None:
                    proc["used_bytes"] = used
                for tag in ("gpu_instance_id", "compute_instance_id"):
                    v = to_int(_xtext(pi, tag))
                    if v is not None:
                        proc[tag] = v
                out.append(proc)
            gpu["processes"] = out
        elif (procs.text or "").strip().lower() in ("", "none", "no running processes found"):
            gpu["processes"] = []
    return gpu


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
