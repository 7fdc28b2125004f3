"""PyTorch ``python -m torch.utils.collect_env`` output (torch 0.4 to 2.x), and torch warnings in any text.

What each line means (from torch/utils/collect_env.py):
- ``CUDA used to build PyTorch`` is ``torch.version.cuda``; ``None`` / ``Could not collect`` mean a CPU-only build
  (``N/A`` means torch could not be imported, or a ROCm build when ``ROCM used to build PyTorch`` has a version).
- ``CUDA runtime version`` is what ``nvcc --version`` on PATH says: the system toolkit, not torch's runtime.
  ``Could not collect`` / ``No CUDA`` say nvcc was not found on PATH, which does not prove there is no toolkit
  (CUDA_HOME may hold one), so nvcc stays unknown.
- ``GPU models and configuration`` is ``nvidia-smi -L`` without UUIDs (``GPU 0: Tesla T4``), inline or on the
  following lines; on ROCm (or when nvidia-smi failed but torch sees a GPU) it is torch's device name instead.
- ``Nvidia driver version`` comes from nvidia-smi. ``No CUDA`` in the CUDA fields is printed only when torch sees
  no GPU and nvcc, nvidia-smi and the GPU list all failed: no NVIDIA driver (macOS, CPU machines).
- ``cuDNN version`` lists the libcudnn files found on the system (the system cuDNN, not necessarily torch's).
- ``Versions of relevant libraries``: ``[pip]``/``[pip3]``/``[conda]`` lines; a ``[conda] cudatoolkit`` line does not
  make a CPU-only torch a CUDA build.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from gpudoctor.knowledge import major_minor

from . import packages
from ._common import Builder, first_version, is_not_collected
from .normalize import Lines

# (lower-case key as printed, field, may appear without a colon in hand-edited pastes)
_KEYS: List[Tuple[str, str, bool]] = [
    ("pytorch version", "torch_version", True),
    ("is debug build", "debug", False),
    ("cuda used to build pytorch", "cuda_compiled", False),
    ("rocm used to build pytorch", "hip_compiled", False),
    ("os", "os", False),
    ("gcc version", "gcc", False),
    ("clang version", "clang", False),
    ("cmake version", "cmake", False),
    ("libc version", "libc", False),
    ("python version", "python_version", False),
    ("python platform", "python_platform", False),
    ("is cuda available", "cuda_available", False),
    ("cuda runtime version", "cuda_runtime", False),
    ("cuda_module_loading set to", "module_loading", False),
    ("gpu models and configuration", "gpus", False),
    ("nvidia driver version", "driver", False),
    ("cudnn version", "cudnn", False),
    ("is xpu available", "xpu", False),
    ("hip runtime version", "hip_runtime", False),
    ("miopen runtime version", "miopen", False),
    ("is xnnpack available", "xnnpack", False),
    ("caching allocator config", "allocator", False),
    ("versions of relevant libraries", "libs", False),
    ("version of relevant libraries", "libs", False),
]
_KEYS.sort(key=lambda k: -len(k[0]))
_STRONG = {"torch_version", "cuda_compiled", "hip_compiled", "cuda_available", "cuda_runtime", "gpus", "driver",
           "libs"}

_GPU_LINE = re.compile(r"GPU[ \t]*(\d{1,3})[ \t]*:[ \t]*(.*)$")
_UUID = re.compile(r"[ \t]*\(UUID:[ \t]*([^)]{0,80})\)")
_MIG_LINE = re.compile(r"MIG[ \t]+\S+[ \t]+Device[ \t]+\d+")
_LIB_LINE = re.compile(r"\[(pip\d?|conda)\][ \t]+(.*)$")
_PIP_REQ = re.compile(r"([A-Za-z0-9_.\-]{1,100})[ \t]*==[ \t]*(\S{1,100})")
_KEYLIKE = re.compile(r"[A-Za-z][A-Za-z0-9 _()/.\-]{0,60}:(?:[ \t]|$)")
_PAREN = re.compile(r"[ \t]*\([^()]{0,60}\)")
_CUDNN_SO = re.compile(r"libcudnn[A-Za-z_]{0,30}\.so\.(\d+\.\d+\.\d+)")
_ARCH = re.compile(r"\((x86_64|aarch64|arm64|ppc64le|s390x|AMD64|i386|i686)\)[ \t]*$")
_GCN = re.compile(r"^(.*?)[ \t]*\((gfx[0-9a-z]{2,8}[^()]{0,60})\)[ \t]*$")
_CONDA_CUDA = re.compile(r"cuda(\d{1,2}\.\d{1,2})")
_TORCH_WARN = re.compile(r"found version[ \t]{1,5}(\d{4,6})")
# torch/cuda/__init__.py _check_cubins (torch 1.10+): "{name} with CUDA capability sm_{cc} is not compatible with the
# current PyTorch installation.\nThe current PyTorch install supports CUDA capabilities {' '.join(get_arch_list())}."
_SUPPORTS = re.compile(r"supports CUDA capabilities[ \t]+((?:(?:sm|compute)_\d{2,3}[af]?[ \t]{0,3}){1,40})")

_YES = {"yes", "true"}
_NO = {"no", "false"}
_NONE = {"none", "could not collect"}


_KEY_RE = re.compile(f"(?:{'|'.join((re.escape(k) for k, _, _ in _KEYS))})")
_KEY_INFO = {k: (f, loose) for k, f, loose in _KEYS}


def _match_key(s: str) -> Optional[Tuple[str, str, bool]]:
    """(field, value, had_colon) when the line starts with a collect_env key."""
    low = s[:40].lower()
    m = _KEY_RE.match(low)
    if m:
        key = m.group(0)
        field, loose = _KEY_INFO[key]
        rest = s[len(key):]
        if rest[:1].isalnum() or rest[:1] == "_":
            return None  # a longer word ('OSX', 'cpu(s)')
        m = _PAREN.match(rest)
        if m and key != "os":
            rest = rest[m.end():]
        r = rest.lstrip()
        if r.startswith(":"):
            return field, r[1:].strip(), True
        if loose and rest[:1] in (" ", "\t") and r[:1].isdigit():
            return field, r.strip(), False
    return None


def _strip_bullet(s: str) -> str:
    if s[:2] in ("- ", "* ", "+ "):
        return s[2:].lstrip()
    return s


# the lists that follow a key on lines of their own, and which lines belong to each
_LIST_ITEMS = {
    "gpus": lambda text: bool(_GPU_LINE.match(text) or _MIG_LINE.match(text)),
    "cudnn": lambda text: "cudnn" in text.lower() or text.startswith("/") or text[1:3] == ":\\",
    "libs": lambda text: True,  # its [pip]/[conda] lines are read as library lines
}


class _Scan:
    """collect_env's lines one at a time: `Key: value` lines, [pip]/[conda] library lines, the lines of a list
    (GPUs, cuDNN files) and a value wrapped onto the next line by a mail client or a narrow terminal."""

    def __init__(self) -> None:
        self.values: Dict[str, Tuple[str, int]] = {}
        self.lists: Dict[str, List[Tuple[int, str]]] = {"gpus": [], "cudnn": []}
        self.libs: List[Tuple[int, str, str]] = []
        self.loose_hits: List[Tuple[str, str, int]] = []
        self.strong = False
        self.open: Optional[str] = None  # the list the following lines belong to
        self.last: Optional[str] = None  # the field whose value a wrapped line may continue

    def line(self, index: int, text: str) -> None:
        key = _match_key(text) if text else None
        library = _LIB_LINE.match(text) if text and not key else None
        if key:
            self.key(index, *key)
        elif library:
            self.libs.append((index, library.group(1), library.group(2)))
            self.last = None
        elif not text or text.lower() == "cpu:":
            self.open = self.last = None
        elif not self.list_item(index, text):
            self.other(index, text)

    def key(self, index: int, field: str, value: str, colon: bool) -> None:
        if not colon:  # `PyTorch version 2.1.0`: taken only where nothing says it with a colon
            self.loose_hits.append((field, value, index))
            return
        self.strong = self.strong or field in _STRONG
        self.values.setdefault(field, (value, index))
        self.last = field if value and field != "libs" else None
        opens = field == "libs" or not value or (field == "cudnn" and value.lower().startswith(
            "probably one of the following"))
        self.open = field if opens and field in _LIST_ITEMS else None

    def list_item(self, index: int, text: str) -> bool:
        """Whether the line belongs to the open list (kept in it); a line that does not closes it."""
        if self.open is None:
            return False
        if not _LIST_ITEMS[self.open](text):
            self.open = None
            return False
        if self.open in self.lists:
            self.lists[self.open].append((index, text))
        return True

    def other(self, index: int, text: str) -> None:
        if self.last == "gpus" and _GPU_LINE.match(text):
            self.lists["gpus"].append((index, text))  # an inline first GPU, the others on the following lines
        elif self.last in self.values and not _GPU_LINE.match(text) and not _KEYLIKE.match(text) \
                and not text.startswith(("/", "[")):
            value, first = self.values[self.last]
            self.values[self.last] = ((value + " " + text).strip(), first)
        else:
            self.last = None


def parse(lines: Lines, name: str) -> Builder:
    builder = Builder(name, lines, "collect_env")
    scan = _Scan()
    for index, line in enumerate(lines.lines):
        scan.line(index, _strip_bullet(line.strip()))
    values = scan.values
    if not scan.strong and not values.get("torch_version"):
        # Only hand-edited 'PyTorch version 1.5.0' lines, no real collect_env key: not a collect_env.
        return builder
    for field, value, index in scan.loose_hits:
        values.setdefault(field, (value, index))
    if values:
        builder.touch(min(index for _, index in values.values()))
    _interpret(builder, values, scan.lists["gpus"], scan.lists["cudnn"], scan.libs)
    return builder


# a field's (value, line index), (None, None) when the report lacks it
Lookup = Callable[[str], Tuple[Optional[str], Optional[int]]]


def _interpret(builder: Builder, values: Dict[str, Tuple[str, int]], gpu_lines: List[Tuple[int, str]],
               cudnn_lines: List[Tuple[int, str]], libs: List[Tuple[int, str, str]]) -> None:
    def val(field: str) -> Tuple[Optional[str], Optional[int]]:
        return values.get(field, (None, None))

    hip_build = _torch(builder, val)
    _host(builder, val)
    _toolkit(builder, val)
    _driver_and_gpus(builder, val, gpu_lines, hip_build)
    _cudnn(builder, val, cudnn_lines)
    _libraries(builder, libs)


def _torch(builder: Builder, val: Lookup) -> bool:
    """torch's version, build (CUDA, ROCm), whether CUDA works, the Python version; True for a ROCm build."""
    tv, ti = val("torch_version")
    torch_available: Optional[bool] = None
    if tv is not None:
        if tv.strip().lower() in ("n/a", "could not collect", ""):
            builder.set("torch.status", "missing", ti, "collect_env could not import torch")
            torch_available = False
        else:
            builder.set("torch.version", tv.split()[0], ti)
            builder.set("torch.status", "ok", ti)
            torch_available = True

    hv, hi = val("hip_compiled")
    hip_build = False
    if hv is not None:
        h = hv.strip()
        if h.lower() in _NONE or (h.upper() == "N/A" and torch_available):
            builder.set("torch.hip", None, hi)
        elif first_version(h) or major_minor(h):
            builder.set("torch.hip", h.split()[0], hi)
            hip_build = True

    compiled, ci = val("cuda_compiled")
    if compiled is not None:
        c = compiled.strip()
        if c.lower() in _NONE:
            builder.set("torch.cuda", None, ci, "CPU-only build")
        elif c.upper() == "N/A":
            if hip_build:
                builder.set("torch.cuda", None, ci, "ROCm build")
        else:
            mm = major_minor(c)
            if mm:
                builder.set("torch.cuda", mm, ci)

    av, ai = val("cuda_available")
    if av is not None:
        a = av.strip().lower()
        if a in _YES:
            builder.set("torch.cuda_available", True, ai)
        elif a in _NO:
            builder.set("torch.cuda_available", False, ai)

    pv, pi = val("python_version")
    if pv:
        m = re.match(r"\d+(?:\.\d+){0,2}", pv.strip())
        if m:
            builder.set("torch.python_version", m.group(0), pi)
    return hip_build


def _host(builder: Builder, val: Lookup) -> None:
    """The OS and architecture."""
    ov, oi = val("os")
    if ov and not is_not_collected(ov):
        builder.set("host.os", ov.strip(), oi)
        m = _ARCH.search(ov)
        if m:
            builder.set("host.arch", m.group(1), oi)


def _toolkit(builder: Builder, val: Lookup) -> None:
    """collect_env's 'CUDA runtime version' is the nvcc on PATH."""
    rv, ri = val("cuda_runtime")
    if rv:
        mm = major_minor(rv.strip()) if first_version(rv) else None
        if mm:
            builder.set("nvcc.version", mm, ri, "collect_env 'CUDA runtime version' is the nvcc on PATH")


def _driver_and_gpus(builder: Builder, val: Lookup, gpu_lines: List[Tuple[int, str]],
                     hip_build: bool) -> None:
    """The driver version and the GPUs (nvidia-smi -L lines, or torch's name for device 0)."""
    dv, di = val("driver")
    gv, gi = val("gpus")
    no_cuda = (dv or "").strip().lower() == "no cuda"
    if dv is not None:
        if no_cuda:
            builder.set("nvml.status", "unavailable", di, "collect_env found no NVIDIA driver")
            builder.set("nvml.driver_version", None, di)
        else:
            ver = first_version(dv)
            if ver:
                builder.set("nvml.driver_version", ver, di)
                builder.set("nvml.status", "ok", di)

    if gv is not None and gi is not None:  # a field found has its line
        g = gv.strip()
        if g.lower() == "no cuda":
            builder.set("nvml.gpus", [], gi, "collect_env found no NVIDIA GPU")
            if dv is None:
                builder.set("nvml.status", "unavailable", gi)
        elif g and not is_not_collected(g):
            if _GPU_LINE.match(g):
                gpu_lines.insert(0, (gi, g))
            else:
                # ROCm, or nvidia-smi failed while torch saw a device: torch's name for device 0.
                dev: Dict[str, Any] = {"name": g}
                m = _GCN.match(g)
                if m and hip_build:
                    dev = {"name": m.group(1), "gcn_arch": m.group(2)}
                builder.set("torch.devices", [dev], gi, "device name as torch reports it")
    gpus, gpu_idx = _gpu_entries(gpu_lines)
    if gpus:
        builder.set("nvml.gpus", gpus, gpu_idx)
        builder.set("nvml.health_read", False, gpu_idx, "nvidia-smi -L: names only")
        if not builder.has("nvml.status"):
            builder.set("nvml.status", "ok", gpu_idx)


def _gpu_entries(gpu_lines: List[Tuple[int, str]]) -> Tuple[List[Dict[str, Any]], Optional[int]]:
    """The `GPU 0: NAME (UUID: …)` lines as GPU entries (a MIG line marks the GPU before it), and the first one's
    line."""
    gpus: List[Dict[str, Any]] = []
    gpu_idx: Optional[int] = None
    for idx, s in gpu_lines:
        m = _GPU_LINE.match(s)
        if m:
            rest = m.group(2)
            gpu: Dict[str, Any] = {"index": int(m.group(1))}
            um = _UUID.search(rest)
            if um:
                rest = rest[:um.start()] + rest[um.end():]
                if um.group(1).strip().startswith("GPU-"):
                    gpu["uuid"] = um.group(1).strip()
            name = rest.strip()
            if not name:
                continue
            gpu["name"] = name
            gpus.append(gpu)
            if gpu_idx is None:
                gpu_idx = idx
        elif gpus:
            gpus[-1]["mig_enabled"] = True
    return gpus, gpu_idx


def _cudnn(builder: Builder, val: Lookup, cudnn_lines: List[Tuple[int, str]]) -> None:
    """The system cuDNN: a version, or the one libcudnn.so version collect_env found."""
    nv, ni = val("cudnn")
    if nv is not None:
        n = nv.strip()
        if re.fullmatch(r"\d+(?:\.\d+){0,3}", n):
            builder.set("torch.cudnn", n, ni, "system cuDNN found by collect_env")
        else:
            found = set()
            cite = ni
            for idx, s in [(ni, n)] + cudnn_lines:
                for m in _CUDNN_SO.finditer(s):
                    found.add(m.group(1))
                    cite = idx if cite is None else cite
            if len(found) == 1:
                builder.set("torch.cudnn", found.pop(), cite, "system cuDNN found by collect_env")


def _libraries(builder: Builder, libs: List[Tuple[int, str, str]]) -> None:
    runtime: Optional[Tuple[str, int, str]] = None
    conda_torch: Optional[Tuple[str, int]] = None
    for idx, src, rest in libs:
        rest = rest.strip()
        if src.startswith("pip"):
            m = _PIP_REQ.match(rest)
            if not m:
                continue
            pkg, ver = m.group(1).lower().replace("_", "-"), m.group(2)
        else:
            parts = rest.split()
            if len(parts) < 2:
                continue
            pkg, ver = parts[0].lower().replace("_", "-"), parts[1]
            if pkg == "pytorch" and len(parts) >= 3:
                conda_torch = (parts[2], idx)
        if pkg in ("torch", "pytorch") and (builder.has("torch.version") or builder.has("torch.status")):
            continue
        packages.record(builder, pkg, ver, idx)
        if pkg.startswith("nvidia-cuda-runtime-cu") and runtime is None:
            runtime = (ver, idx, pkg)
    if not builder.has("torch.cuda"):
        # No 'CUDA used to build PyTorch' line (a cut report): use what the packages say, as evidence shows.
        if conda_torch is not None:
            build, idx = conda_torch
            m = _CONDA_CUDA.search(build)
            if m:
                builder.set("torch.cuda", major_minor(m.group(1)), idx, "inferred from the conda build string")
            elif "_cpu" in build or build.startswith("cpu"):
                builder.set("torch.cuda", None, idx, "inferred from the conda build string (CPU-only)")
        elif runtime is not None:
            ver, idx, pkg = runtime
            mm = major_minor(ver)
            if mm and pkg.rsplit("cu", 1)[-1] == mm.split(".")[0]:
                builder.set("torch.cuda", mm, idx, f"inferred from the {pkg} wheel torch depends on")


def parse_torch_warnings(lines: Lines, name: str) -> Builder:
    """Torch warnings anywhere in a text. 'The NVIDIA driver on your system is too old (found version 11040)'
    is often the only driver evidence: 11040 is CUDA_VERSION style, 11.4."""
    builder = Builder(name, lines, "torch_warning")
    text_lines = lines.lines
    warnings: List[str] = []
    for i in range(len(text_lines)):
        s = text_lines[i]
        low = s.lower()
        if "found version" in low or "driver on your system is too old" in low:
            joined = s.strip()
            if i + 1 < len(text_lines):
                joined = joined + " " + text_lines[i + 1].strip()
            m = _TORCH_WARN.search(joined)
            if m:
                num = int(m.group(1))
                ver = f"{num // 1000}.{num % 1000 // 10}"
                builder.set("nvml.cuda_driver_version", ver, i,
                            f"inferred from torch's warning: found version {num} means the driver supports CUDA {ver}")
                warnings.append(joined[:300])
                builder.touch(i)
            elif "driver on your system is too old" in low:
                warnings.append(joined[:300])
                builder.touch(i)
        elif "found no nvidia driver on your system" in low:
            warnings.append(s.strip()[:300])
            builder.touch(i)
        elif "supports cuda capabilities" in low:
            _arch_list_warning(builder, lines, i, warnings)
    if warnings:
        seen = []
        for w in warnings:
            if w not in seen:
                seen.append(w)
        builder.set("torch.warnings", seen, builder.first_index)
    return builder


def _arch_list_warning(builder: Builder, lines: Lines, i: int, warnings: List[str]) -> None:
    """torch's capability warning prints the whole `torch.cuda.get_arch_list()`: the arch list, as torch states it
    (a list a terminal wrapped onto the next lines is joined)."""
    joined = " ".join(line.strip() for line in lines.lines[i:i + 3])
    m = _SUPPORTS.search(joined)
    if not m:
        return
    archs = m.group(1).split()
    builder.set("torch.arch_list", archs, i, "torch's capability warning prints torch.cuda.get_arch_list()")
    above = lines.lines[i - 1].strip() if i else ""
    warnings.append(((above + " ") if "is not compatible" in above else "") + lines.lines[i].strip()[:300])
