"""NCCL's own lines in a log (``host:pid:tid [dev] NCCL INFO|WARN …``) and torch's NCCL errors, read for the log
reader (gpudoctor.ingest.logs): per host, the NCCL version, the network and interfaces NCCL chose and the net
plugin's state; the variables NCCL echoes; and the failures its WARN lines name (events).

Every function takes the log reader (`scan`) and the line it is reading: they are parts of LogScanner, kept here
because NCCL's output has the most forms to parse (2.2 to 2.2x wordings).
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional

from gpudoctor.redact import redact_bytes

from ._common import QUOTE_CHARS, quote
from .log_reader import LogReader
from .normalize import clean_text

MAX_INTERFACES = 16
MAX_ENV_PER_HOST = 64

LINE = re.compile(
    r"([A-Za-z0-9][\w.\-]{0,200}):(\d{1,10}):(\d{1,10}) \[(\d{1,5})\] (?:[\w./\-]{1,100}:\d{1,6} )?"
    r"(?:NCCL )?(INFO|WARN|TRACE|ABORT) ?(.*)")  # NCCL 2.2-2.3 print no `NCCL ` before the level
_VERSION = re.compile(r"NCCL version:? ?(\d{1,3}\.\d{1,3}\.\d{1,3})")
_ENV_ECHO = re.compile(r"((?:NCCL|FI|TORCH_NCCL)_[A-Z0-9_]{1,60}) set by environment to (\S{0,200}?)\.?$")
_USING_NETWORK = re.compile(r"Using (?:network|internal Network) (.{1,60}?)\s*$")  # the latter: NCCL <= 2.3
_VIA_NET = re.compile(r"via NET/([A-Za-z0-9_ ]{1,40}?)(?:/\d|$)")
# `comm 0x… rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0` (NCCL 2.19+): how many nodes the run has
_NODES = re.compile(r"\bnNodes (\d{1,6})\b")
_IFACES = re.compile(r"\[\d{1,3}\]([\w.\-@]{1,40}):")
# `Bootstrap : Using eth0:10.0.0.1<0>` (NCCL >= 2.12), `Bootstrap : Using [0]eth0:…` (2.4-2.11), and NCCL 2.2-2.3's
# `NET : Using interface lo:127.0.0.1<0>` (the interfaces it bootstraps and sends over)
_BOOTSTRAP = re.compile(r"(?:Bootstrap ?: ?Using|^NET : Using interface) (?:\[\d{1,3}\])?([\w.\-@]{1,40}):")
_OOB = re.compile(r"OOB ([\w.\-@]{1,40}):")
# A socket NCCL could not open to another rank, in each NCCL's wording: `Connect to 10.0.0.4<56849> failed : No
# route to host` (2.4-2.11; 2.12-2.17 with `Net : `), `socketStartConnect: Connect to … failed : …` (2.18+),
# `socketPollConnect: Connect to … returned 113(No route to host) errno 115(…)` (2.19+), and NCCL 2.2-2.3's
# `Call to connect failed : Connection timed out` (no address)
_CONNECT_FAILED = re.compile(r"(?:[Cc]onnect to (\S{1,80}) (?:failed : |returned \d{1,4}\()|Call to connect "
                             r"(?:failed|timeout) : )([^)]{1,120})")
# A work completion InfiniBand returned with an error: `NET/IB : Got completion with error 12, opcode 1, len 0, vendor
# err 129` (NCCL <= 2.11), `NET/IB : Got completion from peer 10.1.0.8<54862> with status=12 opcode=0 len=0 vendor err
# 129 (Recv)` (later; `NET/IBext`, `NET/IBP` from plugins; `from peer with error 4` where the paste left the address
# out)
_IB_COMPLETION = re.compile(r"Got completion (?:from peer ?(\S{0,80}) )?with (?:error |status=)(\d{1,3})")
_NCCL_ERROR = re.compile(r"(unhandled system error|unhandled cuda error|invalid usage|internal error|"
                         r"remote process exited or there was a network error|invalid argument)")
_ERROR_WORDS = ("NCCL error", "ncclSystemError", "ncclInvalidUsage", "ncclRemoteError", "ncclInternalError")
# torch's own lines after `Last error:` where NCCL gave none (ProcessGroupNCCL's C++ stack, the Python traceback)
_NOT_A_WARN = ("Exception raised from", "Traceback", "frame #")


def _mark(scan: LogReader, entry: Dict[str, Any], key: str, where: str, line: str) -> None:
    entry.setdefault(key, {"where": where, "line": quote(line)})


def version(scan: LogReader, name: str, unit: str, where: str, line: str) -> None:
    """`NCCL version 2.18.5+cuda12.2`: the first one each host (or file) prints."""
    v = _VERSION.search(line)
    if v:
        scan.note(name)
        entry = scan.host_entry(unit)
        if "nccl_version" not in entry:
            entry["nccl_version"] = v.group(1)
            entry["nccl_version_at"] = where


def read_line(scan: LogReader, name: str, where: str, line: str, host: str, level: str, msg: str) -> None:
    """One line NCCL printed on `host` (`msg`: what follows its level)."""
    scan.note(name)
    entry = scan.host_entry(host)
    if "NCCL version" in msg:
        version(scan, name, host, where, line)
    _env_echo(scan, entry, host, where, msg)
    _network(scan, entry, where, line, msg)
    _transport(scan, name, entry, host, where, line, msg)
    if "libibverbs" in msg and ("Failed to open" in msg or "not found" in msg):
        _mark(scan, entry, "ibverbs_missing", where, line)
    _plugin(scan, entry, msg, where, line)
    if level == "WARN":
        scan.last_warn = quote(line)
        warn(scan, name, where, line, host, msg)


def _env_echo(scan: LogReader, entry: Dict[str, Any], host: str, where: str, msg: str) -> None:
    """`NCCL_IB_HCA set by environment to mlx5_0`: the run's first value, and each host's."""
    env = _ENV_ECHO.search(msg)
    if env:
        scan.nccl_env.setdefault(env.group(1), {"value": env.group(2), "where": where, "host": host})
        echoed = entry.setdefault("nccl_env", {})
        if len(echoed) < MAX_ENV_PER_HOST:
            echoed.setdefault(env.group(1), {"value": env.group(2), "where": where})


def _network(scan: LogReader, entry: Dict[str, Any], where: str, line: str, msg: str) -> None:
    """The network NCCL chose (`Using network IB`), the one a channel goes over (`via NET/Socket/0`), or P2P."""
    if "Using network" in msg or "Using internal Network" in msg:
        m = _USING_NETWORK.search(msg)
        if m:
            entry.setdefault("network", m.group(1))
            _mark(scan, entry, "network_at", where, line)
    elif "via NET/" in msg:
        m = _VIA_NET.search(msg)
        if m:
            entry.setdefault("channel_network", m.group(1).strip())
            _mark(scan, entry, "channel_network_at", where, line)
    elif "via P2P/" in msg:  # `Channel 00/0 : 0[0] -> 1[1] via P2P/IPC` (also P2P/CUMEM, P2P/direct pointer)
        _mark(scan, entry, "p2p_at", where, line)
    elif "via SHM/" in msg:  # `Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct`: a rank of the same host
        _mark(scan, entry, "shm_at", where, line)
    nodes = _NODES.search(msg)
    if nodes:
        entry["nodes_in_run"] = max(int(nodes.group(1)), entry.get("nodes_in_run", 0))


def _transport(scan: LogReader, name: str, entry: Dict[str, Any], host: str, where: str, line: str,
               msg: str) -> None:
    """IB used or not found, the interfaces the socket transport lists, the bootstrap interface."""
    if msg.startswith("NET/IB") and ": Using" in msg:
        _mark(scan, entry, "ib_used", where, line)
        oob = _OOB.search(msg)
        if oob:
            _add_interface(scan, entry, oob.group(1), where, line)
    elif msg.startswith("NET/IB") and "No device found" in msg:
        _mark(scan, entry, "ib_no_device", where, line)
    elif msg.startswith("NET/Socket") and "Using" in msg:
        _mark(scan, entry, "socket_listed", where, line)
        for iface in _IFACES.findall(msg):
            _add_interface(scan, entry, iface, where, line, "socket_interfaces")
    elif "Bootstrap" in msg or msg.startswith("NET : Using interface"):
        m = _BOOTSTRAP.search(msg)
        if m:
            _add_interface(scan, entry, m.group(1), where, line)
        elif "no socket interface found" in msg or "no usable" in msg:
            scan.event(name, "no_socket_interface", where, line, host=host)


def _add_interface(scan: LogReader, entry: Dict[str, Any], iface: str, where: str, line: str,
                   key: str = "interfaces") -> None:
    """`interfaces`: bootstrap and IB out-of-band; `socket_interfaces`: those the socket transport lists."""
    names = entry.setdefault(key, [])
    if iface not in names and len(names) < MAX_INTERFACES:
        names.append(iface)
        _mark(scan, entry, key + "_at", where, line)


def _plugin_state(msg: str) -> Optional[str]:
    """What a line says of the net plugin (aws-ofi-nccl, another `libnccl-net.so`): failed, not found, lacking its
    symbol, loaded; None where it says nothing of it."""
    if "NET/OFI" in msg and ("Could not find any optimal provider" in msg or "failed" in msg.lower()
                             or "Unable to" in msg or "No eligible providers" in msg):
        return "plugin_failed"
    if "Failed to initialize any NET plugin" in msg or "Failed to initialize NET plugin" in msg:
        return "plugin_failed"
    if "NET/Plugin" in msg and ("No plugin found" in msg or "Could not find" in msg
                                or "cannot open shared object" in msg):
        return "plugin_not_found"
    if "NET/Plugin" in msg and "Failed to find ncclNetPlugin" in msg:
        return "plugin_symbol_missing"
    if "Loaded net plugin" in msg or "NET/OFI Selected Provider" in msg or "Using network AWS" in msg \
            or "Initializing aws-ofi-nccl" in msg:
        return "plugin_loaded"
    return None


def _plugin(scan: LogReader, entry: Dict[str, Any], msg: str, where: str, line: str) -> None:
    state = _plugin_state(msg)
    if state is not None:
        _mark(scan, entry, state, where, line)


def warn(scan: LogReader, name: str, where: str, line: str, host: Optional[str], msg: str) -> None:
    """The failure an NCCL WARN names (`host`: where NCCL printed it; None for one torch repeats)."""
    if "Duplicate GPU detected" in msg:
        scan.event(name, "duplicate_gpu", where, line, host=host)
    elif "ibv_reg_mr" in msg or "ibv_reg_dmabuf_mr" in msg:
        scan.event(name, "ibv_reg_mr", where, line, host=host)
    elif "Cuda failure" in msg and "out of memory" in msg:
        scan.event(name, "cuda_oom", where, line, host=host, source="nccl")
    elif "system not yet initialized" in msg or "NVLS" in msg or "fabric" in msg.lower() or "cuMulticast" in msg:
        scan.event(name, "fabric_manager", where, line, host=host)
    elif "shared memory" in msg.lower() or "/dev/shm" in msg:
        scan.event(name, "shm_failure", where, line, host=host)
    elif "is neither AF_INET" in msg:  # `ncclSocketInit: connecting to address with family 0 is neither …`:
        scan.event(name, "no_socket_interface", where, line, host=host)  # no interface gave it an address
    elif "Got completion" in msg:
        m = _IB_COMPLETION.search(msg)
        if m:
            scan.event(name, "ib_completion_error", where, line, host=host, peer=m.group(1), status=int(m.group(2)))
    elif "onnect" in msg:
        m = _CONNECT_FAILED.search(msg)
        if m:
            scan.event(name, "connect_failed", where, line, host=host, peer=m.group(1), reason=m.group(2).strip())


def nccl_error(scan: LogReader, name: str, where: str, line: str) -> None:
    """torch's `NCCL error in: …, unhandled system error` and `ncclSystemError: …` lines."""
    if not any(word in line for word in _ERROR_WORDS):
        return
    m = _NCCL_ERROR.search(line)
    v = _VERSION.search(line)
    scan.event(name, "nccl_error", where, line, error=m.group(1) if m else None,
               nccl_version=v.group(1) if v else None, reason=scan.last_warn)


def last_error(scan: LogReader, name: str, where: str, line: str) -> None:
    """NCCL's last WARN as torch repeats it under `Last error:` (ncclGetLastError, NCCL 2.13 and later): the
    cause of the NCCL error above it where the run had no NCCL_DEBUG output. Read as the WARN it is."""
    below = f"{name} line {int(where.rsplit(' ', 1)[1]) + 1}"
    prefix = line[:line.find("Last error:")].strip()  # a launcher's `rank0:` / `host: ` before each line
    if scan.window.ends_chunk():  # the line below starts the next chunk
        scan.below_pending = (name, below, prefix)
    else:
        below_last_error(scan, name, below, prefix, scan.window.next_line())


def below_last_error(scan: LogReader, name: str, below: str, prefix: str, text: str) -> None:
    """The line under `Last error:` (`text`, at `below`): the reason of the NCCL errors above, and its event."""
    text = redact_bytes(text.encode()).decode("utf-8", errors="replace")
    text = clean_text(text).strip() if ("\x1b" in text or "\r" in text) else text.strip()
    if prefix and text.startswith(prefix):
        text = text[len(prefix):].strip()
    failed = [e for e in scan.events if e["kind"] == "nccl_error" and "reason" not in e]
    if not failed or not text or len(text) > QUOTE_CHARS or text.startswith(_NOT_A_WARN):
        return  # not under torch's NCCL error, or NCCL had no last error to give
    scan.last_warn = text
    for event in failed:  # torch's `NCCL error in: …` and `ncclXxxError: …` lines above it
        event["reason"] = text
    seen = scan.events_seen
    if "no socket interface found" in text or "No usable listening interface" in text:
        scan.event(name, "no_socket_interface", below, text)
    else:
        warn(scan, name, below, text, None, text)
    if scan.events_seen == seen:
        scan.message(name, below, f"NCCL WARN {text}", ("NCCL",), explained=False, shown=text)
