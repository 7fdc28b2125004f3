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

What needs parsing is read by small modules, each for one family of lines, through the `_HANDLERS` table below:
NCCL's own lines (gpudoctor.ingest.log_nccl), memory failures (log_memory), the other failures with fields to
parse (log_failures); the text around a line is read by log_window; a run's facts are split per host by log_hosts.
A message that only needs matching is data: the atlas (rules/messages/, gpudoctor.ingest.atlas), read for every
line after the readers; a line a reader explained gives no second event.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from gpudoctor.redact import redact_bytes

from . import atlas, log_failures, log_memory, log_nccl
from ._common import quote
from .log_hosts import named_hosts
from .log_window import MAX_LINE_CHARS, Window
from .normalize import clean_text

MAX_EVENTS_PER_KIND = 20
MAX_HOSTS = 4096

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
_SRUN_LABEL = re.compile(r"(\d{1,6}): ")  # `srun --label`: the task's number before each of its lines
# journalctl / syslog: `Mar 04 10:14:55 gpu-a02 kernel: …` names the host the kernel line comes from
_SYSLOG_HOST = re.compile(r"(?:\d{1,6}: )?(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT[\d:.]{8,15}"
                          r"(?:[+-]\d\d:?\d\d|Z)?) ([A-Za-z0-9][\w.\-]{0,200}) kernel:")
# An event's fields the fact schema types as integers ([logs.fields.events]): a message of the atlas states them as
# text, the readers as numbers (GD424 compares ranks)
_INT_FIELDS = frozenset(("local_rank", "pid", "ran_ms", "rank", "script_line", "seq", "timeout_ms", "xid"))



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
        self.window = Window()  # the text around the line being read
        self.events_seen = 0  # events recorded (a line's readers compare it before and after)
        self.last_warn: Optional[str] = None  # NCCL's last WARN: the reason of the NCCL error torch reports after it
        self.below_pending: Optional[Tuple[str, str, str]] = None  # a `Last error:` that ended a chunk
        self._read: Dict[str, int] = {}  # file → bytes fed so far
        self._found_in: Dict[str, int] = {}
        self._unplaced: List[Tuple[Dict[str, Any], str, Optional[str]]] = []  # (event, file, task) with no host
        self._last_host: Dict[str, str] = {}
        self._label: Optional[str] = None  # the `srun --label` task of the line being read
        self._label_host: Dict[Tuple[str, Optional[str]], str] = {}  # (file, task) → the host its NCCL lines name
        self._file_hosts: Dict[str, List[str]] = {}  # file → the first two hosts its NCCL lines name
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
        if self.below_pending is not None and self.below_pending[0] == name:
            first = data.split(b"\n", 1)[0][:MAX_LINE_CHARS].decode("utf-8", errors="replace")
            log_nccl.below_last_error(self, *self.below_pending, first)
            self.below_pending = None
        starts = _anchored_lines(data)
        counted_to, line_no, window = 0, first_line, self.window
        for start in sorted(starts):
            line_no += data.count(b"\n", counted_to, start)
            counted_to = start
            end = data.find(b"\n", start)
            raw = redact_bytes(data[start:end if end >= 0 else len(data)])[:MAX_LINE_CHARS]
            window.at = (name, data, start)
            self._line(name, line_no, raw.decode("utf-8", errors="replace"), tuple(starts[start]))
        lines = line_no - first_line + data.count(b"\n", counted_to)  # a last line without its newline is not counted
        self.window.keep_tail(name, data)
        self.lines += lines
        return lines

    def _see_parts(self, data: bytes) -> None:
        for part, words in SHOWS.items():
            if part not in self.shows and any(word in data for word in words):
                self.shows.append(part)

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
        seen = self.events_seen  # a line a reader below explains is not read again as a message of the atlas
        self._line_events = []
        self._nccl_line(name, where, line)
        called = set()
        for trigger, handler in _HANDLERS:
            if trigger in line and handler not in called:
                called.add(handler)
                handler(self, name, where, line)
        self.message(name, where, line, anchors, explained=self.events_seen != seen)
        if self.observer is not None:
            self.observer(name, line_no, line, self._line_events)

    def _nccl_line(self, name: str, where: str, line: str) -> None:
        """A line NCCL printed (`host:pid:tid [dev] NCCL INFO …`), or the `NCCL version` rank 0 prints bare."""
        m = log_nccl.LINE.search(line) if "NCCL" in line or " WARN " in line else None
        if m:
            self._last_host[name] = m.group(1)
            self._attribute(name, m.group(1))
            log_nccl.read_line(self, name, where, line, m.group(1), m.group(5), m.group(6).strip())
        elif "NCCL version" in line and "NCCL version" == line.lstrip("[]0123456789: ")[:12]:
            # printed without a prefix by rank 0, right after its own INFO lines: the host of its `srun --label`
            # task, else the host last seen in this file
            host = self._label_host.get((name, self._label)) if self._label is not None else None
            log_nccl.version(self, name, host or self._last_host.get(name, "file " + name), where, line)

    def message(self, name: str, where: str, line: str, anchors: Tuple[str, ...], explained: bool,
                shown: Optional[str] = None) -> None:
        """A message of the atlas (gpudoctor.ingest.atlas): the facts it states, and its event where no reader
        above explained the line (`shown`: the text the log holds, where `line` is how NCCL printed it)."""
        window = self.window
        found = atlas.match(line, anchors, window.next_line, window.look_back, window.previous_line)
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
        self.event(name, message.event, where, line, message=message.id, rule=message.rule, proves=message.proves,
                   severity=message.severity, fix=message.fix,
                   **{k: v for k, v in fields.items() if k not in _MESSAGE_KEYS})

    def _state(self, path: str, value: Any, where: str, line: str) -> None:
        """Keep a fact a message states; another message that states another value makes it contradicted."""
        stated = self.message_facts.get(path)
        if stated is None:
            if len(self.message_facts) < MAX_HOSTS:
                self.message_facts[path] = {"value": value, "where": where, "line": quote(line)}
        elif stated["value"] != value and "contradicted" not in stated:
            stated["contradicted"] = {"value": value, "where": where, "line": quote(line)}

    def _state_gpu(self, name: str, cc: str, where: str, line: str) -> None:
        """Keep the compute capability a message states for a GPU it names; another that says otherwise makes it
        contradicted."""
        stated = self.message_gpus.get(name)
        if stated is None:
            if len(self.message_gpus) < MAX_HOSTS:
                self.message_gpus[name] = {"cc": cc, "where": where, "line": quote(line)}
        elif stated["cc"] != cc:
            stated["contradicted"] = True

    def _attribute(self, name: str, host: str) -> None:
        """Remember which host a file and an `srun --label` task belong to (for lines that name no host)."""
        seen = self._file_hosts.setdefault(name, [])
        if host not in seen and len(seen) < 2:
            seen.append(host)
        if self._label is not None and len(self._label_host) < MAX_HOSTS:
            self._label_host.setdefault((name, self._label), host)

    def host_entry(self, host: str) -> Dict[str, Any]:
        """What the lines say of `host` (a throwaway entry beyond MAX_HOSTS)."""
        entry = self.hosts.get(host)
        if entry is None:
            if len(self.hosts) >= MAX_HOSTS:
                return {}
            entry = self.hosts[host] = {}
        return entry

    def note(self, name: str) -> None:
        """Something in file `name` was recognised."""
        self._found_in[name] = self._found_in.get(name, 0) + 1

    def event(self, name: str, kind: str, where: str, line: str, **fields: Any) -> None:
        """Record a failure of `kind` (its fields that are None left out); beyond MAX_EVENTS_PER_KIND only counted."""
        self.note(name)
        self.events_seen += 1
        seen = self.counts.get(kind, 0)
        self.counts[kind] = seen + 1
        event = {"kind": kind, "where": where, "line": quote(line)}
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

    # -- result -----------------------------------------------------------------------------------------
    def result(self, read: bool = False) -> Tuple[Dict[str, Any], Dict[str, str]]:
        """({"logs": {...}}, evidence) — empty when no line was recognised, unless the logs are known to be a run's
        (`read`: every rank's logs read together, in which the absence of these lines is itself what they show)."""
        if not any(self._found_in.values()) and not read:
            return {}, {}
        for name, tail in self.window.tails.items():
            if self._read.get(name, 0) > self.shows_head_bytes:  # a shorter file was searched whole
                self._see_parts(tail)
        self._place_events()
        logs: Dict[str, Any] = {"files": list(self.files), "lines": self.lines,
                                "hosts": {h: e for h, e in self.hosts.items() if e},
                                "nccl_env": dict(self.nccl_env),
                                "events": list(self.events), "counts": dict(self.counts), "shows": sorted(self.shows)}
        prefixed = sum(1 for host in self.hosts if not host.startswith("file "))
        if prefixed > len(named_hosts(logs)):
            logs["hosts_in_run"] = prefixed  # hosts whose NCCL lines say nothing the rules read still ran ranks
        evidence = {"logs": f"{self.lines} line(s) of {', '.join(self.files)}"}
        return {"logs": logs}, evidence

    def _place_events(self) -> None:
        """Give an event that names no host the host of its `srun --label` task, or of its file's NCCL lines."""
        for event, name, label in self._unplaced:
            host = self._label_host.get((name, label)) if label is not None else None
            only = self._file_hosts.get(name, [])
            if host or len(only) == 1:
                event["host"] = host or only[0]
        self._unplaced.clear()


def _anchored_lines(data: bytes) -> Dict[int, List[str]]:
    """Where each line holding an anchor starts in the chunk, with the anchors it holds (a C scan per anchor)."""
    starts: Dict[int, List[str]] = {}
    for word in ANCHORS:
        pos = data.find(word)
        while pos >= 0:
            starts.setdefault(data.rfind(b"\n", 0, pos) + 1, []).append(_ANCHOR_TEXT[word])
            end = data.find(b"\n", pos)
            if end < 0:
                break
            pos = data.find(word, end)
    return starts


_Handler = Callable[[LogScanner, str, str, str], None]
# (a literal the line must hold, the reader for it); a line may feed several readers.
_HANDLERS: Tuple[Tuple[str, _Handler], ...] = (
    ("Xid", log_failures.xid),
    ("Timeout(ms)", log_failures.timeout),
    ("NCCL", log_nccl.nccl_error),
    ("Last error:", log_nccl.last_error),
    ("ncclSystemError", log_nccl.nccl_error),
    ("emory", log_memory.cuda_oom),
    ("-9", log_memory.sigkill),
    ("SIGKILL", log_memory.sigkill),
    ("Killed", log_memory.sigkill),
    ("Killed", log_memory.oom_killer),
    ("oom", log_memory.oom_killer),
    ("OOM", log_memory.oom_killer),
    ("emory", log_memory.oom_killer),
    ("shared memory", log_memory.shm),
    ("Bus error", log_memory.shm),
    ("bus error", log_memory.shm),
    ("/torch_", log_memory.shm),
    ("bootstrapping phase", log_failures.bootstrap_phase),
    ("river", log_failures.driver),
    ("Error 804", log_failures.driver),
    ("not yet initialized", log_failures.driver),
    ("SystemNotReady", log_failures.driver),
    ("forward compatibility", log_failures.driver),
    ("undefined symbol", log_failures.library),
    ("cuDNN version incompatibility", log_failures.library),
    ("unrecognized arguments", log_failures.unrecognized_local_rank),
    ("unsupported GNU version", log_failures.extension_build),
    ("unsupported clang version", log_failures.extension_build),
    ("unsupported Microsoft Visual Studio version", log_failures.extension_build),
    ("Error building extension", log_failures.extension_build),
    ("failed with exit", log_failures.extension_build),  # setuptools: `error: command '…/nvcc' failed with exit code 1`
    ("errno: 98", log_failures.port_in_use),
    ("EADDRINUSE", log_failures.port_in_use),
    ("examples/s", log_failures.preprocessing),  # the progress bars of datasets' map() / tokenization
)
