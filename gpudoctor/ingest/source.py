"""Read pasted report files (``check --from``, ``snapshot --from``) into one Snapshot.

The parsers in this package are pure; this module is the only one that touches files. Each file is decoded
(UTF-8, or UTF-16 as PowerShell's ``>`` writes it; undecodable bytes replaced), parsed, and the reports merge
(first value wins, differences become conflicts). A file that cannot be read or recognised becomes an
``inputs`` entry (GD003) as long as another file could be used; when none can, ReportError says why in one line.
"""

from __future__ import annotations

import sys
from typing import BinaryIO, List, Optional, Sequence

from gpudoctor.ingest import ParsedReport, ReportError, merge_reports, missing_facts, parse_report

MAX_REPORT_BYTES = 64 * 1024 * 1024


def decode_report(data: bytes) -> str:
    if data.startswith(b"\xff\xfe") or data.startswith(b"\xfe\xff"):
        return data.decode("utf-16", errors="replace")
    head = data[:400]
    if len(head) >= 8 and head[1::2].count(0) > len(head) // 4 and head[0::2].count(0) < len(head) // 8:
        return data.decode("utf-16-le", errors="replace")  # UTF-16 without a BOM
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", errors="replace")


def read_report(path: str, stdin: Optional[BinaryIO] = None) -> str:
    """The text of one report file (``-``: standard input). ReportError when it cannot be read."""
    try:
        if path == "-":
            stream = stdin if stdin is not None else sys.stdin.buffer
            data = stream.read(MAX_REPORT_BYTES + 1)
        else:
            with open(path, "rb") as handle:
                data = handle.read(MAX_REPORT_BYTES + 1)
    except FileNotFoundError:
        raise ReportError("cannot read report %r: no such file" % path) from None
    except IsADirectoryError:
        raise ReportError("cannot read report %r: is a directory" % path) from None
    except OSError as exc:
        raise ReportError("cannot read report %r: %s" % (path, exc.strerror or exc)) from None
    if len(data) > MAX_REPORT_BYTES:
        raise ReportError("cannot read report %r: larger than %d MiB" % (path, MAX_REPORT_BYTES // 2 ** 20))
    return decode_report(data)


def snapshot_from_reports(paths: Sequence[str], stdin: Optional[BinaryIO] = None):
    """A Snapshot (source kind "report") from one or more report files."""
    from gpudoctor.snapshot import Snapshot

    reports: List[ParsedReport] = []
    failed = []
    for path in paths:
        name = "<stdin>" if path == "-" else path
        try:
            reports.append(parse_report(read_report(path, stdin), name))
        except ReportError as exc:
            failed.append((name, str(exc)))
    if not reports:
        raise ReportError(failed[0][1] if len(failed) == 1 else
                          "no report could be read: " + "; ".join(msg for _, msg in failed))
    facts, evidence, conflicts = merge_reports(reports)
    for name, msg in failed:
        facts.setdefault("inputs", []).append(
            {"path": name, "kind": "report", "error": msg, "line": None, "column": None})
    source = {
        "kind": "report",
        "paths": ["<stdin>" if p == "-" else p for p in paths],
        "formats": [r.kind for r in reports],
        "missing": missing_facts(facts),
    }
    warnings = [w for r in reports for w in r.warnings]
    if warnings:
        source["warnings"] = warnings
    return Snapshot(facts=facts, probes=[], source=source, evidence=evidence, conflicts=conflicts)
