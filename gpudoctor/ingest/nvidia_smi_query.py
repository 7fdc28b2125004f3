"""``nvidia-smi -q`` (key : value text) and ``nvidia-smi -q -x`` (XML): one GPU table read from either.

Both carry the same fields; each is said once in a field table (``GPU_FIELDS``, ``MIG_FIELDS``) with its path in
the text and in the XML. A format only says how to read a path (`_QGpu`, `_XmlGpu`); `_gpu` builds the GPU's facts
from either, in one walk. ``CUDA Version`` is the newest CUDA the driver supports (``nvml.cuda_driver_version``).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from gpudoctor.knowledge import major_minor
from gpudoctor.units import find as size_bytes

from ._common import Builder, cut_short, first_version, to_int, yes_no
from .normalize import Lines

_BUS_KEY = re.compile(r"GPU[ \t]+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$")
_Q_TOP = ("timestamp", "driver version", "kmd version", "cuda version", "cuda umd version", "attached gpus")
_ENTITY = re.compile(r"<!ENTITY", re.I)
_NO_PROCESSES = ("none", "no running processes found")


def _uuid(text: Optional[str]) -> Optional[str]:
    return text if text and text.startswith("GPU-") else None


def _text(text: Optional[str]) -> Optional[str]:
    return text


_Field = Tuple[str, Tuple[str, ...], str, Callable[[Optional[str]], Any]]
# The fields `nvidia-smi -q` and `nvidia-smi -q -x` both carry, said once:
# (fact key, path in the -q text (lower-case keys), path in the -q -x XML, conversion of the text).
GPU_FIELDS: Tuple[_Field, ...] = (
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
MIG_FIELDS: Tuple[_Field, ...] = (
    ("index", ("index",), "index", to_int),
    ("gpu_instance_id", ("gpu instance id",), "gpu_instance_id", to_int),
    ("compute_instance_id", ("compute instance id",), "compute_instance_id", to_int),
    ("memory_total_bytes", ("fb memory usage", "total"), "fb_memory_usage/total", size_bytes),
    ("memory_used_bytes", ("fb memory usage", "used"), "fb_memory_usage/used", size_bytes),
)
# A process of `-q -x`: (fact key, XML tag, conversion); `-q` lists processes as a flat run of keys (_q_processes).
XML_PROCESS_FIELDS: Tuple[Tuple[str, str, Callable[[Optional[str]], Any]], ...] = (
    ("pid", "pid", to_int), ("type", "type", _text), ("name", "process_name", _text),
    ("used_bytes", "used_memory", size_bytes), ("gpu_instance_id", "gpu_instance_id", to_int),
    ("compute_instance_id", "compute_instance_id", to_int),
)


def _fields(table: Iterable[_Field], read: Callable[[_Field], Optional[str]]) -> Dict[str, Any]:
    """The table's facts that the report carries; `read(field)` gives a field's text or None."""
    facts = {}
    for field in table:
        value = field[3](read(field))
        if value is not None:
            facts[field[0]] = value
    return facts


def _sum_known(values: Iterable[Optional[int]]) -> Optional[int]:
    """The sum of the values that are known; None when none is (every counter N/A)."""
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def _any_known(flags: Iterable[Optional[bool]]) -> Optional[bool]:
    """Whether any of the flags that are known is set; None when none is known."""
    known = [flag for flag in flags if flag is not None]
    return any(known) if known else None


def _gpu(index: int, name: str, fields: Dict[str, Any], more: Iterable[Tuple[str, Any]]) -> Dict[str, Any]:
    """A GPU's facts: its index, name and table fields, then each of `more` that is known (a table field wins)."""
    gpu: Dict[str, Any] = {"index": index, "name": name, **fields}
    for key, value in more:
        if value is not None:
            gpu.setdefault(key, value)
    return gpu


def _set_versions(builder: Builder, driver: Optional[str], driver_at: Optional[int], cuda: Optional[str],
                  cuda_at: Optional[int]) -> None:
    if first_version(driver):
        builder.set("nvml.driver_version", first_version(driver), driver_at)
        builder.set("nvml.status", "ok", driver_at)
    if first_version(cuda):
        builder.set("nvml.cuda_driver_version", major_minor(first_version(cuda)), cuda_at,
                    "the newest CUDA this driver supports")


# ------------------------------------------------------------------------------------------------
# nvidia-smi -q
# ------------------------------------------------------------------------------------------------
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
            node = next((c for c in node.children if c.key == p), None)
        return node

    def val(self, *path: str) -> Optional[str]:
        node = self.child(*path)
        return node.value if node is not None else None


def _qkey(k: str) -> str:
    return " ".join(k.lower().split())


def _q_entry(s: str) -> Tuple[str, Optional[str]]:
    """`Key : value`, `Key :` (a section) or a bare line."""
    k = s.find(" : ")
    if k >= 0:
        return s[:k], s[k + 3:].strip()
    if s.endswith(" :"):
        return s[:-2], ""
    return s, None


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
        key, value = _q_entry(s)
        node = _Node(_qkey(key), value, indent, i)
        while stack[-1].indent >= indent:
            stack.pop()
        stack[-1].children.append(node)
        stack.append(node)
    return root


def _q_start(text_lines: List[str]) -> Optional[int]:
    for i, line in enumerate(text_lines):
        s = line.strip()
        if "NVSMI LOG" in s or (s.startswith(("Driver Version", "KMD Version", "Attached GPUs")) and " : " in s):
            return i
    return None


def _q_sections(root: _Node) -> Tuple[Dict[str, _Node], List[_Node]]:
    """(the first node of each key that has a value, outside the GPUs; the ``GPU 0000:…`` nodes), in order."""
    top: Dict[str, _Node] = {}
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
    return top, gpu_nodes


def _value_at(top: Dict[str, _Node], *keys: str) -> Tuple[Optional[str], Optional[int]]:
    """The value of the first of `keys` the output has, and its line."""
    node = next((top[key] for key in keys if key in top), None)
    return (node.value, node.idx) if node is not None else (None, None)


def parse_q(lines: Lines, name: str) -> Builder:
    builder = Builder(name, lines, "nvidia_smi_q")
    start = _q_start(lines.lines)
    if start is None:
        return builder
    top, gpu_nodes = _q_sections(_q_tree(lines.lines, start))
    _set_versions(builder, *_value_at(top, "driver version", "kmd version"),
                  *_value_at(top, "cuda version", "cuda umd version"))
    gpus = [gpu for gpu in (_gpu_from_q(node, index) for index, node in enumerate(gpu_nodes)) if gpu is not None]
    if not gpus:
        return builder
    builder.set("nvml.gpus", gpus, gpu_nodes[0].idx)
    if not builder.has("nvml.status"):
        builder.set("nvml.status", "ok", gpu_nodes[0].idx)
    attached, _ = _value_at(top, "attached gpus")
    count = to_int(attached)
    if count is not None and count != len(gpus):
        builder.warnings.append(f"{name}: nvidia-smi -q says {attached} GPUs attached but lists {len(gpus)} (cut?)")
        cut_short(builder, gpu_nodes[0].idx)
    return builder


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


def _gpu_from_q(node: _Node, index: int) -> Optional[Dict[str, Any]]:
    name = node.val("product name")
    if not name:
        return None
    bus = _BUS_KEY.match(node.key.upper())
    retired = node.child("retired pages")
    return _gpu(index, name, _fields(GPU_FIELDS, lambda field: node.val(*field[1])), (
        ("pci_bus_id", bus.group(1) if bus else None),
        ("ecc_uncorrected_volatile", _sum_uncorrectable(node.child("ecc errors", "volatile"))),
        ("ecc_uncorrected_aggregate", _sum_uncorrectable(node.child("ecc errors", "aggregate"))),
        ("retired_pages_pending", _any_known(yes_no(c.value) for c in retired.children
                                             if c.key.startswith("pending")) if retired is not None else None),
        ("mig_devices", _q_migs(node.child("mig devices"))),
        ("processes", _q_process_list(node.child("processes"))),
    ))


def _q_migs(migs: Optional[_Node]) -> Optional[List[Dict[str, Any]]]:
    devs = [_q_mig(d) for d in (migs.children if migs is not None else []) if d.key == "mig device"]
    return devs or None


def _q_mig(d: _Node) -> Dict[str, Any]:
    dev = _fields(MIG_FIELDS, lambda field: d.val(*field[1]))
    volatile = _sum_uncorrectable(d.child("ecc errors", "volatile"))
    if volatile is not None:
        dev["ecc_uncorrected_volatile"] = volatile
    return dev


def _q_process_list(procs: Optional[_Node]) -> Optional[List[Dict[str, Any]]]:
    """[] where the GPU says it runs none, None where the output says nothing of them."""
    if procs is None:
        return None
    if procs.value is not None and procs.value.lower() in _NO_PROCESSES:
        return []
    return _q_processes(procs) if procs.children else None


def _q_process_field(target: Dict[str, Any], key: str, value: Optional[str]) -> None:
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


def _q_processes(procs: _Node) -> List[Dict[str, Any]]:
    """The processes of `-q`: each ``Process ID`` with the keys below or after it, and the ``GPU/Compute instance
    ID`` before it (MIG)."""
    out: List[Dict[str, Any]] = []
    pending: Dict[str, Any] = {}
    cur: Optional[Dict[str, Any]] = None
    for c in procs.children:
        if c.key == "gpu instance id":
            v = to_int(c.value)
            pending = {"gpu_instance_id": v} if v is not None else {}
        elif c.key == "compute instance id":
            v = to_int(c.value)
            if v is not None:
                pending["compute_instance_id"] = v
        elif c.key == "process id":
            pid = to_int(c.value)
            cur = {"pid": pid} if pid is not None else {}
            cur.update(pending)
            pending = {}
            for d in c.children:
                _q_process_field(cur, d.key, d.value)
            out.append(cur)
        elif cur is not None:
            _q_process_field(cur, c.key, c.value)
    return out


# ------------------------------------------------------------------------------------------------
# nvidia-smi -q -x
# ------------------------------------------------------------------------------------------------
def _xtext(el: Optional[ET.Element], path: str) -> Optional[str]:
    if el is None:
        return None
    node = el.find(path)
    if node is None or node.text is None:
        return None
    t = node.text.strip()
    return t or None


def _xml_root(chunk: str) -> Tuple[Optional[ET.Element], bool]:
    """The XML's root element, and whether the XML is cut or malformed (what came before the break is read)."""
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start",))
    root: Optional[ET.Element] = None
    truncated = False
    try:
        parser.feed(chunk)
        parser.close()
    except (ET.ParseError, ValueError, UnicodeError):
        truncated = True
    try:
        for event in parser.read_events():
            found = event[-1]  # ("start", the element)
            root = found if isinstance(found, ET.Element) else None
            break
    except (ET.ParseError, ValueError, UnicodeError):
        truncated = True
    return root, truncated


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
    root, truncated = _xml_root(chunk)
    if root is None or root.tag != "nvidia_smi_log":
        return builder
    cut = truncated or end < 0
    if cut:
        builder.warnings.append(f"{name}: the nvidia-smi XML is cut or malformed; read what came before the break")

    def cite(tag: str) -> Optional[int]:
        pos = chunk.find("<" + tag)
        return None if pos < 0 else _line_index(lines, line0 + chunk.count("\n", 0, pos) + 1)

    _set_versions(builder, _xtext(root, "driver_version") or _xtext(root, "kmd_version"), cite("driver_version"),
                  _xtext(root, "cuda_version") or _xtext(root, "cuda_umd_version"), cite("cuda_version"))
    gpus = [gpu for gpu in (_gpu_from_xml(g, index) for index, g in enumerate(root.findall("gpu")))
            if gpu is not None]
    if gpus:
        builder.set("nvml.gpus", gpus, cite("gpu"))
        if not builder.has("nvml.status"):
            builder.set("nvml.status", "ok", cite("gpu"))
        if cut:
            cut_short(builder, cite("gpu"))
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
    return _gpu(index, name, _fields(GPU_FIELDS, lambda field: _xtext(g, field[2])), (
        ("pci_bus_id", g.get("id") or None),
        ("ecc_uncorrected_volatile", _xml_uncorrectable(g.find("ecc_errors/volatile"))),
        ("ecc_uncorrected_aggregate", _xml_uncorrectable(g.find("ecc_errors/aggregate"))),
        ("retired_pages_pending", _any_known(yes_no(_xtext(g, "retired_pages/" + tag))
                                             for tag in ("pending_blacklist", "pending_retirement"))),
        ("mig_devices", _xml_migs(g)),
        ("processes", _xml_processes(g.find("processes"))),
    ))


def _xml_migs(g: ET.Element) -> Optional[List[Dict[str, Any]]]:
    devs = [_xml_mig(d) for d in g.findall("mig_devices/mig_device")]
    return devs or None


def _xml_mig(d: ET.Element) -> Dict[str, Any]:
    dev = _fields(MIG_FIELDS, lambda field: _xtext(d, field[2]))
    volatile = _xml_uncorrectable(d.find("ecc_error_count/volatile_count"))
    if volatile is not None:
        dev["ecc_uncorrected_volatile"] = volatile
    return dev


def _xml_processes(procs: Optional[ET.Element]) -> Optional[List[Dict[str, Any]]]:
    """[] where the GPU says it runs none, None where the XML says nothing of them."""
    if procs is None:
        return None
    infos = procs.findall("process_info")
    if infos:
        return [{key: value for key, tag, convert in XML_PROCESS_FIELDS
                 for value in (convert(_xtext(info, tag)),) if value is not None} for info in infos]
    return [] if (procs.text or "").strip().lower() in ("", *_NO_PROCESSES) else None
