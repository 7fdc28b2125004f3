"""The logs of a failed run: NCCL ``INFO``/``WARN`` output, Python tracebacks and console output, kernel messages.

    scanner = LogScanner()
    scanner.feed("rank0.log", chunk, first_line=1)    # UTF-8 bytes ending at a line boundary; any size, any number
    facts, evidence = scanner.result()                  # {"logs": {...}}, or {} when nothing was recognised

Streaming: each chunk is searched for the literal ``ANCHORS`` (``bytes.find``, a C scan; no decoding); only the
lines that hold one are decoded, redacted (gpudoctor.redact) and parsed, so a 100 MB training log takes about a
second (benchmarks/log_throughput.py) whatever the size of the atlas of messages, and memory is bounded by the chunk
size and the caps on what is kept (``MAX_EVENTS_PER_KIND`` events of each kind).

What is recorded is what the lines prove, no more (docs/logs.md):

- ``logs.hosts``: per host (the ``host:pid:tid [dev]`` prefix NCCL puts on each line; the file when a line has
  none), the NCCL version, the network NCCL chose (``Using network IB``, ``via NET/Socket``, ``NET/IB : Using``),
  the socket/bootstrap interfaces, and whether IB was looked for and not found, libibverbs was missing, a net
  plugin was not found, failed, or loaded.
- ``logs.nccl_env``: the variables NCCL echoes (``NCCL_IB_HCA set by environment to mlx5_0``).
- ``logs.events``: each failure line with its kind (``xid``, ``cuda_oom``, ``watchdog_timeout``, ``sigkill``,
  ``oom_killer`` …), where it is (file and line), the host, and the numbers the line carries.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from gpudoctor.redact import redact_bytes

from . import atlas
from .normalize import clean_text

MAX_EVENTS_PER_KIND = 20
MAX_LINE_CHARS = 2000
MAX_HOSTS = 4096
MAX_INTERFACES = 16
QUOTE_CHARS = 240

# A line is parsed only if it holds one of these. Each is one pass of `bytes.find` over a chunk, so there are few:
# every message the readers below look for holds one of them (an error line "rror", an OOM "emory", a kill "ill"
# — Killed, killed, oom-kill, oom_kill — or "exitcode", a driver problem "river" …). Case-sensitive, so the search
# stays a plain byte scan.
ANCHORS = (
    b"NCCL", b"NVRM:", b"rror", b"emory", b"ill", b"exitcode", b"bootstrapping", b"river", b"xception",
    b"examples/s", b"apabilit", b"nsufficient", b"uilding wheel", b"nvcc fatal", b"return code",
    b"detected CUDA version", b"already in use", b"failed to connect", b"bf16", b" WARN ", b"[c10d]",
    b"NVML library", b"Installed CUDA version", b"fp8e4nv",
)
# The parts of a run a log shows (catalog.LOG_PARTS), each proven by any of these bytes in it: a rule that judges
# only the log passes only where the log shows the part it judges. Searched in each file's first SHOWS_HEAD_BYTES
# and its last LOOK_BACK_BYTES (a run's setup is at its start, how it ended at its end), so a long log costs nothing.
SHOWS = {
    "nccl": (b"NCCL INFO ",),
    "kernel": (b"NVRM: ", b" kernel: ", b"invoked oom-killer", b"Out of memory: Kill"),
    "run": (b"it/s]", b"s/it]", b"'loss'", b"loss:", b"loss=", b"loss =", b"samples/s", b"examples/s", b"tokens/s",
            b"samples_per_second"),
    "exit": (b"exitcode", b"return code", b"exit code", b"Exited with", b"ExitCode"),
    "build": (b"Building extension module", b"Emitting ninja build file", b"Loading extension module", b"nvcc",
              b"running build_ext", b"Building wheel"),
}
SHOWS_HEAD_BYTES = 4 * 1024 * 1024
_ANCHOR_TEXT = {word: word.decode() for word in ANCHORS}
_MESSAGE_KEYS = ("kind", "where", "line", "message", "rule", "proves", "severity", "fix", "host")
LOOK_BACK_BYTES = 32 * 1024  # a traceback's frames above its error line

_NCCL_LINE = re.compile(
    r"([A-Za-z0-9][\w.\-]{0,200}):(\d{1,10}):(\d{1,10}) \[(\d{1,5})\] (?:[\w./\-]{1,100}:\d{1,6} )?"
    r"(?:NCCL )?(INFO|WARN|TRACE|ABORT) ?(.*)")  # NCCL 2.2-2.3 print no `NCCL ` before the level
_NCCL_VERSION = re.compile(r"NCCL version:? ?(\d{1,3}\.\d{1,3}\.\d{1,3})")
_ENV_ECHO = re.compile(r"((?:NCCL|FI|TORCH_NCCL)_[A-Z0-9_]{1,60}) set by environment to (\S{0,200}?)\.?$")
_USING_NETWORK = re.compile(r"Using (?:network|internal Network) (.{1,60}?)\s*$")  # the latter: NCCL <= 2.3
_VIA_NET = re.compile(r"via NET/([A-Za-z0-9_ ]{1,40}?)(?:/\d|$)")
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

# argparse refusing the local-rank argument a launcher passed: `train.py: error: unrecognized arguments: --local-rank=0`
_LOCAL_RANK_REFUSED = re.compile(r"(?:([\w.\-]{1,100}): )?error: unrecognized arguments:.{0,500}?(--local[-_]rank)\b")
# c10d's store could not listen on the rendezvous port: `The server socket has failed to bind to [::]:29500 (errno: 98
# - Address already in use)` (older torch), `… failed to listen on any local network address. port: 29500, useIpv6:
# false, code: -98, name: EADDRINUSE` (newer torch; the port is not always printed)
_PORT_IN_USE = re.compile(r"failed to (?:bind to|listen on) \S{0,60}?:(\d{1,5}) \(errno: 98\b|"
                          r"(?:port: (\d{1,5}), )?useIpv6: \w{1,5}, code: -98, name: EADDRINUSE")
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]{4,20})\): (\d{1,4})(?:, pid=([^,\s]{1,20}))?"
                  r"(?:, name=([^,]{1,80}))?,? ?(.*)")
_TIMEOUT = re.compile(r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+)[^)]{0,200}?Timeout\(ms\)=(\d+)\)"
                      r"(?: ran for (\d+) milliseconds)?")
_RANK = re.compile(r"\[[Rr]ank ?(\d{1,6})\]")
_OOM_TORCH = re.compile(r"Tried to allocate ([\d.]+ [KMGT]?i?B)")
_OOM_GPU = re.compile(r"GPU ?(\d{1,3})")
# a number starts only where its run of digits starts: one try per run, linear in the line (a line of 20,000
# digits tried every position of the run: quadratic)
_OOM_TOTAL = re.compile(r"(?<![\d.])([\d.]+ [KMGT]?i?B) total capacity|total capacity of ([\d.]+ [KMGT]?i?B)")
_OOM_FREE = re.compile(r"(?<![\d.])([\d.]+ [KMGT]?i?B) free|of which ([\d.]+ [KMGT]?i?B) is free")
# torch 2.1+ lists the processes NVML sees on the GPU: `Process 7478 has 4.08 GiB memory in use.` for the others,
# `Including non-PyTorch memory, this process has …` for itself. Without that clause torch did not find itself (a
# container's PID namespace), so a `Process N` may be the job itself and none is taken as another process.
_OOM_OTHER = re.compile(r"Process (\d{1,10}) has ([\d.]{1,10} [KMGT]?i?B) memory in use")
# torch 1.x-2.0: `(GPU 0; 11.17 GiB total capacity; 505.96 MiB already allocated; 12.50 MiB free; 530.00 MiB reserved in
# total by PyTorch)`: what is neither free nor PyTorch's is held outside its cache
_OOM_RESERVED = re.compile(r"([\d.]{1,10} [KMGT]?i?B) reserved in total by PyTorch")
_EXITCODE_9 = re.compile(r"exitcode\s*:?\s*-9\b(?:.{0,40}?local_rank:? ?(\d{1,6}))?(?:.{0,40}?pid:? ?(\d{1,10}))?")
# the shell's report of a child it lost to SIGKILL: `bash: line 1: 4242 Killed   python train.py`, job control's
# `[1]+  Killed   python train.py`, or `Killed` written after a progress bar that had no newline (`…it/s]Killed`)
_SHELL_KILLED = re.compile(r"\d{1,10} Killed\s+\S|^\[\d{1,4}\][+-]?\s+Killed\s+\S|\]Killed\.?$")
# The memory evidence a log can hold (docs/logs.md; each form as the kernel, SLURM and Kubernetes print it):
# `Out of memory: Killed process 14750 (python3) total-vm:…kB, anon-rss:…kB` (also after `Memory cgroup out of
# memory:`; older kernels: `Killed process 28438 (java), UID 0, total-vm:…, anon-rss:…` after `Kill process … or
# sacrifice child`)
_KILLED_PROCESS = re.compile(r"Killed process (\d{1,10}) \(([^)]{1,64})\)(?:.{0,60}?total-vm:\d+kB)?"
                             r"(?:.{0,40}?anon-rss:(\d+)kB)?")
_KILL_PROCESS = re.compile(r"out of memory: Kill process (\d{1,10}) \(([^)]{1,64})\)")
# `oom-kill:constraint=CONSTRAINT_MEMCG,…,task=python3,pid=14750,uid=1000`
_OOM_KILL_SUMMARY = re.compile(r"oom-kill:constraint=(CONSTRAINT_\w{1,20})"
                               r"(?:.{0,600}?,task=([^,]{1,64}),pid=(\d{1,10}))?")
_INVOKED = re.compile(r"(\S{1,64}) invoked oom-killer:")
_MEMORY_EVENTS = re.compile(r"^oom_kill (\d{1,12})$")  # cgroup memory.events (v2) / memory.oom_control (v1)
# slurmstepd: `Detected 1 oom-kill event(s) in StepId=191.batch cgroup.` (older: `in step 3495064.0 cgroup`;
# newer: `Detected 2 oom_kill events in StepId=1234.13. Some of the step tasks have been OOM Killed.`)
_SLURM_OOM = re.compile(r"Detected (\d{1,9}) oom[-_]kill events?(?:\(s\))? "
                        r"in (?:StepId=|step )([\w.]{1,40}?)\.?(?: |$)")
_SRUN_OOM = re.compile(r"srun: error: ([\w.\-]{1,200}): tasks? ([\d\-,]{1,40}): Out Of Memory")
# Kubernetes: `Reason:       OOMKilled` (kubectl describe), `"reason": "OOMKilled"`, a STATUS column; Docker's
# `"OOMKilled": true` (never its `false`)
_K8S_OOM = re.compile(r"(?:Reason:\s{1,40}OOMKilled\b|\"reason\":\s?\"OOMKilled\""
                      r"|\s\d{1,3}/\d{1,3}\s{1,40}OOMKilled\s)")
_MODULE_FRAME = re.compile(r'File "([^"]{1,500})", line (\d{1,7}), in <module>')
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
# torch's own lines after `Last error:` where NCCL gave none (ProcessGroupNCCL's C++ stack, the Python traceback)
_NOT_A_WARN = ("Exception raised from", "Traceback", "frame #")
_SRUN_LABEL = re.compile(r"(\d{1,6}): ")  # `srun --label`: the task's number before each of its lines
MAX_ENV_PER_HOST = 64
# journalctl / syslog: `Mar 04 10:14:55 gpu-a02 kernel: …` names the host the kernel line comes from
_SYSLOG_HOST = re.compile(r"(?:\d{1,6}: )?(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT[\d:.]{8,15}"
                          r"(?:[+-]\d\d:?\d\d|Z)?) ([A-Za-z0-9][\w.\-]{0,200}) kernel:")
_SITE = ("site-packages", "dist-packages", "/lib/python", "<frozen", "\\lib\\")


# An event's fields the fact schema types as integers ([logs.fields.events]): a message of the atlas states them as
# text, the readers below as numbers (GD424 compares ranks)
_INT_FIELDS = frozenset(("local_rank", "pid", "ran_ms", "rank", "script_line", "seq", "timeout_ms", "xid"))


def _quote(line: str) -> str:
    return line if len(line) <= QUOTE_CHARS else line[:QUOTE_CHARS] + "..."


class LogScanner:
    """Reads log chunks and keeps what they prove about the run (see the module docstring)."""

    def __init__(self) -> None:
        self.files: List[str] = []
        self.lines = 0
        self.hosts: Dict[str, Dict[str, Any]] = {}
        self.nccl_env: Dict[str, Dict[str, str]] = {}
        self.events: List[Dict[str, Any]] = []
        self.counts: Dict[str, int] = {}
        self.message_facts: Dict[str, Dict[str, Any]] = {}  # fact path → what a message states, where
        self.message_gpus: Dict[str, Dict[str, Any]] = {}  # GPU name → the compute capability a message states
        self.shows: List[str] = []  # the parts of a run the log shows (SHOWS)
        self.shows_head_bytes = SHOWS_HEAD_BYTES  # of each file, searched for them (and its last LOOK_BACK_BYTES)
        self._read: Dict[str, int] = {}  # file → bytes fed so far
        self._events_seen = 0
        self._found_in: Dict[str, int] = {}
        self._last_warn: Optional[str] = None
        self._unplaced: List[Tuple[Dict[str, Any], str, Optional[str]]] = []  # (event, file, task) with no host
        self._tail: Dict[str, bytes] = {}
        self._at: Tuple[str, bytes, int] = ("", b"", 0)
        self._last_host: Dict[str, str] = {}
        self._label: Optional[str] = None  # the `srun --label` task of the line being read
        self._label_host: Dict[Tuple[str, str], str] = {}  # (file, task) → the host its NCCL lines name
        self._file_hosts: Dict[str, List[str]] = {}  # file → the first two hosts its NCCL lines name
        self._below_pending: Optional[Tuple[str, str, str]] = None  # a `Last error:` that ended a chunk
        # Called with (file, line number, line, the events it gave) for each line read (a run's reader,
        # gpudoctor.ingest.run_logs, places them per rank); events beyond MAX_EVENTS_PER_KIND are passed too.
        self.observer: Optional[Callable[[str, int, str, List[Dict[str, Any]]], None]] = None
        self._line_events: List[Dict[str, Any]] = []

    # -- reading ----------------------------------------------------------------------------------------
    def feed(self, name: str, data: bytes, first_line: int = 1) -> int:
        """Scan one chunk of `name` (UTF-8 bytes, whole lines, line `first_line` first); returns the number of
        newlines in it (the number the next chunk's first line is ahead by)."""
        if name not in self.files:
            self.files.append(name)
        read = self._read.get(name, 0)
        if read < self.shows_head_bytes:
            self._see_parts(data[:self.shows_head_bytes - read])
        self._read[name] = read + len(data)
        if self._below_pending is not None and self._below_pending[0] == name:
            first = data.split(b"\n", 1)[0][:MAX_LINE_CHARS].decode("utf-8", errors="replace")
            self._below_last_error(*self._below_pending, first)
            self._below_pending = None
        starts: Dict[int, List[str]] = {}
        for word in ANCHORS:
            pos = data.find(word)
            while pos >= 0:
                starts.setdefault(data.rfind(b"\n", 0, pos) + 1, []).append(_ANCHOR_TEXT[word])
                end = data.find(b"\n", pos)
                if end < 0:
                    break
                pos = data.find(word, end)
        counted_to, line_no = 0, first_line
        for start in sorted(starts):
            line_no += data.count(b"\n", counted_to, start)
            counted_to = start
            end = data.find(b"\n", start)
            raw = redact_bytes(data[start:end if end >= 0 else len(data)])[:MAX_LINE_CHARS]
            self._at = (name, data, start)
            self._line(name, line_no, raw.decode("utf-8", errors="replace"), tuple(starts[start]))
        lines = line_no - first_line + data.count(b"\n", counted_to)  # a last line without its newline is not counted
        self._tail[name] = (self._tail.get(name, b"") + data[-LOOK_BACK_BYTES:])[-LOOK_BACK_BYTES:]
        self.lines += lines
        return lines

    def _see_parts(self, data: bytes) -> None:
        for part, words in SHOWS.items():
            if part not in self.shows and any(word in data for word in words):
                self.shows.append(part)

    def _look_back(self) -> str:
        """The text just above the line being read (up to LOOK_BACK_BYTES, across chunks of the same file)."""
        name, data, start = self._at
        window = data[max(0, start - LOOK_BACK_BYTES):start]
        if len(window) < LOOK_BACK_BYTES:
            window = self._tail.get(name, b"")[-(LOOK_BACK_BYTES - len(window)):] + window
        if len(window) >= LOOK_BACK_BYTES:  # a line cut at the start could hold a secret without its name
            window = window[window.find(b"\n") + 1:] if b"\n" in window else b""
        return redact_bytes(window).decode("utf-8", errors="replace")

    def file_host(self, name: str) -> Optional[str]:
        """The one host file `name`'s NCCL lines name (None where they name none, or several)."""
        hosts = self._file_hosts.get(name, [])
        return hosts[0] if len(hosts) == 1 else None

    def found_in(self, name: str) -> bool:
        """Whether anything in file `name` was recognised."""
        return self._found_in.get(name, 0) > 0

    # -- one line ---------------------------------------------------------------------------------------
    def _line(self, name: str, line_no: int, raw: str, anchors: Tuple[str, ...] = ()) -> None:
        line = clean_text(raw).strip() if ("\x1b" in raw or "[" in raw or "\r" in raw) else raw.strip()
        if not line:
            return
        where = f"{name} line {line_no}"
        label = _SRUN_LABEL.match(line) if line[0].isdigit() else None
        self._label = label.group(1) if label else None
        seen = self._events_seen  # a line a reader below explains is not read again as a message of the atlas
        self._line_events = []
        m = _NCCL_LINE.search(line) if "NCCL" in line or " WARN " in line else None
        if m:
            self._last_host[name] = m.group(1)
            self._attribute(name, m.group(1))
            self._nccl(name, where, line, m.group(1), m.group(5), m.group(6).strip())
        elif "NCCL version" in line and "NCCL version" == line.lstrip("[]0123456789: ")[:12]:
            # printed without a prefix by rank 0, right after its own INFO lines: the host of its `srun --label`
            # task, else the host last seen in this file
            host = self._label_host.get((name, self._label)) if self._label is not None else None
            self._version(name, host or self._last_host.get(name, "file " + name), where, line)
        called = set()
        for trigger, handler in _HANDLERS:
            if trigger in line and handler not in called:
                called.add(handler)
                handler(self, name, where, line)
        self._message(name, where, line, anchors, explained=self._events_seen != seen)
        if self.observer is not None:
            self.observer(name, line_no, line, self._line_events)

    def raw_above(self, size: int) -> bytes:
        """Up to `size` bytes of the chunk above the line being read, as they are (not redacted: for timestamps)."""
        _, data, start = self._at
        return data[max(0, start - size):start]

    def _message(self, name: str, where: str, line: str, anchors: Tuple[str, ...], explained: bool,
                 shown: Optional[str] = None) -> None:
        """A message of the atlas (gpudoctor.ingest.atlas): the facts it states, and its event where no reader
        above explained the line (`shown`: the text the log holds, where `line` is how NCCL printed it)."""
        found = atlas.match(line, anchors, self._next_line, self._look_back, self._previous_line)
        if found is None:
            return
        message, m = found
        line = shown or line
        values = atlas.fact_values(message, m)
        for path, value in values.items():
            if not path.startswith("gpu."):
                self._state(path, value, where, line)
        if "gpu.name" in values and "gpu.cc" in values:
            self._state_gpu(values["gpu.name"].strip(), values["gpu.cc"], where, line)
        if explained:
            return
        fields = {k: int(v) if k in _INT_FIELDS and re.fullmatch(r"-?\d{1,18}", v) else v
                  for k, v in m.groupdict().items() if v is not None}
        self._event(name, message.event, where, line, message=message.id, rule=message.rule, proves=message.proves,
                    severity=message.severity, fix=message.fix,
                    **{k: v for k, v in fields.items() if k not in _MESSAGE_KEYS})

    def _state(self, path: str, value: Any, where: str, line: str) -> None:
        """Keep a fact a message states; another message that states another value makes it contradicted."""
        stated = self.message_facts.get(path)
        if stated is None:
            if len(self.message_facts) < MAX_HOSTS:
                self.message_facts[path] = {"value": value, "where": where, "line": _quote(line)}
        elif stated["value"] != value and "contradicted" not in stated:
            stated["contradicted"] = {"value": value, "where": where, "line": _quote(line)}

    def _state_gpu(self, name: str, cc: str, where: str, line: str) -> None:
        """Keep the compute capability a message states for a GPU it names; another that says otherwise makes it
        contradicted."""
        stated = self.message_gpus.get(name)
        if stated is None:
            if len(self.message_gpus) < MAX_HOSTS:
                self.message_gpus[name] = {"cc": cc, "where": where, "line": _quote(line)}
        elif stated["cc"] != cc:
            stated["contradicted"] = True

    def _next_line(self) -> str:
        """The line after the one being read (within the chunk)."""
        _, data, start = self._at
        end = data.find(b"\n", start)
        if end < 0:
            return ""
        after = data.find(b"\n", end + 1)
        return data[end + 1:after if after >= 0 else len(data)][:MAX_LINE_CHARS].decode("utf-8", errors="replace")

    def _previous_line(self) -> str:
        """The line before the one being read (the last of the previous chunk of the same file at a chunk's start),
        as `_next_line` reads the one after it: for a message a line break cut (the line read is the evidence)."""
        name, data, start = self._at
        if start == 0:
            data, start = self._tail.get(name, b""), len(self._tail.get(name, b""))
            if data.endswith(b"\n"):
                data, start = data + b"\n", start + 1
        if start == 0:
            return ""
        first = data.rfind(b"\n", 0, start - 1) + 1
        return data[first:start - 1][:MAX_LINE_CHARS].decode("utf-8", errors="replace")

    def _attribute(self, name: str, host: str) -> None:
        """Remember which host a file and an `srun --label` task belong to (for lines that name no host)."""
        seen = self._file_hosts.setdefault(name, [])
        if host not in seen and len(seen) < 2:
            seen.append(host)
        if self._label is not None and len(self._label_host) < MAX_HOSTS:
            self._label_host.setdefault((name, self._label), host)

    def _host(self, host: str) -> Dict[str, Any]:
        entry = self.hosts.get(host)
        if entry is None:
            if len(self.hosts) >= MAX_HOSTS:
                return {}
            entry = self.hosts[host] = {}
        return entry

    def _mark(self, entry: Dict[str, Any], key: str, where: str, line: str) -> None:
        entry.setdefault(key, {"where": where, "line": _quote(line)})

    def _note(self, name: str) -> None:
        self._found_in[name] = self._found_in.get(name, 0) + 1

    def _version(self, name: str, unit: str, where: str, line: str) -> None:
        v = _NCCL_VERSION.search(line)
        if v:
            self._note(name)
            entry = self._host(unit)
            if "nccl_version" not in entry:
                entry["nccl_version"] = v.group(1)
                entry["nccl_version_at"] = where

    def _nccl(self, name: str, where: str, line: str, host: str, level: str, msg: str) -> None:
        self._note(name)
        entry = self._host(host)
        if "NCCL version" in msg:
            self._version(name, host, where, line)
        env = _ENV_ECHO.search(msg)
        if env:
            self.nccl_env.setdefault(env.group(1), {"value": env.group(2), "where": where, "host": host})
            echoed = entry.setdefault("nccl_env", {})
            if len(echoed) < MAX_ENV_PER_HOST:
                echoed.setdefault(env.group(1), {"value": env.group(2), "where": where})
        if "Using network" in msg or "Using internal Network" in msg:
            m = _USING_NETWORK.search(msg)
            if m:
                entry.setdefault("network", m.group(1))
                self._mark(entry, "network_at", where, line)
        elif "via NET/" in msg:
            m = _VIA_NET.search(msg)
            if m:
                entry.setdefault("channel_network", m.group(1).strip())
                self._mark(entry, "channel_network_at", where, line)
        elif "via P2P/" in msg:  # `Channel 00/0 : 0[0] -> 1[1] via P2P/IPC` (also P2P/CUMEM, P2P/direct pointer)
            self._mark(entry, "p2p_at", where, line)
        if msg.startswith("NET/IB") and ": Using" in msg:
            self._mark(entry, "ib_used", where, line)
            oob = _OOB.search(msg)
            if oob:
                self._add_interface(entry, oob.group(1), where, line)
        elif msg.startswith("NET/IB") and "No device found" in msg:
            self._mark(entry, "ib_no_device", where, line)
        elif msg.startswith("NET/Socket") and "Using" in msg:
            self._mark(entry, "socket_listed", where, line)
            for iface in _IFACES.findall(msg):
                self._add_interface(entry, iface, where, line, "socket_interfaces")
        elif "Bootstrap" in msg or msg.startswith("NET : Using interface"):
            m = _BOOTSTRAP.search(msg)
            if m:
                self._add_interface(entry, m.group(1), where, line)
            elif "no socket interface found" in msg or "no usable" in msg:
                self._event(name, "no_socket_interface", where, line, host=host)
        if "libibverbs" in msg and ("Failed to open" in msg or "not found" in msg):
            self._mark(entry, "ibverbs_missing", where, line)
        self._plugin(entry, msg, where, line)
        if level == "WARN":
            self._last_warn = _quote(line)
            self._nccl_warn(name, where, line, host, msg)

    def _add_interface(self, entry: Dict[str, Any], iface: str, where: str, line: str,
                       key: str = "interfaces") -> None:
        """`interfaces`: bootstrap and IB out-of-band; `socket_interfaces`: those the socket transport lists."""
        names = entry.setdefault(key, [])
        if iface not in names and len(names) < MAX_INTERFACES:
            names.append(iface)
            self._mark(entry, key + "_at", where, line)

    def _plugin(self, entry: Dict[str, Any], msg: str, where: str, line: str) -> None:
        if "NET/OFI" in msg and ("Could not find any optimal provider" in msg or "failed" in msg.lower()
                                 or "Unable to" in msg or "No eligible providers" in msg):
            self._mark(entry, "plugin_failed", where, line)
        elif "Failed to initialize any NET plugin" in msg or "Failed to initialize NET plugin" in msg:
            self._mark(entry, "plugin_failed", where, line)
        elif "NET/Plugin" in msg and ("No plugin found" in msg or "Could not find" in msg
                                      or "cannot open shared object" in msg):
            self._mark(entry, "plugin_not_found", where, line)
        elif "NET/Plugin" in msg and "Failed to find ncclNetPlugin" in msg:
            self._mark(entry, "plugin_symbol_missing", where, line)
        elif "Loaded net plugin" in msg or "NET/OFI Selected Provider" in msg or "Using network AWS" in msg \
                or "Initializing aws-ofi-nccl" in msg:
            self._mark(entry, "plugin_loaded", where, line)

    def _nccl_warn(self, name: str, where: str, line: str, host: str, msg: str) -> None:
        if "Duplicate GPU detected" in msg:
            self._event(name, "duplicate_gpu", where, line, host=host)
        elif "ibv_reg_mr" in msg or "ibv_reg_dmabuf_mr" in msg:
            self._event(name, "ibv_reg_mr", where, line, host=host)
        elif "Cuda failure" in msg and "out of memory" in msg:
            self._event(name, "cuda_oom", where, line, host=host, source="nccl")
        elif "system not yet initialized" in msg or "NVLS" in msg or "fabric" in msg.lower() \
                or "cuMulticast" in msg:
            self._event(name, "fabric_manager", where, line, host=host)
        elif "shared memory" in msg.lower() or "/dev/shm" in msg:
            self._event(name, "shm_failure", where, line, host=host)
        elif "is neither AF_INET" in msg:  # `ncclSocketInit: connecting to address with family 0 is neither …`:
            self._event(name, "no_socket_interface", where, line, host=host)  # no interface gave it an address
        elif "Got completion" in msg:
            m = _IB_COMPLETION.search(msg)
            if m:
                self._event(name, "ib_completion_error", where, line, host=host, peer=m.group(1),
                            status=int(m.group(2)))
        elif "onnect" in msg:
            m = _CONNECT_FAILED.search(msg)
            if m:
                self._event(name, "connect_failed", where, line, host=host, peer=m.group(1),
                            reason=m.group(2).strip())

    def _event(self, name: str, kind: str, where: str, line: str, **fields: Any) -> None:
        self._note(name)
        self._events_seen += 1
        seen = self.counts.get(kind, 0)
        self.counts[kind] = seen + 1
        event = {"kind": kind, "where": where, "line": _quote(line)}
        event.update({k: v for k, v in fields.items() if v is not None})
        if self.observer is not None:
            self._line_events.append(event)
        if seen < MAX_EVENTS_PER_KIND:
            self.events.append(event)
            syslog = _SYSLOG_HOST.match(line) if "host" not in event and "kernel:" in line else None
            if syslog:
                event["host"] = syslog.group(1)
            elif "host" not in event:
                self._unplaced.append((event, name, self._label))

    # -- the other message families ---------------------------------------------------------------------
    def _xid(self, name: str, where: str, line: str) -> None:
        m = _XID.search(line)
        if m:
            self._event(name, "xid", where, line, xid=int(m.group(2)), pci=m.group(1),
                        detail=m.group(5).strip()[:160] or None)

    def _timeout(self, name: str, where: str, line: str) -> None:
        m = _TIMEOUT.search(line)
        if not m:
            return
        rank = _RANK.search(line)
        self._event(name, "watchdog_timeout", where, line, rank=int(rank.group(1)) if rank else None,
                    seq=int(m.group(1)), op=m.group(2), timeout_ms=int(m.group(3)),
                    ran_ms=int(m.group(4)) if m.group(4) else None)

    def _nccl_error(self, name: str, where: str, line: str) -> None:
        if "NCCL error" not in line and "ncclSystemError" not in line and "ncclInvalidUsage" not in line \
                and "ncclRemoteError" not in line and "ncclInternalError" not in line:
            return
        m = _NCCL_ERROR.search(line)
        version = _NCCL_VERSION.search(line)
        self._event(name, "nccl_error", where, line, error=m.group(1) if m else None,
                    nccl_version=version.group(1) if version else None, reason=self._last_warn)

    def _last_error(self, name: str, where: str, line: str) -> None:
        """NCCL's last WARN as torch repeats it under `Last error:` (ncclGetLastError, NCCL 2.13 and later): the
        cause of the NCCL error above it where the run had no NCCL_DEBUG output. Read as the WARN it is."""
        below = f"{name} line {int(where.rsplit(' ', 1)[1]) + 1}"
        prefix = line[:line.find("Last error:")].strip()  # a launcher's `rank0:` / `host: ` before each line
        _, data, start = self._at
        end = data.find(b"\n", start)
        if end < 0 or end + 1 == len(data):  # the line below starts the next chunk
            self._below_pending = (name, below, prefix)
        else:
            self._below_last_error(name, below, prefix, self._next_line())

    def _below_last_error(self, name: str, below: str, prefix: str, text: str) -> None:
        text = redact_bytes(text.encode()).decode("utf-8", errors="replace")
        text = clean_text(text).strip() if ("\x1b" in text or "\r" in text) else text.strip()
        if prefix and text.startswith(prefix):
            text = text[len(prefix):].strip()
        failed = [e for e in self.events if e["kind"] == "nccl_error" and "reason" not in e]
        if not failed or not text or len(text) > QUOTE_CHARS or text.startswith(_NOT_A_WARN):
            return  # not under torch's NCCL error, or NCCL had no last error to give
        self._last_warn = text
        for event in failed:  # torch's `NCCL error in: …` and `ncclXxxError: …` lines above it
            event["reason"] = text
        seen = self._events_seen
        if "no socket interface found" in text or "No usable listening interface" in text:
            self._event(name, "no_socket_interface", below, text)
        else:
            self._nccl_warn(name, below, text, None, text)
        if self._events_seen == seen:
            self._message(name, below, f"NCCL WARN {text}", ("NCCL",), explained=False, shown=text)

    def _cuda_oom(self, name: str, where: str, line: str) -> None:
        if "CUDA out of memory" not in line and "CUDA error: out of memory" not in line \
                and "OutOfMemoryError" not in line:
            return
        tried = _OOM_TORCH.search(line)
        gpu = _OOM_GPU.search(line[line.find("allocate"):]) if "allocate" in line else None
        total = _OOM_TOTAL.search(line)
        free = _OOM_FREE.search(line)
        others = _OOM_OTHER.findall(line) if "this process has" in line else []
        reserved = _OOM_RESERVED.search(line)
        self._event(name, "cuda_oom", where, line, source="torch",
                    tried=tried.group(1) if tried else None, gpu=int(gpu.group(1)) if gpu else None,
                    total=(total.group(1) or total.group(2)) if total else None,
                    free=(free.group(1) or free.group(2)) if free else None,
                    other_processes=[{"pid": int(pid), "used": used} for pid, used in others[:8]] or None,
                    reserved=reserved.group(1) if reserved else None)

    def _sigkill(self, name: str, where: str, line: str) -> None:
        m = _EXITCODE_9.search(line)
        if m:
            self._event(name, "sigkill", where, line, local_rank=int(m.group(1)) if m.group(1) else None,
                        pid=int(m.group(2)) if m.group(2) else None)
        elif "Signals.SIGKILL" in line or "Signal 9 (SIGKILL)" in line or "signal 9 (SIGKILL)" in line \
                or line in ("Killed", "Killed.") or "killed by signal: Killed" in line \
                or _SHELL_KILLED.search(line):
            self._event(name, "sigkill", where, line)

    def _oom_killer(self, name: str, where: str, line: str) -> None:
        """Memory evidence: the OOM killer's own lines, a cgroup's oom_kill count, SLURM's and Kubernetes' words."""
        cgroup = "Memory cgroup out of memory" in line or "CONSTRAINT_MEMCG" in line
        m = _KILLED_PROCESS.search(line)
        if m and ("out of memory" in line.lower() or "total-vm:" in line):
            self._event(name, "oom_killer", where, line, source="cgroup" if cgroup else "kernel",
                        pid=int(m.group(1)), process=m.group(2), rss_kib=int(m.group(3)) if m.group(3) else None)
            return
        for pattern, source in ((_KILL_PROCESS, "cgroup" if cgroup else "kernel"), (_INVOKED, "kernel")):
            m = pattern.search(line)
            if m:
                self._event(name, "oom_killer", where, line, source=source, process=m.group(len(m.groups())))
                return
        m = _OOM_KILL_SUMMARY.search(line)
        if m:
            self._event(name, "oom_killer", where, line, source="cgroup" if cgroup else "kernel",
                        constraint=m.group(1), process=m.group(2), pid=int(m.group(3)) if m.group(3) else None)
            return
        m = _MEMORY_EVENTS.match(line) if line.startswith("oom_kill ") else None
        if m and int(m.group(1)) > 0:
            self._event(name, "oom_killer", where, line, source="cgroup", count=int(m.group(1)))
            return
        m = _SLURM_OOM.search(line)
        if m:
            self._event(name, "oom_killer", where, line, source="slurm", count=int(m.group(1)), step=m.group(2))
            return
        m = _SRUN_OOM.search(line)
        if m:
            self._event(name, "oom_killer", where, line, source="slurm", host=m.group(1), task=m.group(2))
            return
        if "OOMKilled" in line and (_K8S_OOM.search(line) or '"OOMKilled": true' in line
                                    or '"OOMKilled":true' in line):
            self._event(name, "oom_killer", where, line,
                        source="docker" if '"OOMKilled"' in line else "kubernetes")

    def _shm(self, name: str, where: str, line: str) -> None:
        low = line.lower()
        # a DataLoader worker's SIGBUS is its shared-memory segment running out (older torch says only that)
        if ("bus error" in low and ("shared memory" in low or "dataloader worker" in low)) \
                or "out of shared memory" in low \
                or ("unable to write to file </torch_" in line) or ("No space left on device" in line and
                                                                     "/torch_" in line):
            self._event(name, "shm_failure", where, line)

    def _bootstrap_phase(self, name: str, where: str, line: str) -> None:
        if "bootstrapping phase" not in line:
            return
        if any(e["kind"] == "spawn_bootstrap" and e["where"].startswith(name + " ") for e in self.events):
            return  # the same message again (every worker prints it)
        frames = [m for m in _MODULE_FRAME.finditer(self._look_back())
                  if not any(part in m.group(1) for part in _SITE)]
        fields = {"script": frames[-1].group(1), "script_line": int(frames[-1].group(2))} if frames else {}
        self._event(name, "spawn_bootstrap", where, line, **fields)

    def _driver(self, name: str, where: str, line: str) -> None:
        if "driver version is insufficient" in line or "cudaErrorInsufficientDriver" in line \
                or "NVIDIA driver on your system is too old" in line:
            self._event(name, "driver_insufficient", where, line)
        elif "Error 804" in line or "forward compatibility was attempted on non supported HW" in line:
            self._event(name, "forward_compat_unsupported", where, line)
        elif "Found no NVIDIA driver" in line or "couldn't communicate with the NVIDIA driver" in line:
            self._event(name, "driver_missing", where, line)
        elif "Driver/library version mismatch" in line:
            self._event(name, "nvml_mismatch", where, line)
        elif ("system not yet initialized" in line or "cudaErrorSystemNotReady" in line) and "NCCL WARN" not in line:
            # CUDA error 802 from torch's cudaGetDeviceCount() or a CUDA sample (NCCL's own WARN is GD425's)
            self._event(name, "cuda_system_not_ready", where, line)

    def _library(self, name: str, where: str, line: str) -> None:
        m = _CUDNN_INCOMPATIBLE.search(line)
        if m:
            built, found = (".".join(p.strip() for p in g.split(",")) for g in m.groups())
            self._event(name, "library_mismatch", where, line, library="cudnn", expected=built, found=found)
            return
        m = _UNDEFINED_SYMBOL.search(line)
        if not m:
            return
        symbol, versioned = m.group(1), (m.group(2) or "").lower()
        library = next((lib for prefix, lib in _SYMBOL_LIBRARY if symbol.startswith(prefix) or
                        versioned.startswith("lib" + lib)), None)
        if library:
            self._event(name, "library_mismatch", where, line, library=library, symbol=symbol)

    def _unrecognized_local_rank(self, name: str, where: str, line: str) -> None:
        match = _LOCAL_RANK_REFUSED.search(line)
        if match and not any(e["kind"] == "local_rank_refused" for e in self.events):  # every rank prints it
            self._event(name, "local_rank_refused", where, line, script=match.group(1), option=match.group(2))

    def _port_in_use(self, name: str, where: str, line: str) -> None:
        match = _PORT_IN_USE.search(line)
        if match and not any(e["kind"] == "port_in_use" for e in self.events):  # torch prints it per address tried
            port = match.group(1) or match.group(2)
            self._event(name, "port_in_use", where, line, port=int(port) if port else None)

    def _extension_build(self, name: str, where: str, line: str) -> None:
        compiler = _HOST_COMPILER.search(line)
        if compiler:
            if not self.counts.get("host_compiler_unsupported"):  # every compiled file repeats it
                self._event(name, "host_compiler_unsupported", where, line, compiler=compiler.group(1),
                            detail=compiler.group(2))
            return
        archs = _NVCC_ARCH.findall(self._look_back())
        if archs and not self.counts.get("nvcc_arch_unsupported"):
            extension = _EXTENSION.search(line)
            self._event(name, "nvcc_arch_unsupported", where, line, arch=archs[-1],
                        extension=extension.group(1) if extension else None)

    def _preprocessing(self, name: str, where: str, line: str) -> None:
        if self.counts.get("preprocessing", 0) == 0:
            self._event(name, "preprocessing", where, line)

    # -- result -----------------------------------------------------------------------------------------
    def result(self, read: bool = False) -> Tuple[Dict[str, Any], Dict[str, str]]:
        """({"logs": {...}}, evidence) — empty when no line was recognised, unless the logs are known to be a run's
        (`read`: every rank's logs read together, in which the absence of these lines is itself what they show)."""
        if not any(self._found_in.values()) and not read:
            return {}, {}
        for name, tail in self._tail.items():
            if self._read.get(name, 0) > self.shows_head_bytes:  # a shorter file was searched whole
                self._see_parts(tail)
        for event, name, label in self._unplaced:
            host = self._label_host.get((name, label)) if label is not None else None
            only = self._file_hosts.get(name, [])
            if host or len(only) == 1:
                event["host"] = host or only[0]
        self._unplaced.clear()
        logs: Dict[str, Any] = {"files": list(self.files), "lines": self.lines,
                                "hosts": {h: e for h, e in self.hosts.items() if e},
                                "nccl_env": dict(self.nccl_env),
                                "events": list(self.events), "counts": dict(self.counts), "shows": sorted(self.shows)}
        prefixed = sum(1 for host in self.hosts if not host.startswith("file "))
        if prefixed > len(named_hosts(logs)):
            logs["hosts_in_run"] = prefixed  # hosts whose NCCL lines say nothing the rules read still ran ranks
        evidence = {"logs": f"{self.lines} line(s) of {', '.join(self.files)}"}
        return {"logs": logs}, evidence


def _object(value: Any) -> Dict[str, Any]:
    """A recorded value that should be an object (a snapshot is user input: anything else counts as empty)."""
    return value if isinstance(value, dict) else {}


def named_hosts(logs: Dict[str, Any]) -> List[str]:
    """The hosts a run's `logs` facts name in line prefixes (not the `file NAME` stand-ins)."""
    return [name for name in _object(logs.get("hosts")) if not name.startswith("file ")]


def split_by_host(logs: Dict[str, Any]) -> Tuple[Dict[str, Dict[str, Any]], Optional[Dict[str, Any]]]:
    """A run's `logs` facts as one `logs` group per named host (its NCCL facts, the variables NCCL echoed there,
    the events placed on it), and the rest: what no host claims (None when nothing is left). Each part keeps the
    run's files, `hosts_in_run` and the parts of the run the logs show, so a rule that needs several hosts still
    knows the run had them."""
    events = [e for e in logs.get("events") or [] if isinstance(e, dict)] if isinstance(logs.get("events"), list) \
        else []
    hosts = _object(logs.get("hosts"))
    named = named_hosts(logs)
    in_run = logs.get("hosts_in_run") if isinstance(logs.get("hosts_in_run"), int) else 0
    files = [f for f in logs.get("files") or [] if isinstance(f, str)] if isinstance(logs.get("files"), list) else []
    shows = [p for p in logs.get("shows") or [] if isinstance(p, str)] if isinstance(logs.get("shows"), list) else []

    def host_of(event: Dict[str, Any]) -> Optional[str]:
        return event.get("host") if isinstance(event.get("host"), str) else None

    def part(entries: Dict[str, Any], kept: List[Dict[str, Any]], env: Dict[str, Any]) -> Dict[str, Any]:
        counts: Dict[str, int] = {}
        for event in kept:
            kind = str(event.get("kind", ""))
            counts[kind] = counts.get(kind, 0) + 1
        return {"files": files, "lines": logs.get("lines") if isinstance(logs.get("lines"), int) else 0,
                "hosts": entries, "nccl_env": env, "events": kept, "counts": counts,
                "hosts_in_run": max(len(named), in_run), "shows": shows}

    parts = {}
    for host in named:
        entry = _object(hosts[host])
        env = {name: {**echo, "host": host} for name, echo in _object(entry.get("nccl_env")).items()
               if isinstance(echo, dict)}
        parts[host] = part({host: entry}, [e for e in events if host_of(e) == host], env)
    rest_hosts = {name: entry for name, entry in hosts.items() if name not in parts}
    rest_events = [e for e in events if host_of(e) not in parts]
    rest_env = {name: echo for name, echo in _object(logs.get("nccl_env")).items()
                if isinstance(echo, dict) and (echo.get("host") if isinstance(echo.get("host"), str) else None)
                not in parts}
    rest = part(rest_hosts, rest_events, rest_env) if rest_hosts or rest_events or rest_env else None
    return parts, rest


_Handler = Callable[[LogScanner, str, str, str], None]
# (a literal the line must hold, the reader for it); a line may feed several readers.
_HANDLERS: Tuple[Tuple[str, _Handler], ...] = (
    ("Xid", LogScanner._xid),
    ("Timeout(ms)", LogScanner._timeout),
    ("NCCL", LogScanner._nccl_error),
    ("Last error:", LogScanner._last_error),
    ("ncclSystemError", LogScanner._nccl_error),
    ("emory", LogScanner._cuda_oom),
    ("-9", LogScanner._sigkill),
    ("SIGKILL", LogScanner._sigkill),
    ("Killed", LogScanner._sigkill),
    ("Killed", LogScanner._oom_killer),
    ("oom", LogScanner._oom_killer),
    ("OOM", LogScanner._oom_killer),
    ("emory", LogScanner._oom_killer),
    ("shared memory", LogScanner._shm),
    ("Bus error", LogScanner._shm),
    ("bus error", LogScanner._shm),
    ("/torch_", LogScanner._shm),
    ("bootstrapping phase", LogScanner._bootstrap_phase),
    ("river", LogScanner._driver),
    ("Error 804", LogScanner._driver),
    ("not yet initialized", LogScanner._driver),
    ("SystemNotReady", LogScanner._driver),
    ("forward compatibility", LogScanner._driver),
    ("undefined symbol", LogScanner._library),
    ("cuDNN version incompatibility", LogScanner._library),
    ("unrecognized arguments", LogScanner._unrecognized_local_rank),
    ("unsupported GNU version", LogScanner._extension_build),
    ("unsupported clang version", LogScanner._extension_build),
    ("unsupported Microsoft Visual Studio version", LogScanner._extension_build),
    ("Error building extension", LogScanner._extension_build),
    ("failed with exit", LogScanner._extension_build),  # setuptools: `error: command '…/nvcc' failed with exit code 1`
    ("errno: 98", LogScanner._port_in_use),
    ("EADDRINUSE", LogScanner._port_in_use),
    ("examples/s", LogScanner._preprocessing),  # the progress bars of datasets' map() / tokenization
)
