"""Failures a log line names with fields to parse, read for the log reader (gpudoctor.ingest.logs): GPU Xids, the
NCCL watchdog's timeout, multiprocessing's bootstrapping error with the script line, driver and CUDA library
mismatches, a refused `--local-rank`, a rendezvous port in use, a CUDA extension build nvcc stopped, and datasets'
preprocessing. Messages that need no parsing are data: the atlas (rules/messages/, gpudoctor.ingest.atlas).

Each reader takes the log reader (`scan`) and the line it is reading.
"""

from __future__ import annotations

import re

from .log_reader import LogReader

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]{4,20})\): (\d{1,4})(?:, pid=([^,\s]{1,20}))?"
                  r"(?:, name=([^,]{1,80}))?,? ?(.*)")
_TIMEOUT = re.compile(r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+)[^)]{0,200}?Timeout\(ms\)=(\d+)\)"
                      r"(?: ran for (\d+) milliseconds)?")
_RANK = re.compile(r"\[[Rr]ank ?(\d{1,6})\]")
# argparse refusing the local-rank argument a launcher passed: `train.py: error: unrecognized arguments: --local-rank=0`
_LOCAL_RANK_REFUSED = re.compile(r"(?:([\w.\-]{1,100}): )?error: unrecognized arguments:.{0,500}?(--local[-_]rank)\b")
# c10d's store could not listen on the rendezvous port: `The server socket has failed to bind to [::]:29500 (errno: 98
# - Address already in use)` (older torch), `… failed to listen on any local network address. port: 29500, useIpv6:
# false, code: -98, name: EADDRINUSE` (newer torch; the port is not always printed)
_PORT_IN_USE = re.compile(r"failed to (?:bind to|listen on) \S{0,60}?:(\d{1,5}) \(errno: 98\b|"
                          r"(?:port: (\d{1,5}), )?useIpv6: \w{1,5}, code: -98, name: EADDRINUSE")
_MODULE_FRAME = re.compile(r'File "([^"]{1,500})", line (\d{1,7}), in <module>')
_SITE = ("site-packages", "dist-packages", "/lib/python", "<frozen", "\\lib\\")
# A CUDA library that is not the one torch was built with (a system copy on LD_LIBRARY_PATH ahead of the wheels):
# the dynamic loader's `libtorch_cuda.so: undefined symbol: ncclCommRegister` / `undefined symbol:
# __nvJitLinkComplete_12_4, version libnvJitLink.so.12`, and torch/backends/cudnn/__init__.py's `cuDNN version
# incompatibility: PyTorch was compiled  against (8, 9, 2) but found runtime version (8, 5, 0)`.
_UNDEFINED_SYMBOL = re.compile(r"undefined symbol: ?(\w{2,120})(?:, version (lib[\w.]{1,60}))?")
_SYMBOL_LIBRARY = (("cudnn", "cudnn"), ("cublas", "cublas"), ("nccl", "nccl"), ("__nvJitLink", "nvjitlink"),
                   ("cusparse", "cusparse"), ("cufft", "cufft"), ("cusolver", "cusolver"), ("curand", "curand"))
_CUDNN_INCOMPATIBLE = re.compile(r"cuDNN version incompatibility: PyTorch was compiled\s+against \(([\d, ]{1,20})\)"
                                 r" but found runtime version \(([\d, ]{1,20})\)")
# A CUDA extension build (DeepSpeed's JIT ops, apex, flash-attn …) nvcc stopped: a GPU architecture the toolkit does
# not know (`nvcc fatal   : Unsupported gpu architecture 'compute_89'`, read back from the build's final error line),
# or a host compiler it does not support (`#error -- unsupported GNU version! gcc versions later than 12 are not
# supported!`, the same for clang and Visual Studio)
_NVCC_ARCH = re.compile(r"nvcc fatal\s{0,8}: Unsupported gpu architecture '(compute_\d{2,3}[af]?)'")
_HOST_COMPILER = re.compile(r"unsupported (GNU|clang|Microsoft Visual Studio) version! (.{0,100}?supported!)")
_EXTENSION = re.compile(r"Error building extension '([\w.\-]{1,80})'")


def xid(scan: LogReader, name: str, where: str, line: str) -> None:
    m = _XID.search(line)
    if m:
        scan.event(name, "xid", where, line, xid=int(m.group(2)), pci=m.group(1),
                   detail=m.group(5).strip()[:160] or None)


def timeout(scan: LogReader, name: str, where: str, line: str) -> None:
    """The NCCL watchdog's `WorkNCCL(SeqNum=…, OpType=…, … Timeout(ms)=…) ran for … milliseconds`."""
    m = _TIMEOUT.search(line)
    if not m:
        return
    rank = _RANK.search(line)
    scan.event(name, "watchdog_timeout", where, line, rank=int(rank.group(1)) if rank else None,
               seq=int(m.group(1)), op=m.group(2), timeout_ms=int(m.group(3)),
               ran_ms=int(m.group(4)) if m.group(4) else None)


def bootstrap_phase(scan: LogReader, name: str, where: str, line: str) -> None:
    """multiprocessing's `An attempt has been made to start a new process before the current process has finished
    its bootstrapping phase`, with the script line (the last frame outside the libraries) above it."""
    if "bootstrapping phase" not in line:
        return
    if any(e["kind"] == "spawn_bootstrap" and e["where"].startswith(name + " ") for e in scan.events):
        return  # the same message again (every worker prints it)
    frames = [m for m in _MODULE_FRAME.finditer(scan.window.look_back())
              if not any(part in m.group(1) for part in _SITE)]
    fields = {"script": frames[-1].group(1), "script_line": int(frames[-1].group(2))} if frames else {}
    scan.event(name, "spawn_bootstrap", where, line, **fields)


def driver(scan: LogReader, name: str, where: str, line: str) -> None:
    """The driver's and CUDA's own words: too old, forward compatibility refused, missing, mismatched, not ready."""
    if "driver version is insufficient" in line or "cudaErrorInsufficientDriver" in line \
            or "NVIDIA driver on your system is too old" in line:
        scan.event(name, "driver_insufficient", where, line)
    elif "Error 804" in line or "forward compatibility was attempted on non supported HW" in line:
        scan.event(name, "forward_compat_unsupported", where, line)
    elif "Found no NVIDIA driver" in line or "couldn't communicate with the NVIDIA driver" in line:
        scan.event(name, "driver_missing", where, line)
    elif "Driver/library version mismatch" in line:
        scan.event(name, "nvml_mismatch", where, line)
    elif ("system not yet initialized" in line or "cudaErrorSystemNotReady" in line) and "NCCL WARN" not in line:
        # CUDA error 802 from torch's cudaGetDeviceCount() or a CUDA sample (NCCL's own WARN is GD425's)
        scan.event(name, "cuda_system_not_ready", where, line)


def library(scan: LogReader, name: str, where: str, line: str) -> None:
    """A CUDA library other than the one torch was built with: cuDNN's version check, an undefined symbol."""
    m = _CUDNN_INCOMPATIBLE.search(line)
    if m:
        built, found = (".".join(p.strip() for p in g.split(",")) for g in m.groups())
        scan.event(name, "library_mismatch", where, line, library="cudnn", expected=built, found=found)
        return
    m = _UNDEFINED_SYMBOL.search(line)
    if not m:
        return
    symbol, versioned = m.group(1), (m.group(2) or "").lower()
    library = next((lib for prefix, lib in _SYMBOL_LIBRARY if symbol.startswith(prefix) or
                    versioned.startswith("lib" + lib)), None)
    if library:
        scan.event(name, "library_mismatch", where, line, library=library, symbol=symbol)


def unrecognized_local_rank(scan: LogReader, name: str, where: str, line: str) -> None:
    match = _LOCAL_RANK_REFUSED.search(line)
    if match and not any(e["kind"] == "local_rank_refused" for e in scan.events):  # every rank prints it
        scan.event(name, "local_rank_refused", where, line, script=match.group(1), option=match.group(2))


def port_in_use(scan: LogReader, name: str, where: str, line: str) -> None:
    match = _PORT_IN_USE.search(line)
    if match and not any(e["kind"] == "port_in_use" for e in scan.events):  # torch prints it per address tried
        port = match.group(1) or match.group(2)
        scan.event(name, "port_in_use", where, line, port=int(port) if port else None)


def extension_build(scan: LogReader, name: str, where: str, line: str) -> None:
    compiler = _HOST_COMPILER.search(line)
    if compiler:
        if not scan.counts.get("host_compiler_unsupported"):  # every compiled file repeats it
            scan.event(name, "host_compiler_unsupported", where, line, compiler=compiler.group(1),
                       detail=compiler.group(2))
        return
    archs = _NVCC_ARCH.findall(scan.window.look_back())
    if archs and not scan.counts.get("nvcc_arch_unsupported"):
        extension = _EXTENSION.search(line)
        scan.event(name, "nvcc_arch_unsupported", where, line, arch=archs[-1],
                   extension=extension.group(1) if extension else None)


def preprocessing(scan: LogReader, name: str, where: str, line: str) -> None:
    """The progress bars of datasets' map() / tokenization (the first one)."""
    if scan.counts.get("preprocessing", 0) == 0:
        scan.event(name, "preprocessing", where, line)
