"""Every rank's logs of one run read together: per rank, the first line that failed, whether it failed or only
waited for another rank, when, the last collective it reached, its last step, and how it ended.

    reader = RunReader(scanner)                   # watches the lines the log reader (LogScanner) parses
    reader.start_file(identify(path))             # before each file's chunks
    reader.feed(path, chunk, first_line)          # instead of scanner.feed
    reader.add_dump(identify(path), dump)         # a flight-recorder dump (gpudoctor.ingest.flight_recorder)
    facts = reader.result()                       # {"run": {...}}, or {} for fewer than two ranks

A line belongs to the rank its prefix names (`[rank3]:`, torchrun `--tee`'s `[default3]:`, `srun --label`'s `3: `,
a host prefix `worker-1: ` / `10.0.0.5: `), else to the rank or node the file's name names
(gpudoctor.ingest.run_files), else to the file (a rank that cannot be told). torchrun's own lines (`failed
(exitcode: -9) local_rank: 1`, its `Root Cause` summary) are placed on the rank they name. The cost stays the log
reader's: only lines it already parses are looked at, plus one bounded search for progress per chunk.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from typing import Any, Dict, List, Optional, Tuple

from gpudoctor.redact import redact_bytes

from ._common import quote
from .logs import LogScanner
from .run_files import RunFile

MAX_RANKS = 65536
MAX_UNPLACED = 64
STEP_WINDOW = 64 * 1024  # the end of each chunk searched for progress lines
TIME_LOOK_BACK = 4096
# The parts of a run a log shows (NCCL's setup, progress …) are searched in each rank's first SHOWS_HEAD_BYTES (and
# its end): a rank's setup is at its start, and 512 ranks' files searched 4 MiB deep would cost more than the lines.
SHOWS_HEAD_BYTES = 1024 * 1024

# `[rank3]:`, `[default3]:` (torchrun --tee), `3: ` (srun --label), `worker-1: ` / `10.0.0.5: ` (pdsh, the deepspeed
# launcher), in any order the launchers nest them
_PREFIX = re.compile(r"\[(rank|default)(\d{1,6})\]:\s?|(\d{1,6}): |((?:\d{1,3}\.){3}\d{1,3}|[A-Za-z][\w\-]{0,62}"
                     r"(?:-\d{1,6}|\d{1,6})(?:\.[\w\-]{1,60})*): ")
# A rank named further into the line, where something (a runner's own prefix, a paste's line numbers) precedes it:
# `[rank3]:`, torch's `[PG ID 0 PG GUID 0(default_pg) Rank 3]`, `[Rank 3]`
_RANK_IN_LINE = re.compile(r"\[rank(\d{1,6})\]:|\[(?:PG [^\]\[]{0,80} )?Rank (\d{1,6})\]")
# NCCL's own prefix, `host:pid:tid [dev]`: a process on a host (its rank is not in it)
_NCCL_PROCESS = re.compile(r"([A-Za-z0-9][\w.\-]{0,200}):(\d{1,10}):\d{1,10} \[(\d{1,5})\] ")
_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")
_GLOG = re.compile(r"(?:^|[\[\s])[EWIF](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{1,9})")  # month unpadded
_SYSLOG = re.compile(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) {1,2}(\d{1,2}) (\d\d):(\d\d):(\d\d)")
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                         "Dec"), 1)}
# torch's C++ lines (glog): `[E501 10:00:03.123456 ProcessGroupNCCL.cpp:616] `, `E0501 10:00:03.123456 4242 api.py:9] `
_GLOG_HEAD = re.compile(r"\[?[EWIF]\d{3,4} \d\d:\d\d:\d\d\.\d{1,9} (?:\d{1,10} )?[\w./\-]{1,200}:\d{1,6}\] ?")
_EXCEPTION = re.compile(r"^((?:[A-Za-z_]\w{0,60}\.){0,8}[A-Z]\w{0,60}(?:Error|Exception|Interrupt))(?::\s?(.*))?$")
# What a rank prints when another rank failed or hung: it waited, timed out, or lost its peer.
_WAITING = re.compile(
    r"Watchdog caught collective operation timeout|Timeout at NCCL work|detected by watchdog|Received a dump signal|"
    r"[Tt]imed out|timeout after|Connection closed by (?:peer|remote)|Connection reset by peer|remote process exited|"
    r"ncclRemoteError|remote peer|Broken pipe|Connection refused|communicator was aborted|has been aborted|"
    r"Some NCCL operations have failed or timed out|taking the entire process down|heartbeat monitor|"
    r"Socket Timeout|SIGTERM|Signals\.SIGTERM|exitcode: -15|failed to recv|Stopping worker|"
    r"preparing to dump debug info|Terminating the process after attempting to dump|"
    r"Stack trace of the failed collective|signal dumping")
_LAUNCHER = ("ChildFailedError", "elastic.multiprocessing.errors", "SignalException")
_AGENT_EXIT = re.compile(r"failed \(exitcode: (-?\d{1,4})\) local_rank: (\d{1,6})")
_SUMMARY = re.compile(r"^\s*(time|host|rank|exitcode)\s*: (.{1,200})$", re.MULTILINE)
_SUMMARY_RANK = re.compile(r"(\d{1,6})(?: \(local_rank: (\d{1,6})\))?")
# `last enqueued NCCL work: 811, last completed NCCL work: 807` (torch 2.2+), `last enqueued work: 460631, last
# completed work: 460630` (2.5+)
_ENQUEUED = re.compile(r"last enqueued (?:NCCL )?work: (\d{1,12}), last completed (?:NCCL )?work: (-?\d{1,12})")
# TORCH_DISTRIBUTED_DEBUG=DETAIL: `Detected mismatch between collectives on ranks. Rank 3 is running collective:
# CollectiveFingerPrint(SequenceNumber=2, OpType=ALLREDUCE, TensorShape=[1024], …), but Rank 1 is running …`
_FINGERPRINT = re.compile(r"Rank (\d{1,6}) is running collective: CollectiveFingerPrint\(SequenceNumber=(\d{1,12}),?"
                          r" ?OpType=(\w{1,40})(?:, TensorShape=\[([^\]]{0,200})\])?")
# TORCH_DISTRIBUTED_DEBUG=DETAIL's per-collective line: `[Rank 2] Running collective: CollectiveFingerPrint(
# SequenceNumber=1276, OpType=ALLREDUCE, TensorShape=[], …)` (the last one each rank printed is where it stopped)
_RUNNING = re.compile(r"\[Rank (\d{1,6})\] Running collective: CollectiveFingerPrint\(SequenceNumber=(\d{1,12}),? ?"
                      r"OpType=(\w{1,40})(?:, TensorShape=\[([^\]]{0,200})\])?")
# A launcher's or framework's header naming the process's rank at the top of its own file: Lightning's
# `Initializing distributed: GLOBAL_RANK: 3, MEMBER: 4/8`, accelerate's `Process index: 3`, DeepSpeed's
# `[Rank 3] …` log_dist lines are per line (above)
_HEADER_RANK = re.compile(rb"GLOBAL_RANK: (\d{1,6}), MEMBER: \d{1,6}/\d{1,6}|\nProcess index: (\d{1,6})\s")
HEADER_BYTES = 64 * 1024
_STEP = re.compile(rb"(?i)\b(?:global[_ ]step|step|iteration|iter)\b['\"]?\s{0,4}[:=]?\s{0,8}(\d{1,9})")
_NO_CAUSE_KINDS = {"preprocessing"}
_WAITING_KINDS = {"watchdog_timeout"}
# An event of the log reader in the words of the rule that judges it.
_KIND_WORDS = {
    "cuda_oom": ("GPU out of memory", "GD508"), "oom_killer": ("host out of memory (OOM killer)", "GD509"),
    "sigkill": ("killed by SIGKILL", "GD509"), "xid": ("GPU Xid", "GD507"),
    "ecc_uncorrectable": ("uncorrectable ECC error", "GD507"), "nccl_error": ("NCCL error", "GD425"),
    "connect_failed": ("NCCL could not connect to a peer", "GD425"),
    "ib_completion_error": ("InfiniBand completion error", "GD425"), "duplicate_gpu": ("duplicate GPU", "GD425"),
    "fabric_manager": ("NVSwitch fabric not ready", "GD425"), "no_socket_interface": ("no socket interface", "GD425"),
    "shm_failure": ("shared memory exhausted", "GD503"), "watchdog_timeout": ("collective timed out", "GD424"),
    "ibv_reg_mr": ("RDMA memory registration failed", "GD505"), "port_in_use": ("rendezvous port in use", "GD612"),
    "no_kernel_image": ("no kernel image for the GPU", "GD104"),
}


def parse_time(text: str) -> Optional[Tuple[str, float]]:
    """(the time as printed, seconds for ordering) from the first timestamp in `text`; None without one. Formats:
    ISO and Python logging (`2024-05-01 12:00:00,123`, torchrun's `2024-05-01_12:00:00`), glog (`E0501
    12:00:00.123456`, torch's C++ lines), syslog (`May  1 12:00:00`). Those without a year are ordered within it."""
    m = _ISO.search(text)
    if m:
        month, day, hh, mm, ss = (int(m.group(i)) for i in range(2, 7))
        return m.group(0), _seconds(month, day, hh, mm, ss, m.group(7) or "0")
    m = _GLOG.search(text)
    if m:
        month, day, hh, mm, ss = (int(m.group(i)) for i in range(1, 6))
        return f"{month:02}-{day:02} {hh:02}:{mm:02}:{ss:02}.{m.group(6)}", _seconds(month, day, hh, mm, ss, m.group(6))
    m = _SYSLOG.search(text)
    if m:
        return m.group(0), _seconds(_MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)), int(m.group(4)),
                                    int(m.group(5)), "0")
    return None


def _seconds(month: int, day: int, hh: int, mm: int, ss: int, frac: str) -> float:
    try:
        start = datetime(2000, month, day, hh, mm, ss)
    except ValueError:
        return 0.0
    return (start - datetime(2000, 1, 1)).total_seconds() + float("0." + frac)


class RunReader:
    """Places what the log reader finds on the rank that printed it (see the module docstring)."""

    def __init__(self, scanner: LogScanner) -> None:
        self.scanner = scanner
        scanner.observer = self._observe
        scanner.shows_head_bytes = SHOWS_HEAD_BYTES
        self.files: Dict[str, RunFile] = {}
        self.units: Dict[Tuple[Any, ...], Dict[str, Any]] = {}
        self.local_to_rank: Dict[Tuple[Optional[str], int], int] = {}
        self.dumps: List[str] = []
        self.placed: set = set()  # files something was placed on a rank from
        self.unreadable: List[Dict[str, str]] = []

    # -- reading ----------------------------------------------------------------------------------------
    def start_file(self, run_file: RunFile) -> None:
        self.files.setdefault(run_file.path, run_file)

    def feed(self, name: str, data: bytes, first_line: int = 1) -> int:
        if first_line == 1:
            self._header(name, data[:HEADER_BYTES])
        lines = self.scanner.feed(name, data, first_line)
        self._progress(name, data)
        return lines

    def _header(self, name: str, head: bytes) -> None:
        """A file whose name tells no rank, and whose start names one (a launcher's or framework's header)."""
        ident = self.files.get(name) or RunFile(name)
        if ident.rank is not None:
            return
        m = _HEADER_RANK.search(head)
        if m:
            self.files[name] = replace(ident, rank=int(m.group(1) or m.group(2)))

    def add_dump(self, run_file: RunFile, collectives: List[Dict[str, Any]]) -> None:
        """A rank's flight-recorder dump: its last collectives (gpudoctor.ingest.flight_recorder.collectives)."""
        self.files.setdefault(run_file.path, run_file)
        self.dumps.append(run_file.path)
        unit = self._unit_of_file(run_file.path)
        if unit is not None and collectives:
            unit["dump"] = {"file": run_file.path, "collectives": collectives}

    def unplaced(self, path: str, why: str) -> None:
        """A file of the folder that could not be read as part of the run (binary, not a dump, unreadable)."""
        if len(self.unreadable) < MAX_UNPLACED:
            self.unreadable.append({"path": path, "why": why})

    # -- one line ---------------------------------------------------------------------------------------
    def _observe(self, name: str, line_no: int, line: str, events: List[Dict[str, Any]]) -> None:
        body, rank, local, host = _prefixes(line)
        prefix = line[:len(line) - len(body)]
        rank, local, process = _named_in_line(line, body, rank, local, events)
        agent = _AGENT_EXIT.search(body) if "exitcode" in body else None
        if agent:
            local = int(agent.group(2))
        where = f"{name} line {line_no}"
        if "exitcode" in body and agent is None and body.lstrip().startswith("exitcode"):
            self._summary(name, where, body)
            return
        unit = self._unit(name, rank, local, host, process)
        if unit is None:
            return
        head = _GLOG_HEAD.match(body) if body[:2] in ("[E", "[W", "[I", "[F") or body[:1] in "EWIF" else None
        core = body[head.end():] if head else body
        if agent:
            self._exit(unit, int(agent.group(1)), where, body)
        self._collectives(unit, body, events, where)
        if not self._event_failure(unit, events, core, body, where, prefix):
            self._line_failure(unit, core, body, where, prefix)

    def _event_failure(self, unit: Dict[str, Any], events: List[Dict[str, Any]], core: str, body: str, where: str,
                       prefix: str) -> bool:
        """The line's first event that is a failure (not information), as the rank's failure or wait; whether one
        was."""
        for event in events:
            kind = event["kind"]
            if kind in _NO_CAUSE_KINDS or event.get("severity") == "info":
                continue
            words, rule = _KIND_WORDS.get(kind, (quote(core.strip()), event.get("rule")))
            if kind == "xid" and event.get("xid") is not None:
                words = f"GPU Xid {event['xid']}"
            waiting = kind in _WAITING_KINDS or (kind != "sigkill" and bool(_WAITING.search(body)))
            self._first(unit, "waiting" if waiting else "cause", kind, words, rule, where, body, prefix)
            return True
        return False

    def _line_failure(self, unit: Dict[str, Any], core: str, body: str, where: str, prefix: str) -> None:
        """A line no reader made an event of: an exception, an NCCL WARN, or a rank's words for waiting."""
        exc = _EXCEPTION.match(core.strip()) if ("rror" in core or "xception" in core) else None
        if exc:
            if any(word in body for word in _LAUNCHER):
                return
            waiting = bool(_WAITING.search(body))
            kind = "collective_mismatch" if "Detected mismatch between collectives" in core else "exception"
            self._first(unit, "waiting" if waiting else "cause", kind, quote(core.strip()),
                        "GD432" if kind == "collective_mismatch" else None, where, body, prefix)
        elif " WARN " in body and "NCCL" in body:
            self._first(unit, "waiting" if _WAITING.search(body) else "cause", "nccl_warn", "NCCL WARN",
                        "GD425", where, body, prefix)
        elif _WAITING.search(body) and ("rror" in body or "NCCL" in body or "xception" in body):
            self._first(unit, "waiting", "waiting", "waited", None, where, body, prefix)

    def _first(self, unit: Dict[str, Any], cls: str, kind: str, words: str, rule: Optional[str],
               where: str, line: str, prefix: str = "") -> None:
        key = "first_" + cls
        unit["failures"] = unit.get("failures", 0) + 1
        if key in unit and unit[key].get("t") is not None:
            return
        when = parse_time(line[:120])
        basis = "line"
        if when is None:
            when, basis = self._time_above(prefix), "above"
        if key in unit and (when is None or basis != "line"):
            return  # the first one read stays unless this one has its own time and that one has none
        event: Dict[str, Any] = {"kind": kind, "what": words, "where": where,
                 "line": redact_bytes(quote(line.strip()).encode()).decode("utf-8", errors="replace")}
        if rule:
            event["rule"] = rule
        if when:
            event.update(time=when[0], t=when[1] if basis == "line" else None, after=when[1] if basis != "line"
                         else None)
        unit[key] = {k: v for k, v in event.items() if v is not None}

    def _time_above(self, prefix: str) -> Optional[Tuple[str, float]]:
        """The time of the nearest line above with one, among the lines of the same rank (the same prefix)."""
        above = self.scanner.window.raw_above(TIME_LOOK_BACK).decode("utf-8", errors="replace").splitlines()
        for piece in reversed(above[-40:]):
            if piece.startswith(prefix) and not _PREFIX.match(piece, len(prefix)):
                when = parse_time(piece[len(prefix):len(prefix) + 120])
                if when:
                    return when
        return None

    def _exit(self, unit: Dict[str, Any], code: int, where: str, line: str, when: Optional[str] = None) -> None:
        unit.setdefault("exit", {"code": code, "where": where, **({"time": when} if when else {})})
        if code == -9:  # the time is when the launcher saw it, after the kill
            self._first(unit, "cause", "sigkill", "killed by SIGKILL (the launcher's report)", "GD509", where, line)
        elif code == -15:
            self._first(unit, "waiting", "sigterm", "stopped by the launcher (SIGTERM)", None, where, line)

    def _summary(self, name: str, where: str, line: str) -> None:
        """torchrun's failure summary: `time`, `host`, `rank : 1 (local_rank: 1)` above an `exitcode : -9` line."""
        above = self.scanner.window.raw_above(600).decode("utf-8", errors="replace").split("\n")[-4:]
        fields = {m.group(1): m.group(2).strip() for m in _SUMMARY.finditer("\n".join(above + [line.strip()]))}
        ranks = _SUMMARY_RANK.match(fields.get("rank", ""))
        code = re.match(r"-?\d{1,4}", fields.get("exitcode", ""))
        if not ranks or not code:
            return
        rank, host = int(ranks.group(1)), fields.get("host")
        if ranks.group(2) is not None and len(self.local_to_rank) < MAX_RANKS:
            self.local_to_rank[(host, int(ranks.group(2)))] = rank
            self.local_to_rank.setdefault((None, int(ranks.group(2))), rank)
        unit = self._unit(name, rank, None, host)
        if unit is not None:
            self._exit(unit, int(code.group(0)), where, line, fields.get("time"))

    def _collectives(self, unit: Dict[str, Any], body: str, events: List[Dict[str, Any]], where: str) -> None:
        for event in events:
            if event["kind"] == "watchdog_timeout" and isinstance(event.get("seq"), int):
                unit.setdefault("collective", {"seq": event["seq"], "op": event.get("op"), "source": "watchdog",
                                               "where": where, "state": "timed out"})
        if "enqueued" in body:
            m = _ENQUEUED.search(body)
            if m:
                unit.setdefault("enqueued", int(m.group(1)))
                unit.setdefault("completed", int(m.group(2)))
        if "Running collective: CollectiveFingerPrint" in body:
            for rank, seq, op, shape in _RUNNING.findall(body):
                other = self._unit("", int(rank), None, None)
                last = other.get("fingerprint") if other is not None else None
                if other is not None and (last is None or int(seq) > last["seq"]):
                    other["fingerprint"] = {"seq": int(seq), "op": op, "shape": shape or None, "where": where}
        elif "CollectiveFingerPrint" in body:
            for rank, seq, op, shape in _FINGERPRINT.findall(body):
                other = self._unit("", int(rank), None, None)
                if other is not None:
                    other.setdefault("fingerprint", {"seq": int(seq), "op": op, "shape": shape or None,
                                                     "where": where})

    def _progress(self, name: str, data: bytes) -> None:
        """The last progress line (`step 12`, `iteration 12/100`, `'global_step': 12`) of each rank in the chunk's
        last STEP_WINDOW bytes, read from the end until a rank comes round again (a rank's own file: its last line;
        one log of all ranks: each rank's last)."""
        window = len(data) - STEP_WINDOW if len(data) > STEP_WINDOW else 0
        lines, placed = set(), set()
        for m in reversed(list(_STEP.finditer(data, window))):
            start = data.rfind(b"\n", 0, m.start()) + 1
            if start in lines:
                continue
            lines.add(start)
            _, rank, local, host = _prefixes(data[start:m.start()].decode("utf-8", errors="replace"))
            unit = self._unit(name, rank, local, host)
            if unit is None:
                continue
            if id(unit) in placed:
                break
            placed.add(id(unit))
            unit["step"] = int(m.group(1))

    # -- places -----------------------------------------------------------------------------------------
    def _unit(self, name: str, rank: Optional[int], local: Optional[int], host: Optional[str],
              process: Optional[Tuple[str, int, int]] = None) -> Optional[Dict[str, Any]]:
        """The entry of the rank a line belongs to; `process`: (host, pid, GPU) of an NCCL line that names no rank."""
        ident = self.files.get(name) or RunFile(name)
        node = host or (process[0] if process else None) or ident.node or self.scanner.file_host(name)
        if rank is None and local is None:
            rank, local = ident.rank, ident.local_rank
        key = _unit_key(name, rank, local, node, process)
        if key is None:
            return None
        unit = self.units.get(key)
        if unit is None:
            if len(self.units) >= MAX_RANKS:
                return None
            unit = self.units[key] = {"files": []}
        if name and name not in unit["files"] and len(unit["files"]) < 8:
            unit["files"].append(name)
        if name:
            self.placed.add(name)
        if node and not unit.get("node"):
            unit["node"] = node
        if local is not None:
            unit.setdefault("local_rank", local)
        if key[0] == "process":
            unit.setdefault("pid", key[2])
        return unit

    def _unit_of_file(self, path: str) -> Optional[Dict[str, Any]]:
        return self._unit(path, None, None, None)

    # -- result -----------------------------------------------------------------------------------------
    def result(self) -> Dict[str, Any]:
        """{"run": …} (rules/facts.toml); {} when the files hold fewer than two ranks."""
        ranks = self._merged()
        if len(ranks) < 2:
            return {}
        nodes = sorted({r["node"] for r in ranks if r.get("node")})
        facts: Dict[str, Any] = {"ranks": ranks, "files": len(self.files), "nodes": nodes,
                                 "dumps": len(self.dumps)}
        if self.unreadable:
            facts["unplaced"] = list(self.unreadable)
        return {"run": facts}

    def _merged(self) -> List[Dict[str, Any]]:
        """One entry per rank: a local rank is the global rank its launcher or its lines name, or itself where the
        run has one node; a file whose rank cannot be told stays an entry of unknown rank."""
        known_nodes = {key[1] for key in self.units if key[0] == "local" and key[1]}
        single = len(known_nodes | {u.get("node") for u in self.units.values() if u.get("node")}) <= 1
        merged: Dict[Any, Dict[str, Any]] = {}
        for key, unit in self.units.items():
            target = self._target(key, unit, single)
            if target is None:
                continue  # a file of the run that says nothing of a rank (the launcher's console, a README)
            into = merged.setdefault(target, {"files": []})
            _merge(into, unit)
            if isinstance(target, int):
                into["rank"] = target
            elif target[0] == "local":
                into["local_rank"], into["node"] = target[2], target[1]
        ranks = [merged[k] for k in sorted(k for k in merged if isinstance(k, int))]
        ranks += [merged[k] for k in merged if not isinstance(k, int)]
        for entry in ranks:
            entry.setdefault("rank", None)
        return ranks[:MAX_RANKS]

    def _target(self, key: Tuple[Any, ...], unit: Dict[str, Any], single: bool) -> Any:
        """The rank an entry is merged into (a global rank; ("local", node, local rank) where none can be told; the
        entry's own key for a file of unknown rank); None for a file that says nothing of a rank."""
        if key[0] == "rank":
            return key[1]
        if key[0] == "local":
            target = self.local_to_rank.get((key[1], key[2]))
            if target is None and single:
                target = self.local_to_rank.get((None, key[2]), key[2])
            return ("local", key[1], key[2]) if target is None else target
        if not any(unit.get(k) for k in ("first_cause", "first_waiting", "collective", "exit", "dump")):
            return None
        return key


def _merge(into: Dict[str, Any], unit: Dict[str, Any]) -> None:
    for name in unit.get("files", []):
        if name not in into["files"] and len(into["files"]) < 8:
            into["files"].append(name)
    for key, value in unit.items():
        if key == "files":
            continue
        if key in ("first_cause", "first_waiting") and key in into:
            into[key] = _earlier(into[key], value)
        elif key == "failures":
            into[key] = into.get(key, 0) + value
        elif key == "step":
            into[key] = max(into.get(key, value), value)
        else:
            into.setdefault(key, value)


def _earlier(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, Any]:
    """The earlier of two first events of a rank (the one with a time of its own where only one has one)."""
    if a.get("t") is not None and b.get("t") is not None:
        return a if a["t"] <= b["t"] else b
    return b if a.get("t") is None and b.get("t") is not None else a


def _named_in_line(line: str, body: str, rank: Optional[int], local: Optional[int], events: List[Dict[str, Any]]
                   ) -> Tuple[Optional[int], Optional[int], Optional[Tuple[str, int, int]]]:
    """(the global rank, the local rank, NCCL's (host, pid, GPU)) a line names beyond its prefixes: a rank further
    into it, NCCL's prefix where no rank is named, and the ranks its events carry (which win)."""
    process = None
    if rank is None and local is None:
        named = _RANK_IN_LINE.search(line, 0, 240)
        if named:
            rank = int(named.group(1) or named.group(2))
        elif "NCCL" in body:
            nccl = _NCCL_PROCESS.match(body)
            process = (nccl.group(1), int(nccl.group(2)), int(nccl.group(3))) if nccl else None
    for event in events:
        if isinstance(event.get("rank"), int):
            rank = event["rank"]
        elif isinstance(event.get("local_rank"), int):
            local = event["local_rank"]
    return rank, local, process


def _unit_key(name: str, rank: Optional[int], local: Optional[int], node: Optional[str],
              process: Optional[Tuple[str, int, int]]) -> Optional[Tuple[Any, ...]]:
    """The key of a line's entry: its global rank, else its node's local rank, else NCCL's process, else its file;
    None for a line of no file."""
    if rank is not None:
        return ("rank", rank)
    if local is not None:
        return ("local", node, local)
    if process is not None:
        return ("process", process[0], process[1])
    return ("file", name) if name else None


def _prefixes(line: str) -> Tuple[str, Optional[int], Optional[int], Optional[str]]:
    """(the line without its launcher prefixes, the global rank, the local rank, the host they name)."""
    rank = local = host = None
    pos = 0
    for _ in range(4):
        m = _PREFIX.match(line, pos)
        if not m:
            break
        if m.group(1) == "rank":
            rank = int(m.group(2))
        elif m.group(1) == "default":
            local = int(m.group(2))
        elif m.group(3) is not None:
            rank = int(m.group(3))
        else:
            host = m.group(4)
        pos = m.end()
    return line[pos:], rank, local, host
