"""NVIDIA nccl-tests output (``all_reduce_perf``, ``all_gather_perf`` …), read into the same ``bench.nccl`` document
``gpudoctor bench nccl`` writes, so GD701 (``#wrong``) and GD702 (bus bandwidth) judge it.

What src/common.cu prints: a ``# nThread 1 nGpus 8 minBytes …`` line, one ``#  Rank  0 Group  0 Pid … device  0
[0x18] NVIDIA H100 80GB HBM3`` line per rank, then one row per size —
``size count type redop root`` and, out-of-place then in-place, ``time algbw busbw #wrong`` (``N/A`` where the
check is off) — and ``# Out of bounds values : 0 OK``, ``# Avg bus bandwidth    : 120.5``. A failure stops it with
``host: Test CUDA failure common.cu:941 'system not yet initialized'`` (or ``Test NCCL failure …``): the message
is kept (``failure``); the log reader turns the CUDA error itself into its event.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ._common import Builder, raw_lines
from .normalize import MAX_LINE, Lines

_RANK = re.compile(r"#[ \t]*Rank[ \t]+(\d{1,6})[ \t]+Group[ \t]+\d+[ \t]+Pid[ \t]+\d+[ \t]+on[ \t]+(\S{1,200})[ \t]+"
                   r"device[ \t]+(\d{1,3})[ \t]+\[[^\]]{0,40}\][ \t]+(.{1,100})$")
_NUM = r"(\d+(?:\.\d+)?|N/A)"
_ROW = re.compile(r"(\d{1,15})[ \t]+(\d{1,15})[ \t]+(\w{2,12})[ \t]+(\w{2,6}|none)[ \t]+(-?\d{1,4})[ \t]+"
                  + r"[ \t]+".join([_NUM] * 8) + r"[ \t]*$")
_OP = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce|sendrecv|gather|scatter|"
                 r"hypercube)_perf\b")
_OUT_OF_BOUNDS = re.compile(r"#[ \t]*Out of bounds values[ \t]*:[ \t]*(\d{1,12})[ \t]*(\w+)?")
_AVG = re.compile(r"#[ \t]*Avg bus bandwidth[ \t]*:[ \t]*(\d+(?:\.\d+)?)")
_FAILURE = re.compile(r"Test (CUDA|NCCL) failure ([\w./\-]{1,80}:\d{1,6}) '([^']{1,200})'")
_HEADER = "nThread"


def _number(text: str) -> Any:
    return None if text == "N/A" else float(text)


def _row(m: re.Match[str], op: str) -> Dict[str, Any]:
    size, count, dtype, redop, root = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)
    out = [_number(m.group(k)) for k in range(6, 14)]
    wrong = [int(v) for v in (out[3], out[7]) if v is not None]
    return {"op": op, "bytes": int(size), "count": int(count), "dtype": dtype, "redop": redop, "root": int(root),
            "time_us": out[0], "algbw_gbps": out[1], "busbw_gbps": out[2], "wrong": sum(wrong) if wrong else None,
            "in_place": {"time_us": out[4], "algbw_gbps": out[5], "busbw_gbps": out[6]}}


class _Output:
    """What one nccl-tests output says, read line by line: its ranks' devices, its rows, the summary and failure."""

    def __init__(self, op: str) -> None:
        self.op = op
        self.rows: List[Dict[str, Any]] = []
        self.devices: List[Dict[str, Any]] = []
        self.doc: Dict[str, Any] = {}
        self.first: Optional[int] = None  # the line the output starts at

    def comment(self, s: str, i: Optional[int]) -> None:
        """A `#` line: a rank's device, the header, the out-of-bounds count, the average bus bandwidth."""
        m = _RANK.match(s)
        if m:
            self.devices.append({"rank": int(m.group(1)), "host": m.group(2), "device": int(m.group(3)),
                                 "name": m.group(4).strip()})
        elif _HEADER in s and self.first is None:
            self.first = i
        elif (m := _OUT_OF_BOUNDS.match(s)):
            self.doc["out_of_bounds"] = int(m.group(1))
        elif (m := _AVG.match(s)):
            self.doc["avg_busbw_gbps"] = float(m.group(1))

    def body(self, s: str, i: Optional[int]) -> None:
        """A row of the table, or the failure that stopped the test."""
        if s[0].isdigit() and (m := _ROW.match(s)):
            self.rows.append(_row(m, self.op))
            self.first = i if self.first is None else self.first
        elif "failure" in s and (m := _FAILURE.search(s)):
            self.doc["failure"] = {"library": m.group(1), "where": m.group(2), "error": m.group(3), "line": s[:300]}
            self.first = i if self.first is None else self.first


def parse(lines: Lines, name: str) -> Builder:
    builder = Builder(name, lines, "nccl_tests")
    op_match = _OP.search(lines.text)
    out = _Output(op_match.group(1) if op_match else "collective")
    for i, line in raw_lines(lines):  # its `#` lines are comments, not the root prompts the line parsers drop
        s = line.strip()[:MAX_LINE]
        if s.startswith("#"):
            out.comment(s, i)
        elif s:
            out.body(s, i)
    doc = out.doc
    if not out.rows and "failure" not in doc:
        return builder
    result = {"op": out.op, "backend": "nccl", "world_size": len(out.devices) or None, "rows": out.rows,
              "source": "nccl-tests", **doc}
    if "avg_busbw_gbps" in doc:
        result["summary"] = {"avg_busbw_gbps": doc["avg_busbw_gbps"], "min_busbw_gbps": None}
    if out.devices:
        result["devices"] = out.devices
    builder.set("bench.nccl", result, out.first, "nccl-tests output")
    return builder
